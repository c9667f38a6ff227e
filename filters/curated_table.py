"""Reading the raw steps table in order and writing the curation's outputs.

- `sorted_groups`: the raw step rows sorted by (trajectory_id, index), one
  trajectory at a time. DuckDB sorts out of core (spilling past its memory
  limit), so "earlier" is the same whatever the store's batching and memory
  stays flat; the file row number breaks ties between repeated indices.
- The verdict tables' schemas (`steps_schema`, TRAJECTORY_VERDICT_SCHEMA).
- `CuratedWriter`: the curated store keeps each trajectory's original
  num_steps and its kept steps' original indices (gaps where steps were
  dropped), which the raw store's writer refuses; the export reads it with
  `allow_index_gaps=True`.
- `swap_in`: replaces a folder atomically enough for a re-run (new one renamed
  into place, the old one removed after), so the curated store never holds
  two runs' trajectories.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Iterator

import pyarrow as pa

from schemas.records import Step, Trajectory
from trajforge.store.raw import BlobStore, TrajectoryWriter, atomic_write_bytes
from trajforge.publish.plan import group_by_trajectory

from .base import BASE_COLUMNS

DUCKDB_MEMORY = "512MB"

PII_COLUMNS: dict[str, pa.DataType] = {
    "keep": pa.bool_(),
    "reason": pa.string(),
    "pii_kinds": pa.list_(pa.string()),
    "pii_count": pa.int32(),
    "screenshot_out": pa.string(),   # sha of the image in the curated store (blurred or as is)
}

TRAJECTORY_VERDICT_SCHEMA = pa.schema([
    ("trajectory_id", pa.string()),
    ("keep", pa.bool_()),
    ("reason", pa.string()),        # trajectory-level reason, or no_steps / no_steps_kept
    ("steps_in", pa.int32()),
    ("steps_kept", pa.int32()),
    ("outcome", pa.string()),
    ("verified_by", pa.string()),
    ("judge_success", pa.bool_()),
    ("judge_parsed", pa.bool_()),
    ("judge_model", pa.string()),
    ("judge_irrelevant", pa.list_(pa.int32())),
    ("judge_raw", pa.large_string()),
    ("pii_task_kinds", pa.list_(pa.string())),
    # "synthetic_kept" (its source declares its data synthetic), "surrogate" or "off"
    ("pii_policy", pa.string()),
])


def steps_schema(score_columns: dict[str, pa.DataType]) -> pa.Schema:
    """The verdict table: base columns, keep/reason, every score, PII and output sha."""
    cols = dict(BASE_COLUMNS)
    cols["keep"], cols["reason"] = PII_COLUMNS["keep"], PII_COLUMNS["reason"]
    cols.update(score_columns)
    cols.update({k: v for k, v in PII_COLUMNS.items() if k not in ("keep", "reason")})
    return pa.schema(list(cols.items()))


def sorted_groups(steps_path: Path, tmp_dir: Path,
                  batch_size: int = 512) -> Iterator[tuple[str, list[dict]]]:
    """(trajectory_id, its raw rows in index order), trajectory by trajectory."""
    import duckdb

    tmp_dir.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(config={"memory_limit": DUCKDB_MEMORY, "temp_directory": str(tmp_dir),
                                 "threads": 2})
    try:
        rel = con.sql(
            """SELECT * EXCLUDE (file_row_number) FROM read_parquet(?, file_row_number = true)
               ORDER BY trajectory_id, "index", file_row_number""", params=[str(steps_path)])
        reader = getattr(rel, "to_arrow_reader", None) or rel.fetch_arrow_reader
        rows = (row for batch in reader(batch_size) for row in batch.to_pylist())
        yield from group_by_trajectory(rows)
    finally:
        con.close()


class CuratedWriter(TrajectoryWriter):
    """A TrajectoryWriter that accepts a trajectory's kept steps with index gaps."""

    def add(self, traj: Trajectory, steps: list[Step]) -> bool:
        if self.has(traj.trajectory_id):
            return False
        indices = [s.index for s in steps]
        if indices != sorted(set(indices)) or (indices and indices[-1] >= traj.num_steps):
            raise ValueError(f"trajectory {traj.trajectory_id}: kept step indices {indices[:8]} "
                             f"must be unique, increasing and < num_steps={traj.num_steps}")
        # TrajectoryWriter.add insists on len(steps) == num_steps; the rest is its own.
        self._trajs.append(traj)
        self._steps.extend(steps)
        if len(self._trajs) >= self.batch_size:
            self.flush()
        return True


def link_blob(src: BlobStore, dst: BlobStore, sha: str, ext: str) -> None:
    """Put a blob of src into dst unchanged: a hard link where the filesystem allows."""
    target = dst.path(sha, ext)
    if target.exists():
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src.path(sha, ext), target)
    except FileExistsError:
        pass
    except OSError:  # another filesystem, or links not allowed
        atomic_write_bytes(target, src.get(sha, ext))


def swap_in(new: Path, final: Path) -> None:
    """Replace `final` by `new`; the previous `final` is removed after the rename."""
    old = final.with_name(f".{final.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    if final.exists():
        os.replace(final, old)
    os.replace(new, final)
    shutil.rmtree(old, ignore_errors=True)
