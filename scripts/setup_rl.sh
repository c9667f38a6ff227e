#!/usr/bin/env bash
# Idempotent: .venv-rl, a venv with the RL frameworks whose own classes the protocol
# adapters' tests drive (tests/envs/protocols/): OpenEnv, SkyRL-Gym, GEM, OpenRLHF's
# agent API. Their pins (gradio, omegaconf, reasoning_gym, ...) stay out of .venv; and
# .venv-nemo with NeMo Gym.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
V=.venv-rl
stamp=$V/.rl-installed
if [ -f "$stamp" ] && [ "$stamp" -nt "$0" ]; then exit 0; fi
[ -x $V/bin/python ] || { echo "[setup-rl] creating $V"; "$PY" -m venv $V; }
P="$V/bin/python -m pip install -q"
$P "openenv-core==0.3.0" "skyrl-gym==0.4.0" "gem-llm==0.1.0" httpx requests pillow numpy pytest
# OpenRLHF's agent API (openrlhf.utils.agent) is plain asyncio + aiohttp; the package's
# own requirements (deepspeed, vllm, flash-attn) build only on a GPU machine.
$P --no-deps "openrlhf==0.11.2"
$P aiohttp
# TRL's GRPOTrainer (in .venv) plays served envs through OpenEnv's client
# (training/engines/trl_openenv.py): openenv-core in .venv too, without gradio (its web UI,
# imported only if present), whose pin (pillow<13) .venv cannot take; fastmcp is imported.
.venv/bin/python -m pip install -q --no-deps "openenv-core==0.3.0"
.venv/bin/python -m pip install -q "fastmcp==4.2.3" "tomli-w==1.2.0"
# NeMo Gym (tests/envs/protocols/test_nemo_gym.py runs its SimpleAgent): a venv of its own,
# as it pins openai<=2.7.2 (.venv-rl has 3.x). nemo-gym declares Python >= 3.12, but its
# code parses and runs on 3.11; its modules import ray, hydra, omegaconf, wandb and more.
N=.venv-nemo
[ -x $N/bin/python ] || { echo "[setup-rl] creating $N"; "$PY" -m venv $N; }
$N/bin/python -m pip install -q --no-deps --ignore-requires-python "nemo-gym==0.4.0"
$N/bin/python -m pip install -q "openai<=2.7.2" fastapi uvicorn aiohttp itsdangerous omegaconf hydra-core \
    orjson devtools rich pydot gprof2dot yappi pandas requests ray wandb httpx
touch "$stamp"
echo "[setup-rl] ready"
