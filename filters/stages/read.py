"""Read: the raw tables, a trajectory at a time in (trajectory_id, index) order, each row
checked, and each distinct screenshot decoded once (the `Read` stage, first of every pass).

DuckDB sorts out of core (spilling past its memory limit), so "earlier" is the same
whatever the store's batching, and memory stays flat; the file row number breaks ties
between repeated indices. Each pass reads the table again in that order: only hashes,
signatures and keys are held across the dataset, never images.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow.parquet as pq

from schemas.arrow import row_to_step, row_to_trajectory, upgrade_trajectories
from schemas.errors import SchemaError
from schemas.records import Step, Trajectory
from trajforge.publish.plan import group_by_trajectory
from trajforge.store.raw import BlobStore

from ..base import ScreenInfo, StepView
from ..steps import read_screen
from .base import Stage, Work

DUCKDB_MEMORY = "512MB"


def sorted_groups(steps_path: Path, tmp_dir: Path, batch_size: int = 512) -> Iterator[tuple[str, list[dict]]]:
    """(trajectory_id, its raw rows in index order), trajectory by trajectory."""
    import duckdb  # loaded by the runs that read, not by whoever imports the filters

    tmp_dir.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(config={"memory_limit": DUCKDB_MEMORY, "temp_directory": str(tmp_dir), "threads": 2})
    try:
        rel = con.sql(
            """SELECT * EXCLUDE (file_row_number) FROM read_parquet(?, file_row_number = true)
               ORDER BY trajectory_id, "index", file_row_number""",
            params=[str(steps_path)],
        )
        reader = getattr(rel, "to_arrow_reader", None) or rel.fetch_arrow_reader
        rows = (row for batch in reader(batch_size) for row in batch.to_pylist())
        yield from group_by_trajectory(rows)
    finally:
        con.close()


class RawSteps:
    """A raw_steps folder (steps.parquet + trajectories.parquet) and the blobs its
    screenshots are in."""

    def __init__(self, raw_steps_dir: Path, blobs: BlobStore, work: Path, batch_rows: int):
        self.steps_path = raw_steps_dir / "steps.parquet"
        self.trajs_path = raw_steps_dir / "trajectories.parquet"
        self.blobs, self.work, self.batch_rows = blobs, work, batch_rows

    def trajectories(self) -> dict[str, Trajectory]:
        for p in (self.steps_path, self.trajs_path):
            if not p.is_file():
                raise FileNotFoundError(f"{p}: not found (run the consolidation first)")
        out = {}
        src = str(self.trajs_path)
        for batch in pq.ParquetFile(self.trajs_path).iter_batches(batch_size=1024):
            for row in upgrade_trajectories(batch).to_pylist():
                t = row_to_trajectory(row, source=src)
                if t.trajectory_id in out:
                    raise SchemaError(
                        "duplicate trajectory id", source=src, record=t.trajectory_id, field="trajectory_id"
                    )
                out[t.trajectory_id] = t
        return out

    def groups(self, name: str) -> Iterator[tuple[str, list[dict]]]:
        """One ordered pass; `name` names its DuckDB spill folder under the work folder."""
        return sorted_groups(self.steps_path, self.work / name, self.batch_rows)

    def step(self, raw: dict) -> Step:
        return row_to_step(raw, source=str(self.steps_path))

    def validate(self, raw: dict, traj: Trajectory | None, seen: set[int]) -> tuple[Step | None, str | None]:
        """(the Step or None, why the row is invalid or None); `seen`: the indices of
        the trajectory's earlier rows."""
        try:
            step = self.step(raw)
        except SchemaError as err:
            return None, str(err)
        record = f"{raw['trajectory_id']}#{raw.get('index')}"
        if traj is None:
            why, field = "no row in trajectories.parquet for this step", "trajectory_id"
        elif step.index in seen:
            why, field = "step index repeated in its trajectory", "index"
        elif step.index >= traj.num_steps:
            why, field = f"index >= num_steps={traj.num_steps}", "index"
        else:
            return step, None
        return step, str(SchemaError(why, source=str(self.steps_path), record=record, field=field))


class Screens:
    """Each distinct (sha, format) decoded once (filters.steps.read_screen), a chunk at a
    time in a thread pool (decoding lets go of the GIL)."""

    def __init__(self, blobs: BlobStore):
        self.blobs = blobs
        self.info: dict[tuple[str, str], ScreenInfo] = {}

    def decode(self, pool: ThreadPoolExecutor, chunk: list[tuple[str, list[dict]]]) -> None:
        todo = sorted({_screen_key(r) for _, rows in chunk for r in rows} - set(self.info))
        for key, info in zip(todo, pool.map(lambda k: read_screen(self.blobs, *k), todo)):
            self.info[key] = info

    def of(self, raw: dict) -> ScreenInfo:
        return self.info.get(_screen_key(raw)) or ScreenInfo(status="empty", error="step has no screenshot")

    def __len__(self) -> int:
        return len(self.info)


def _screen_key(raw: dict) -> tuple[str, str]:
    return raw.get("screenshot") or "", raw.get("image_format") or "png"


def step_views(source: RawSteps, work: Work, row0: int) -> list[StepView]:
    """A trajectory's raw rows as the filters see them; `row0` is the first one's row id."""
    views, seen = [], set()
    for i, (raw, screen) in enumerate(zip(work.raws, work.screens)):
        step, error = source.validate(raw, work.traj, seen)
        if step is not None:
            seen.add(step.index)
        views.append(StepView(row=row0 + i, raw=raw, step=step, error=error, screen=screen))
    return views


class Read(Stage):
    """A pass's raw rows as Work items, each with its trajectory row and the
    ScreenInfo of each step; each distinct screenshot decoded once, a chunk of about
    batch_rows steps at a time. Counts the trajectories loaded and screens decoded."""

    name = "read"

    def __init__(self, source: RawSteps, workers: int):
        self.source, self.workers = source, workers
        self.trajectories = source.trajectories()
        self.screens = Screens(source.blobs)

    def run(self, items: Iterator[tuple[str, list[dict]]]) -> Iterator[Work]:
        with ThreadPoolExecutor(max_workers=max(1, self.workers)) as pool:
            for chunk in _chunks(items, self.source.batch_rows):
                self.screens.decode(pool, chunk)
                for tid, raws in chunk:
                    yield Work(tid, raws, self.trajectories.get(tid), [self.screens.of(r) for r in raws])

    def stats(self) -> dict:
        return {"trajectories": len(self.trajectories), "screens_decoded": len(self.screens)}


def _chunks(
    groups: Iterator[tuple[str, list[dict]]], batch_rows: int
) -> Iterator[list[tuple[str, list[dict]]]]:
    """Lists of whole trajectories of about batch_rows steps."""
    chunk, n = [], 0
    for tid, rows in groups:
        chunk.append((tid, rows))
        n += len(rows)
        if n >= batch_rows:
            yield chunk
            chunk, n = [], 0
    if chunk:
        yield chunk
