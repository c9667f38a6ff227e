#!/usr/bin/env bash
# Idempotent: .venv-trainers, a second venv with LLaMA-Factory, ms-swift and verl for
# tests/convert/test_trainer_loaders.py (they pin transformers/datasets versions the
# main .venv cannot take). Only their data-loading imports are installed (--no-deps).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
V=.venv-trainers
stamp=$V/.trainers-installed
if [ -f "$stamp" ] && [ "$stamp" -nt "$0" ]; then exit 0; fi
[ -x $V/bin/python ] || { echo "[setup-trainers] creating $V"; "$PY" -m venv $V; }
P="$V/bin/python -m pip install -q"
# torch first: the CPU build on local disk (a bare `torch` pulls a multi-GB CUDA build).
$V/bin/python -c "import torch" >/dev/null 2>&1 || $P torch==2.13.0
# transformers 5.5.x fits LLaMA-Factory (<=5.6) and verl (>=5.5.3). datasets 4.8.4: ms-swift
# 4.6 imports datasets.features.Json (not in 4.0.0, LLaMA-Factory's cap; LLaMA-Factory's data
# code also imports torchaudio, which has no build for torch 2.13, so it is not run).
# torch is already there and pinned, so not upgraded.
$P "torch==2.13.0" "transformers>=5.5.3,<5.6" "datasets==4.8.4" "accelerate<=1.11" \
   pillow pandas pyarrow omegaconf numpy msgpack cryptography protobuf json_repair jsonschema \
   pyvers cloudpickle orjson importlib_metadata
$P --no-deps llamafactory==0.9.5 ms-swift==4.6.0 verl==0.9.1 "peft==0.18.*" \
   "tensordict==0.10.0" ray modelscope modelscope_hub
touch "$stamp"
echo "[setup-trainers] ready"
