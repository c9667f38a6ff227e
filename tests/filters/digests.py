"""The sha256 of every file curate() writes, for the planted raw store under a few configs.

Prints {case: {path: sha256}} as JSON, so two versions of the code can be compared on
the same input (issue 25 rule 9: curation's outputs are byte-identical across a
refactor). The raw store is built under DIR/raw unless one is there already: a second
run reuses it, since its trajectories name the commit that built them
(`pipeline_version`, which the curated store keeps). Run the older checkout first, then
this one, on the same DIR (error messages in the tables name the input's path):

    cd /tmp && PYTHONPATH=/tmp/base-curate python $REPO/tests/filters/digests.py /tmp/d > base.json
    find /tmp/d -mindepth 1 -maxdepth 1 ! -name raw -exec rm -r {} +
    PYTHONPATH=$REPO python $REPO/tests/filters/digests.py /tmp/d > new.json && cmp base.json new.json

Only the public API is used (curate, CurateConfig, Judge), so an older checkout runs it too.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tests.filters.conftest import build_raw
from trajforge.store.raw import BlobStore

try:  # where CurateConfig lives moved with the stages; the digests must run on both sides
    from filters.config import CurateConfig
except ImportError:
    from filters.pipeline import CurateConfig
from filters.pipeline import curate


class _Backend:
    """A scripted VLM: the judge's answers per trajectory."""

    model_id = "scripted-judge"
    answers = {
        "t00_failed": '{"success": false, "irrelevant_steps": []}',
        "t03_noop": '{"success": false, "irrelevant_steps": [2]}',
        "t04_loop": '{"success": true, "irrelevant_steps": [1]}',
        "t05_bounds": '{"success": false, "irrelevant_steps": []}',
    }

    def generate(self, requests, max_new_tokens):
        return [self.answers.get(r.key, '{"success": true, "irrelevant_steps": []}') for r in requests]


def _unverified_copy(raw_dir: Path) -> Path:
    """raw_steps with two trajectories unverified, so the judge decides them."""
    table = pq.read_table(raw_dir / "trajectories.parquet")
    rows = table.to_pylist()
    for row in rows:
        if row["trajectory_id"] in ("t04_loop", "t05_bounds"):
            row.update(outcome="unknown", verified_by="none")
    d = raw_dir.with_name("raw_steps_unverified")
    d.mkdir(parents=True, exist_ok=True)
    (d / "steps.parquet").write_bytes((raw_dir / "steps.parquet").read_bytes())
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), d / "trajectories.parquet")
    return d


def digests(out_dir: Path) -> dict[str, str]:
    return {
        str(p.relative_to(out_dir)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(out_dir.rglob("*"))
        if p.is_file()
    }


def run_cases(root: Path) -> dict[str, dict[str, str]]:
    from filters.judge import Judge

    raw_dir, blobs = root / "raw" / "raw_steps", BlobStore(root / "raw" / "blobs")
    if not raw_dir.exists():
        build_raw(root / "raw")
    real = dict(synthetic_sources=())
    cases = {
        "default": (raw_dir, CurateConfig(), None),
        "real_no_ocr": (raw_dir, CurateConfig(ocr="never", **real), None),
        "real_ocr_always": (raw_dir, CurateConfig(ocr="always", **real), None),
        "small_batches": (raw_dir, CurateConfig(batch_rows=5, workers=1, judge_batch=1, **real), None),
        "no_scrub": (raw_dir, CurateConfig(scrub=False), None),
        "judge": (_unverified_copy(raw_dir), CurateConfig(ocr="never", **real), Judge(_Backend())),
    }
    out = {}
    for name, (case_raw, config, judge) in cases.items():
        curate(case_raw, blobs, root / name, config=config, judge=judge)
        out[name] = digests(root / name)
    # A re-run over the previous output: the store is swapped, the tables replaced.
    curate(raw_dir, blobs, root / "default", config=CurateConfig())
    out["default_rerun"] = digests(root / "default")
    return out


if __name__ == "__main__":
    print(json.dumps(run_cases(Path(sys.argv[1])), indent=1, sort_keys=True))
