"""Score: every filter's scores for every step, spilled to a Parquet file under the work
folder (score first, keep second: the decision reads these stored scores only).

Each distinct screenshot is decoded once, a chunk of whole trajectories at a time.
NearDuplicate only records each step's hash and key here; its search runs once over
the whole dataset when the steps are decided (filters/stages/decide.py).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from schemas.records import Trajectory

from ..base import BASE_COLUMNS, Filter, TrajectoryContext, decide, score_columns
from ..judge import JudgeVerdict
from .read import RawSteps, Screens, step_views


def scores_schema(filters: list[Filter]) -> pa.Schema:
    """The spilled table: the base columns and every filter's scores."""
    return pa.schema(list({**BASE_COLUMNS, **score_columns(filters)}.items()))


class Scorer:
    """Scores the raw steps trajectory by trajectory; counts steps and trajectories."""

    def __init__(self, source: RawSteps, filters: list[Filter], verdicts: dict[str, JudgeVerdict]):
        self.source, self.filters, self.verdicts = source, filters, verdicts
        self.traj_filters = [f for f in filters if f.level == "trajectory"]
        self.step_filters = [f for f in filters if f.level == "step"]
        self.screens = Screens(source.blobs)
        self.steps = 0
        self.trajectories: set[str] = set()  # those with at least one step row

    def run(self, trajs: dict[str, Trajectory], path: Path, workers: int, say: Callable[[str], Any]) -> None:
        schema = scores_schema(self.filters)
        with (
            ThreadPoolExecutor(max_workers=max(1, workers)) as pool,
            pq.ParquetWriter(path, schema, compression="zstd") as writer,
        ):
            for chunk in self.source.chunks("score"):
                self.screens.decode(pool, chunk)
                rows_out = []
                for tid, rows in chunk:
                    self.trajectories.add(tid)
                    rows_out += self.trajectory(tid, rows, trajs.get(tid))
                writer.write_table(pa.Table.from_pylist(rows_out, schema=schema))
                say(f"curate: scored {self.steps} steps")

    def trajectory(self, tid: str, rows: list[dict], traj: Trajectory | None) -> list[dict]:
        """One row of scores per step, in index order."""
        views = step_views(self.source, self.screens, rows, self.steps, traj)
        self.steps += len(rows)
        ctx = TrajectoryContext(trajectory=traj, steps=views, judge=self.verdicts.get(tid))
        out = [
            {
                "trajectory_id": tid,
                "index": v.raw.get("index"),
                "row": v.row,
                "action_type": (v.raw.get("action") or {}).get("type"),
            }
            for v in views
        ]
        _add_scores(out, self.traj_filters, ctx)
        # Steps of a trajectory that the trajectory-level filters drop are never
        # the "earlier step" a later duplicate is dropped for.
        ctx.extra["reference"] = traj is not None and decide(self.traj_filters, out[0])[0]
        _add_scores(out, self.step_filters, ctx)
        return out


def _add_scores(out: list[dict], filters: list[Filter], ctx: TrajectoryContext) -> None:
    for f in filters:
        for o, s in zip(out, f.score(ctx)):
            o.update(s)
