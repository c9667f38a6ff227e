#!/usr/bin/env bash
# What `make test` needs beyond `make demo`'s set-up (scripts/setup.sh): the trainers'
# own loaders in venvs of their own, whose pins the project's .venv cannot take:
# .venv-trainers (ms-swift, verl) and .venv-llamafactory (its datasets/torchaudio pins
# fit neither of the others). Idempotent, like setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/setup_trainers.sh
bash scripts/setup_llamafactory.sh
# The RL frameworks whose own classes the protocol adapters are tested with.
bash scripts/setup_rl.sh
# Desktop environments: Xvfb, the AT-SPI bus, Debian apps, PyGObject and python-xlib.
bash scripts/setup_desktop.sh
