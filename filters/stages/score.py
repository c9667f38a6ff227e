"""Score: every filter's scores for every step, spilled to a Parquet file under the work
folder (score first, keep second: the decision reads these stored scores only).

The read stage has decoded each distinct screenshot once. NearDuplicate only records
each step's hash and key here; its search runs once over the whole dataset when the
decide stage sets out (filters/stages/decide.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ..base import BASE_COLUMNS, Filter, TrajectoryContext, decide, score_columns
from ..judge import JudgeVerdict
from .base import Stage, Work
from .read import RawSteps, step_views


def scores_schema(filters: list[Filter]) -> pa.Schema:
    """The spilled table: the base columns and every filter's scores."""
    return pa.schema(list({**BASE_COLUMNS, **score_columns(filters)}.items()))


class Scorer(Stage):
    """Scores the raw steps trajectory by trajectory into `path`, about batch_rows
    steps per write; counts steps and trajectories (those with a step row)."""

    name = "score"

    def __init__(
        self,
        source: RawSteps,
        filters: list[Filter],
        verdicts: dict[str, JudgeVerdict],
        path: Path,
        say: Callable[[str], Any],
    ):
        self.source, self.filters, self.verdicts = source, filters, verdicts
        self.path, self.say = path, say
        self.traj_filters = [f for f in filters if f.level == "trajectory"]
        self.step_filters = [f for f in filters if f.level == "step"]
        self.steps = 0
        self.trajectories = 0

    def run(self, items: Iterator[Work]) -> Iterator[Work]:
        schema = scores_schema(self.filters)
        with pq.ParquetWriter(self.path, schema, compression="zstd") as writer:
            rows_out: list[dict] = []
            for work in items:
                self.trajectories += 1
                work.rows = self.trajectory(work)
                rows_out += work.rows
                if len(rows_out) >= self.source.batch_rows:
                    self._write(writer, schema, rows_out)
                    rows_out = []
                yield work
            if rows_out:
                self._write(writer, schema, rows_out)

    def _write(self, writer: pq.ParquetWriter, schema: pa.Schema, rows: list[dict]) -> None:
        writer.write_table(pa.Table.from_pylist(rows, schema=schema))
        self.say(f"curate: scored {self.steps} steps")

    def trajectory(self, work: Work) -> list[dict]:
        """One row of scores per step, in index order."""
        views = step_views(self.source, work, self.steps)
        self.steps += len(work.raws)
        ctx = TrajectoryContext(trajectory=work.traj, steps=views, judge=self.verdicts.get(work.tid))
        out = [
            {
                "trajectory_id": work.tid,
                "index": v.raw.get("index"),
                "row": v.row,
                "action_type": (v.raw.get("action") or {}).get("type"),
            }
            for v in views
        ]
        _add_scores(out, self.traj_filters, ctx)
        # Steps of a trajectory that the trajectory-level filters drop are never
        # the "earlier step" a later duplicate is dropped for.
        ctx.extra["reference"] = work.traj is not None and decide(self.traj_filters, out[0])[0]
        _add_scores(out, self.step_filters, ctx)
        return out

    def stats(self) -> dict:
        return {"steps": self.steps, "trajectories": self.trajectories}


def _add_scores(out: list[dict], filters: list[Filter], ctx: TrajectoryContext) -> None:
    for f in filters:
        for o, s in zip(out, f.score(ctx)):
            o.update(s)
