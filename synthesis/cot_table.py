"""The CoT table: a thought for every kept step of the curated store, with its alignment.

Trajectories are streamed in (trajectory_id, index) order through the exporter's
out-of-core sort, so memory holds one chunk of trajectories at a time. With no
model the template backend writes the thoughts (labelled "template") and the
alignment is "unchecked"; with a VLM each chunk is sent in batches, then the
re-prediction and box checks run on the same items.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from schemas.arrow import row_to_step
from schemas.records import Step, Trajectory
from trajforge.publish.plan import committed_trajectories, group_by_trajectory, sorted_step_rows
from trajforge.store.raw import RawStore, atomic_write_bytes

from .alignment import AlignmentSettings, check_alignment
from .cot import StepItem, VLMCoT, generate_cot, supported
from .step_cot import COT_SCHEMA

ALIGNMENT_TYPE = pa.struct(
    [
        ("match_rate", pa.float64()),
        ("n", pa.int32()),
        ("box", pa.list_(pa.float64())),
        ("point_in_box", pa.bool_()),
        ("keep", pa.bool_()),
        ("reason", pa.string()),
        ("unparsed", pa.int32()),
    ]
)
TABLE_SCHEMA = COT_SCHEMA.append(pa.field("alignment", ALIGNMENT_TYPE))


def iter_store_trajectories(store: RawStore, tmp_dir: Path) -> Iterator[tuple[Trajectory, list[Step]]]:
    """(trajectory, its steps in index order) for every committed trajectory of a store."""
    chosen, _bad = committed_trajectories(store, None)
    for tid, rows in group_by_trajectory(sorted_step_rows(chosen, tmp_dir)):
        traj, source = chosen[tid]
        yield traj, [row_to_step(r, source=source) for r in rows]


def _chunks(pairs, size: int):
    chunk = []
    for pair in pairs:
        chunk.append(pair)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _cot_rows(
    store, tmp, backend, align_n, min_match, batch_size, chunk_trajectories, skipped
) -> Iterator[list[dict]]:
    """Batches of table rows, in (trajectory_id, index) order."""
    pairs = iter_store_trajectories(store, tmp)
    if backend is None:
        for chunk in _chunks(generate_cot(pairs, None, skipped=skipped), 512):
            yield [{**cot.to_row(), "alignment": None} for cot in chunk]
        return
    vlm = VLMCoT(backend, batch_size=batch_size)
    for chunk in _chunks(pairs, chunk_trajectories):
        items = []
        for traj, steps in chunk:
            for pos, step in enumerate(steps):
                if not supported(step):
                    skipped["unsupported_action"] += 1
                    continue
                image = store.blobs.get(step.screenshot, step.image_format) if step.screenshot else b""
                items.append(StepItem(traj, steps, pos, image))
        cots = vlm.generate_many(items)
        settings = AlignmentSettings(n=align_n, min_match=min_match, batch_size=batch_size)
        checks = check_alignment(backend, items, settings, cots=cots)
        yield [{**cot.to_row(), "alignment": check.to_row()} for cot, check in zip(cots, checks)]


def write_cot_table(
    store: RawStore,
    out_dir: Path,
    *,
    backend=None,
    align_n: int = 10,
    min_match: float = 0.3,
    batch_size: int = 16,
    chunk_trajectories: int = 32,
    progress: Callable[[str], None] | None = None,
) -> dict:
    """Write out_dir/cot.parquet (one row per step with a thought) and summary.json."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    say = progress or (lambda msg: None)
    skipped: Counter = Counter()
    langs: Counter = Counter()
    align: Counter = Counter()
    reasons: Counter = Counter()
    n = parsed = 0
    tmp = Path(tempfile.mkdtemp(prefix=".cot-", dir=out_dir))
    part = tmp / "cot.parquet"
    try:
        # Pairs arrive sorted by (trajectory_id, index): rows stream straight to Parquet.
        with pq.ParquetWriter(part, TABLE_SCHEMA, compression="zstd") as writer:
            for batch in _cot_rows(
                store, tmp, backend, align_n, min_match, batch_size, chunk_trajectories, skipped
            ):
                writer.write_table(pa.Table.from_pylist(batch, schema=TABLE_SCHEMA))
                for r in batch:
                    n += 1
                    parsed += bool(r["parsed"])
                    langs[r["language"]] += 1
                    a = r["alignment"]
                    if a is not None and a["n"]:
                        align["checked"] += 1
                        align["kept"] += bool(a["keep"])
                    if a is not None and a["reason"]:
                        reasons[a["reason"]] += 1
                say(f"cot: {n} steps")
        part.replace(out_dir / "cot.parquet")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    summary = {
        "steps": n,
        "backend": backend.model_id if backend is not None else "template",
        "parsed": parsed,
        "languages": dict(sorted(langs.items())),
        "skipped": dict(skipped),
        "alignment": {"checked": align["checked"], "kept": align["kept"], "reasons": dict(reasons)},
    }
    atomic_write_bytes(out_dir / "summary.json", json.dumps(summary, indent=1, ensure_ascii=False).encode())
    say(f"cot: {summary['steps']} steps by {summary['backend']}, {summary['parsed']} parsed")
    return summary


def read_cot_rows(out_dir: Path) -> list[dict]:
    """The CoT table's rows (dicts), as the set writers take them."""
    rows = pq.read_table(Path(out_dir) / "cot.parquet").to_pylist()
    for r in rows:
        if r["alignment"] is None:
            del r["alignment"]
    return rows
