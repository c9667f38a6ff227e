#!/usr/bin/env bash
# Everything that needs a GPU, in one call on a GPU machine (about 7 minutes on one H200):
# the CUDA training tests, the SFT engines on real set batches (benchmarks/train_engines.py:
# TRL engine and builtin loop, padded and packed; s/step, tokens/s, MFU, peak memory,
# data-wait share) and the builtin loop's synthetic throughput (train_gpu.py). Logs and
# JSON land in OUT (default gpu-results/); each step has its own time limit so one failure
# does not eat the others' time.
#
#   bash benchmarks/gpu_checks.sh [--tiny] [--all] [OUT]
#
#   --tiny  the engines' rows on CPU with the tiny model and a small built set (< 2 min);
#           what tests/benchmarks/test_gpu_checks_tiny.py runs. No GPU, nothing installed.
#   --all   also train_gpu.py in bf16 and the 3B VLM batching benchmark (about 3 min more).
#
# The GPU machine has torch, transformers and accelerate but no TRL, datasets, pydantic or
# webdataset and no network: the bundle benchmarks/gpu_bundle.sh builds carries their wheels
# (WHEELS, default bundle/wheels) and a slice of the demo's reasoning set (GPU_SET, default
# bundle/reasoning); they are installed here with pip --no-index into the machine's python.
set -uo pipefail
tiny=0 all=0
while [[ $# -gt 0 && $1 == --* ]]; do
  case $1 in
    --tiny) tiny=1 ;;
    --all) all=1 ;;
    *) echo "gpu_checks.sh: unknown option $1 (--tiny, --all)" >&2; exit 2 ;;
  esac
  shift
done
out=${1:-gpu-results}
mkdir -p "$out"
py=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export TRAJFORGE_DATA=${TRAJFORGE_DATA:-/tmp/trajforge-gpu}
failed=0

step() {  # step NAME SECONDS CMD...: run, log to $out/NAME.log, record the exit status
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  echo "== $name (limit ${limit}s)"
  timeout "$limit" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  [[ $rc -ne 0 ]] && failed=1
  echo "$name rc=$rc $((SECONDS - t0))s" | tee -a "$out/steps.txt"
  tail -n 12 "$out/$name.log"
}

if [[ $tiny -eq 1 ]]; then
  step train_engines_tiny 280 $py benchmarks/train_engines.py --tiny --device cpu --out "$out/train_engines.jsonl"
  cat "$out/steps.txt"
  exit $failed
fi

wheels=${WHEELS:-bundle/wheels}
if [[ -d $wheels ]]; then
  # only what the machine lacks; its own torch stays
  $py -m pip install -q --no-index --find-links "$wheels" --no-deps "$wheels"/*.whl >"$out/pip.log" 2>&1 \
    || { echo "pip install from $wheels failed (see $out/pip.log)"; exit 1; }
fi
missing=$($py - <<'PY'
import importlib.util
mods = ("trl", "datasets", "pydantic", "webdataset", "accelerate", "pyarrow", "xxhash", "yaml", "PIL")
print(" ".join(m for m in mods if importlib.util.find_spec(m) is None))
PY
)
[[ -z $missing ]] || { echo "missing on this machine: $missing (EXTRA_PACKAGES in benchmarks/gpu_bundle.sh)"; exit 1; }
gpu_set=${GPU_SET:-bundle/reasoning}
[[ -f $gpu_set/manifest.json ]] || { echo "no reasoning set at $gpu_set (GPU_SET; see benchmarks/gpu_bundle.sh)"; exit 1; }

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"
$py -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" \
  | tee -a "$out/gpu.txt"
step test_cuda 150 $py -m pytest -q -p no:cacheprovider -o addopts="" tests/training/test_cuda.py tests/training/test_precision.py
# the engines as labs run them: checkpointing on (the padded TRL batch of 8 needs it), 6 timed steps
step train_engines 330 $py benchmarks/train_engines.py --set "$gpu_set" --grad-ckpt --out "$out/train_engines.jsonl"
step train_gpu_mixed 120 $py benchmarks/train_gpu.py --precision mixed
if [[ $all -eq 1 ]]; then
  step train_gpu_bf16 120 $py benchmarks/train_gpu.py --precision bf16
  step vlm_batching_3b 90 $py benchmarks/vlm_batching.py --random-config 3b --device cuda --batch-size 16 --requests 32
fi
grep -h '^{' "$out"/train_gpu_*.log "$out"/vlm_batching_3b.log > "$out/results.jsonl" 2>/dev/null
cat "$out/steps.txt"
exit $failed
