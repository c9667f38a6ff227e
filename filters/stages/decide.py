"""Decide: keep or drop each scored step, then its trajectory, and count every drop by
its reason.

A step's reason is the first failing filter in FILTER_ORDER (filters.base.decide), read
from the stored scores only, as filters.base.decide_table re-decides them later. The
near-duplicate search runs once here, over the hashes scoring recorded. A trajectory is
dropped for its trajectory-level reason, for "no_steps_kept" when every step is dropped,
or for "no_steps" when it has no step row at all.
"""

from __future__ import annotations

from collections import Counter

from schemas.records import Trajectory

from ..base import Filter, decide
from ..steps import FILTER_ORDER, NearDuplicate


class Decider:
    """Step and trajectory verdicts, with the counts of each."""

    def __init__(self, filters: list[Filter], steps_scored: int):
        self.filters = filters
        self.traj_filters = [f for f in filters if f.level == "trajectory"]
        self.near = next(f for f in filters if isinstance(f, NearDuplicate))
        self.dup_of, self.distance = self.near.resolve()
        assert len(self.dup_of) == steps_scored, (len(self.dup_of), steps_scored)
        self.steps_kept = 0
        self.dropped: Counter[str] = Counter({r: 0 for r in FILTER_ORDER})
        self.trajectories_kept = 0
        self.trajectories_dropped: Counter[str] = Counter()

    def step(self, row: dict) -> bool:
        """Sets the row's near-duplicate match, keep and reason; True to keep it."""
        i = row["row"]
        if self.dup_of[i] >= 0:
            row["neardup_of"] = int(self.dup_of[i])
            row["neardup_distance"] = int(self.distance[i])
        row["keep"], row["reason"] = decide(self.filters, row)
        if row["keep"]:
            self.steps_kept += 1
        else:
            self.dropped[row["reason"]] += 1
        return row["keep"]

    def trajectory(self, traj: Trajectory | None, rows: list[dict], steps_kept: int) -> dict:
        """The decision columns of its trajectories.parquet row (rows: its decided steps)."""
        keep, reason = decide(self.traj_filters, rows[0])
        if keep and not steps_kept:
            keep, reason = False, "no_steps_kept"
        return self._count(
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

    def without_steps(self, traj: Trajectory) -> dict:
        """A trajectory with no step row."""
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
