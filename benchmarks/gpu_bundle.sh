#!/usr/bin/env bash
# The carry bundle for benchmarks/gpu_checks.sh on a GPU machine without network (64 MiB in all):
# wheels of what that machine lacks, a slice of a reasoning set, and nothing else (the code
# travels as the worktree). Writes bundle/ at the repository root (git-ignored):
#
#   bash benchmarks/gpu_bundle.sh SET_DIR [SHARDS]      # e.g. data/shards/reasoning 2
#
#   bundle/wheels/     pip download --no-deps of the versions this .venv runs (TRL, datasets,
#                      dill, multiprocess, pydantic, pydantic-core, annotated-types,
#                      typing-inspection, webdataset, braceexpand; transformers too with
#                      WITH_TRANSFORMERS=1, for a machine whose own differs), for the GPU
#                      machine's python (PY_VERSION, default this one's; PLATFORM, default
#                      manylinux_2_28_x86_64) from the pip cache or the configured index
#   bundle/reasoning/  the set's manifest and its first SHARDS train shards (default 2)
#
# Then: carry bundle/ with the run (the device tool's `carry`), and on the machine
#   bash benchmarks/gpu_checks.sh gpu-results
set -euo pipefail
set_dir=${1:?usage: gpu_bundle.sh SET_DIR [SHARDS]}
shards=${2:-2}
py=${PYTHON:-.venv/bin/python}
out=bundle
[[ -f $set_dir/manifest.json ]] || { echo "gpu_bundle.sh: no manifest.json in $set_dir" >&2; exit 1; }
rm -rf "$out" && mkdir -p "$out/wheels"

packages=(trl datasets dill multiprocess pydantic pydantic-core annotated-types typing-inspection webdataset braceexpand)
[[ ${WITH_TRANSFORMERS:-0} == 1 ]] && packages+=(transformers)
# more of what the machine may lack (e.g. EXTRA_PACKAGES="xxhash pyarrow"): gpu_checks.sh's
# import check names what is missing
read -r -a extra <<<"${EXTRA_PACKAGES:-}"
packages+=("${extra[@]}")
pins=$("$py" - "${packages[@]}" <<'PY'
import importlib.metadata as m, sys
print(" ".join(f"{p}=={m.version(p)}" for p in sys.argv[1:]))
PY
)
py_version=${PY_VERSION:-$("$py" -c 'import sys; print(f"{sys.version_info[0]}{sys.version_info[1]}")')}
# shellcheck disable=SC2086
"$py" -m pip download -q --no-deps --only-binary=:all: --python-version "$py_version" \
  --platform "${PLATFORM:-manylinux_2_28_x86_64}" --platform manylinux2014_x86_64 --platform any \
  -d "$out/wheels" $pins

"$py" - "$set_dir" "$out/reasoning" "$shards" <<'PY'
"""The manifest and the first N train shards of a reasoning set (the rest dropped from it)."""
import json, shutil, sys
from pathlib import Path

src, dst, n = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
manifest = json.loads((src / "manifest.json").read_text())
kept = [s for s in manifest["shards"] if s["split"] == "train"][:n]
if not kept:
    sys.exit(f"gpu_bundle.sh: {src} has no train shard")
dst.mkdir(parents=True)
for s in kept:
    (dst / s["name"]).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(src / s["name"], dst / s["name"])
manifest["shards"] = kept
manifest["sliced_from"] = {"path": str(src), "train_shards": n}
(dst / "manifest.json").write_text(json.dumps(manifest, indent=1))
PY
du -sh "$out"/wheels "$out"/reasoning
total=$(du -sm "$out" | cut -f1)
echo "bundle/: ${total} MiB"
if (( total > 64 )); then
  echo "gpu_bundle.sh: bundle/ is ${total} MiB, over the 64 MiB carry limit (fewer SHARDS)" >&2
  exit 1
fi
