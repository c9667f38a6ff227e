#!/usr/bin/env bash
# Idempotent: .venv-trainers, a second venv with ms-swift and verl for
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
# torch 2.14.1 + torchvision 0.29.1: the builds on local disk (no download) that import
# together (PyPI's torchvision fails beside the CPU torch 2.13.0 of .venv). torchvision is
# what qwen_vl_utils needs: ms-swift's Qwen2-VL template and verl's image expansion use it.
$P torch==2.14.1 torchvision==0.29.1
# transformers 5.5.x fits ms-swift and verl (>=5.5.3). datasets 4.8.4: ms-swift 4.6 imports
# datasets.features.Json. LLaMA-Factory pins datasets<=4.0.0 and imports torchaudio: it has
# a venv of its own (scripts/setup_llamafactory.sh).
$P "torch==2.14.1" "torchvision==0.29.1" "transformers>=5.5.3,<5.6" "datasets==4.8.4" \
   "accelerate<=1.11" pillow pandas pyarrow omegaconf numpy msgpack cryptography protobuf \
   json_repair jsonschema pyvers cloudpickle orjson importlib_metadata requests
# What verl's agent loop imports (verl.experimental.agent_loop: hydra instantiates the loops,
# its rollout server module imports fastapi and uvicorn): tests/envs/test_verl_agent_loop.py.
$P "hydra-core==1.3.*" codetiming cachetools fastapi uvicorn
$P --no-deps ms-swift==4.6.0 verl==0.9.1 "peft==0.18.*" "tensordict==0.10.0" ray modelscope \
   modelscope_hub qwen_vl_utils
# What `swift sft` itself imports beyond the loaders (training/engines/swift.py).
$P einops
# verl.trainer.ppo.ray_trainer (compute_advantage, the RL trainer) imports torchdata's
# StatefulDataLoader; --no-deps keeps the torch pinned above (it asks only torch>=2).
$P --no-deps "torchdata==0.11.0"
touch "$stamp"
echo "[setup-trainers] ready"
