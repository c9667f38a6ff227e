"""Decide: keep or drop each scored step, then its trajectory, and count every drop by
its reason.

A step's reason is the first failing filter in FILTER_ORDER (filters.base.decide), read
from the stored scores only, as filters.base.decide_table re-decides them later. Filters
whose score needs the whole dataset settle as the stage sets out (`Filter.settle`:
the near-duplicate search, over the hashes scoring recorded). A trajectory is
dropped for its trajectory-level reason, for "no_steps_kept" when every step is dropped,
or for "no_steps" when it has no step row at all.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq

from schemas.records import Trajectory

from ..base import Filter, decide
from ..judge import JudgeVerdict
from ..steps import FILTER_ORDER, NearDuplicate
from .base import Stage, Work
from .judge import verdict_columns


class Decider(Stage):
    """Step and trajectory verdicts, with the counts of each. Reads each trajectory's
    scored rows from `scores` (in the order they were scored); after the last one, a
    Work item for each trajectory with no step row."""

    name = "decide"

    def __init__(
        self,
        filters: list[Filter],
        scores: Path,
        trajectories: dict[str, Trajectory],
        verdicts: dict[str, JudgeVerdict],
        batch_rows: int,
    ):
        self.filters, self.scores, self.batch_rows = filters, scores, batch_rows
        self.trajectories, self.verdicts = trajectories, verdicts
        self.traj_filters = [f for f in filters if f.level == "trajectory"]
        self.near = next(f for f in filters if isinstance(f, NearDuplicate))  # for the report's histogram
        self.steps_kept = 0
        self.dropped: Counter[str] = Counter({r: 0 for r in FILTER_ORDER})
        self.trajectories_kept = 0
        self.trajectories_dropped: Counter[str] = Counter()

    def run(self, items: Iterator[Work]) -> Iterator[Work]:
        # Every step is scored by now: the filters that need the whole dataset settle.
        settlers = [fill for f in self.filters if (fill := f.settle()) is not None]
        scored = _rows_of(pq.ParquetFile(self.scores), self.batch_rows)
        seen = set()
        for work in items:
            work.rows = [next(scored) for _ in work.raws]
            for raw, row in zip(work.raws, work.rows):
                assert (row["trajectory_id"], row["index"]) == (raw["trajectory_id"], raw["index"])
                self.step(row, settlers)
            work.verdict = self.trajectory(work.traj, work.rows)
            seen.add(work.tid)
            yield work
        assert next(scored, None) is None
        for tid in sorted(set(self.trajectories) - seen):
            yield Work(tid, [], self.trajectories[tid], verdict=self.without_steps(self.trajectories[tid]))

    def step(self, row: dict, settlers: list) -> None:
        """Completes the row (the settled filters' columns) and sets its keep and reason."""
        for fill in settlers:
            fill(row)
        row["keep"], row["reason"] = decide(self.filters, row)
        if row["keep"]:
            self.steps_kept += 1
        else:
            self.dropped[row["reason"]] += 1

    def trajectory(self, traj: Trajectory | None, rows: list[dict]) -> dict:
        """Its trajectories.parquet row but for the scrub's columns (rows: its decided steps)."""
        keep, reason = decide(self.traj_filters, rows[0])
        steps_kept = sum(row["keep"] for row in rows)
        if keep and not steps_kept:
            keep, reason = False, "no_steps_kept"
        verdict = self._count(
            {
                "trajectory_id": rows[0]["trajectory_id"],
                "keep": keep,
                "reason": reason,
                "steps_in": len(rows),
                "steps_kept": steps_kept,
                "outcome": traj.outcome if traj else None,
                "verified_by": traj.verified_by if traj else None,
            }
        )
        verdict.update(verdict_columns(self.verdicts.get(verdict["trajectory_id"])))
        return verdict

    def without_steps(self, traj: Trajectory) -> dict:
        """A trajectory with no step row (no judge's verdict either)."""
        return self._count(
            {
                "trajectory_id": traj.trajectory_id,
                "keep": False,
                "reason": "no_steps",
                "steps_in": 0,
                "steps_kept": 0,
                "outcome": traj.outcome,
                "verified_by": traj.verified_by,
            }
        )

    def _count(self, verdict: dict) -> dict:
        if verdict["keep"]:
            self.trajectories_kept += 1
        else:
            self.trajectories_dropped[verdict["reason"]] += 1
        return verdict

    def histogram(self, at_least: int) -> dict[int, int]:
        """pHash distances to the nearest earlier same-key screen, wide enough to show
        where the threshold cuts."""
        return self.near.histogram(max(at_least, self.near.max_distance))

    def stats(self) -> dict:
        return {
            "steps_kept": self.steps_kept,
            "steps_dropped": dict(self.dropped),
            "trajectories_kept": self.trajectories_kept,
            "trajectories_dropped": dict(sorted(self.trajectories_dropped.items())),
        }


def _rows_of(pf: pq.ParquetFile, batch_size: int) -> Iterator[dict]:
    for batch in pf.iter_batches(batch_size=batch_size):
        yield from batch.to_pylist()
