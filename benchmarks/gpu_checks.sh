#!/usr/bin/env bash
# Everything that needs a GPU, in one call on a GPU machine (about 5 minutes on one H200):
# the CUDA training tests, SFT/RL throughput in both precisions, VLM batching on a
# 3B-shaped model. Logs and JSON land in $1 (default gpu-results/); each step has its
# own time limit so one failure does not eat the others' time.
#
#   bash benchmarks/gpu_checks.sh [out_dir]
#
# Uses the machine's python3 (its own torch); PYTHONPATH must reach this repo and any
# missing packages (pydantic, duckdb, webdataset: see docs/benchmarks.md "GPU").
set -uo pipefail
out=${1:-gpu-results}
mkdir -p "$out"
py=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export TRAJFORGE_DATA=${TRAJFORGE_DATA:-/tmp/trajforge-gpu}

step() {  # step NAME SECONDS CMD...: run, log to $out/NAME.log, record the exit status
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  echo "== $name (limit ${limit}s)"
  timeout "$limit" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  echo "$name rc=$rc ${SECONDS}s-${t0}s" | tee -a "$out/steps.txt"
  tail -n 25 "$out/$name.log"
}

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"
$py -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" \
  | tee -a "$out/gpu.txt"
step test_cuda 200 $py -m pytest -q -p no:cacheprovider -o addopts="" tests/training/test_cuda.py tests/training/test_precision.py
step train_gpu_mixed 150 $py benchmarks/train_gpu.py --precision mixed
step train_gpu_bf16 120 $py benchmarks/train_gpu.py --precision bf16
step vlm_batching_3b 90 $py benchmarks/vlm_batching.py --random-config 3b --device cuda --batch-size 16 --requests 32
grep -h '^{' "$out"/train_gpu_*.log "$out"/vlm_batching_3b.log > "$out/results.jsonl" 2>/dev/null
cat "$out/steps.txt"
