"""Write: the verdict tables, the curated store, the personal-data audit and summary.json.

Everything goes to a temporary name first (.steps.parquet.tmp, ..., the store under the
work folder); `commit` moves the tables into place, swaps the store in (built beside
the old one, so a re-run replaces it and never holds two runs' trajectories) and
writes summary.json last: a folder with a summary is a finished run.

The curated store keeps each trajectory's original num_steps and its kept steps'
original indices (gaps where steps were dropped), which the raw store's writer refuses
(`CuratedWriter`); the export reads it with `allow_index_gaps=True`.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from schemas.records import Step, Trajectory
from trajforge.store.raw import BlobStore, RawStore, TrajectoryWriter, atomic_write_bytes

from ..base import BASE_COLUMNS
from .base import Stage, Work

COLLECTION = "curated"
PII_AUDIT = "pii_audit.jsonl"

PII_COLUMNS: dict[str, pa.DataType] = {
    "keep": pa.bool_(),
    "reason": pa.string(),
    "pii_kinds": pa.list_(pa.string()),
    "pii_count": pa.int32(),
    "screenshot_out": pa.string(),  # sha of the image in the curated store (blurred or as is)
}

TRAJECTORY_VERDICT_SCHEMA = pa.schema(
    [
        ("trajectory_id", pa.string()),
        ("keep", pa.bool_()),
        ("reason", pa.string()),  # trajectory-level reason, or no_steps / no_steps_kept
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
    ]
)


def steps_schema(score_columns: dict[str, pa.DataType]) -> pa.Schema:
    """The verdict table: base columns, keep/reason, every score, PII and output sha."""
    cols = dict(BASE_COLUMNS)
    cols["keep"], cols["reason"] = PII_COLUMNS["keep"], PII_COLUMNS["reason"]
    cols.update(score_columns)
    cols.update({k: v for k, v in PII_COLUMNS.items() if k not in ("keep", "reason")})
    return pa.schema(list(cols.items()))


class CuratedWriter(TrajectoryWriter):
    """A TrajectoryWriter that accepts a trajectory's kept steps with index gaps."""

    def add(self, traj: Trajectory, steps: list[Step]) -> bool:
        if self.has(traj.trajectory_id):
            return False
        indices = [s.index for s in steps]
        if indices != sorted(set(indices)) or (indices and indices[-1] >= traj.num_steps):
            raise ValueError(
                f"trajectory {traj.trajectory_id}: kept step indices {indices[:8]} "
                f"must be unique, increasing and < num_steps={traj.num_steps}"
            )
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


def audit_line(tid: str, index: int | None, action: str, record: dict) -> str:
    """What was found where, and whether it was kept or replaced; never the value."""
    box = record.get("box")
    return json.dumps(
        {
            "trajectory_id": tid,
            "index": index,
            "kind": record["kind"],
            "field": record["field"],
            "action": action,
            "box": None if box is None else [round(float(c), 5) for c in box],
            "box_source": record.get("box_source"),
            "note": record.get("note"),
        },
        sort_keys=True,
        ensure_ascii=False,
    )


class CurationWriter(Stage):
    """The outputs of one run under their temporary names, until `commit`: each
    trajectory's decided rows, its kept steps and task, their audit lines. Counts the
    step rows, curated trajectories and steps, and audit lines it wrote. `progress`
    hears how many steps are decided each time rows go to the table."""

    name = "write"

    def __init__(
        self,
        out_dir: Path,
        work: Path,
        raw_blobs: BlobStore,
        schema: pa.Schema,
        batch_rows: int,
        *,
        progress: Callable[[int], Any],
    ):
        self.out_dir, self.raw_blobs = out_dir, raw_blobs
        self.schema, self.batch_rows, self.progress = schema, batch_rows, progress
        self.store_tmp = work / "store"
        self.store = RawStore(self.store_tmp)
        self.steps_tmp = out_dir / ".steps.parquet.tmp"
        self.audit_tmp = out_dir / f".{PII_AUDIT}.tmp"
        self.rows_written = self.trajectories_stored = self.steps_stored = self.audit_lines = 0
        self._buf: list[dict] = []

    def __enter__(self) -> CurationWriter:
        self._steps = pq.ParquetWriter(self.steps_tmp, self.schema, compression="zstd")
        self._curated = CuratedWriter(self.store, COLLECTION, batch_size=64)
        self._audit = open(self.audit_tmp, "w", encoding="utf-8")
        return self

    def __exit__(self, *exc) -> None:
        try:
            if exc[0] is None and self._buf:
                self._write_rows()
            self._curated.__exit__(*exc)  # its last batch, on a failure too
        finally:
            self._audit.close()
            self._steps.close()

    def run(self, items: Iterator[Work]) -> Iterator[Work]:
        with self:
            for work in items:
                self.write(work)
                yield work

    def write(self, work: Work) -> None:
        """A trajectory's kept steps (their screenshots pointing into the curated store),
        its task if kept, their audit lines and its decided rows."""
        kept_rows = [row for row in work.rows if row["keep"]]
        steps = []
        for scrubbed, row in zip(work.scrubbed, kept_rows):
            step = self.screenshot(scrubbed.step, scrubbed.image)
            self.audit(step.trajectory_id, step.index, work.policy.audit_action, scrubbed.records)
            row["screenshot_out"] = step.screenshot
            steps.append(step)
        if work.task is not None:
            self.audit(work.tid, None, work.policy.audit_action, work.task_records)
            self.trajectory(work.traj.model_copy(update={"task": work.task}), steps)
        if self.step_rows(work.rows):
            self.progress(work.rows[-1]["row"] + 1)

    def step_rows(self, rows: list[dict]) -> bool:
        """A trajectory's decided rows; True when the buffer went to the table."""
        self._buf += rows
        if len(self._buf) < self.batch_rows:
            return False
        self._write_rows()
        return True

    def _write_rows(self) -> None:
        self._steps.write_table(pa.Table.from_pylist(self._buf, schema=self.schema))
        self.rows_written += len(self._buf)
        self._buf = []

    def screenshot(self, step: Step, blurred: bytes | None) -> Step:
        """The step's screenshot in the curated store: the blurred one, or the raw one
        linked; the step pointing at it."""
        if blurred is None:
            link_blob(self.raw_blobs, self.store.blobs, step.screenshot, step.image_format)
            return step
        sha = self.store.blobs.put(blurred, step.image_format)
        return step.model_copy(update={"screenshot": sha})

    def audit(self, tid: str, index: int | None, action: str, records: list[dict]) -> None:
        self._audit.writelines(audit_line(tid, index, action, r) + "\n" for r in records)
        self.audit_lines += len(records)

    def trajectory(self, traj: Trajectory, steps: list[Step]) -> None:
        """A kept trajectory (its scrubbed task) and its kept, scrubbed steps."""
        self._curated.add(traj, steps)
        self.trajectories_stored += 1
        self.steps_stored += len(steps)

    def stats(self) -> dict:
        return {
            "step_rows": self.rows_written,
            "trajectories": self.trajectories_stored,
            "steps": self.steps_stored,
            "audit_lines": self.audit_lines,
        }

    def commit(self, traj_rows: list[dict], summary: dict) -> None:
        """Move everything into place; summary.json last."""
        trajs_tmp = self.out_dir / ".trajectories.parquet.tmp"
        pq.write_table(
            pa.Table.from_pylist(traj_rows, schema=TRAJECTORY_VERDICT_SCHEMA), trajs_tmp, compression="zstd"
        )
        os.replace(self.steps_tmp, self.out_dir / "steps.parquet")
        os.replace(trajs_tmp, self.out_dir / "trajectories.parquet")
        os.replace(self.audit_tmp, self.out_dir / PII_AUDIT)
        swap_in(self.store_tmp, self.out_dir / "store")
        tmp = self.out_dir / ".summary.json.tmp"
        tmp.write_text(json.dumps(summary, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
        os.replace(tmp, self.out_dir / "summary.json")  # the commit: written last
