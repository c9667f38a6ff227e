#!/usr/bin/env bash
# Idempotent: .venv-llamafactory, a third venv for LLaMA-Factory 0.9.5 with its own pins, so
# tests/convert/test_trainer_loaders.py runs its real data path (and a 2-step train). Its own
# venv: it pins datasets<=4.0.0 (ms-swift 4.6 in .venv-trainers needs newer) and its
# mm_plugin imports torchaudio, which has no build for the CPU torch 2.13 of .venv.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
V=.venv-llamafactory
stamp=$V/.llamafactory-installed
if [ -f "$stamp" ] && [ "$stamp" -nt "$0" ]; then exit 0; fi
[ -x $V/bin/python ] || { echo "[setup-llamafactory] creating $V"; "$PY" -m venv $V; }
P="$V/bin/python -m pip install -q"
# PyPI's torch 2.10.0 (a CUDA build; runs on CPU; ~7 GB with its nvidia wheels) and the
# torchvision/torchaudio built for it: torchaudio loads beside it (not beside the CPU 2.13 of
# .venv), and LLaMA-Factory's load_model refuses Conv3D models such as Qwen2-VL on torch 2.9.x.
T="torch==2.10.0 torchvision==0.25.0 torchaudio==2.10.0"
$P $T
# LLaMA-Factory with all its own pins (datasets<=4.0.0, transformers<=5.6, ...); torch stays.
$P $T llamafactory==0.9.5
touch "$stamp"
echo "[setup-llamafactory] ready"
