#!/usr/bin/env bash
# Idempotent set-up on a fresh Debian machine: system packages, Node packages,
# and the Python project in .venv. Safe to run again; each step skips itself
# when its result is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi

need_apt=()
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
command -v chromedriver >/dev/null 2>&1 || need_apt+=(chromium-driver)
# grep reads all of it (no -q): an early exit would SIGPIPE fc-list and, under
# pipefail, read as "missing" and reinstall the fonts on every run.
fc-list 2>/dev/null | grep -i "Noto Sans CJK" >/dev/null || need_apt+=(fonts-noto-cjk)
command -v node >/dev/null 2>&1 || need_apt+=(nodejs npm)
# PostgreSQL for the test that runs Dagster's storage on a real server (started by the test).
# The package also creates the 'postgres' user the server runs as when tests run as root.
{ { command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; } \
  && id postgres >/dev/null 2>&1; } || need_apt+=(postgresql)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "[setup] apt-get install ${need_apt[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "[setup] creating .venv"
  "$PY" -m venv .venv
fi
VPY=.venv/bin/python

# torch first, pinned: the CPU build on local disk. A bare `torch` would pull
# a multi-GB CUDA build. pyproject keeps the range open for GPU nodes.
if ! $VPY -c "import torch" >/dev/null 2>&1; then
  echo "[setup] pip install torch==2.13.0"
  $VPY -m pip install -q torch==2.13.0
fi

stamp=.venv/.trajforge-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "[setup] pip install -e .[all,dev]"
  $VPY -m pip install -q --upgrade pip >/dev/null
  $VPY -m pip install -q -e ".[all,dev]"
  touch "$stamp"
fi

# Appium 3 and its Chromium driver, pinned in package.json / package-lock.json.
# `npm install` rather than `npm ci`: npm 11 leaves other platforms' optional
# packages (sharp's) out of the lock and then refuses `ci`.
if [ -f package.json ]; then
  if [ ! -x node_modules/.bin/appium ] || [ package.json -nt node_modules/.stamp ] \
     || [ package-lock.json -nt node_modules/.stamp ]; then
    echo "[setup] npm install (appium, appium-chromium-driver)"
    npm install --no-audit --no-fund --loglevel=error
    touch node_modules/.stamp
  fi
fi
# The trainers' own loaders (ms-swift, verl; LLaMA-Factory) live in their own venvs,
# built by `make test` only (scripts/setup_test.sh): the demo never uses them.
echo "[setup] ready"
