"""The export's quarantine: trajectories (and steps) left out, each with its reason.

Bad trajectories (a missing screenshot, an invalid step, a step count that
does not match) are quarantined with their reason and counted, never dropped
silently. A step recorded without an image is skipped on its own, counted in
`skipped_steps` and listed with its index (see `trajforge.publish.export`).
"""

from __future__ import annotations

import json

from schemas.records import Trajectory

QUARANTINE = "quarantine.jsonl"


class Unusable(Exception):
    """A trajectory that cannot be exported: quarantined with this reason."""

    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason, self.detail = reason, detail

    def record(self, trajectory_id: str) -> dict:
        return {"trajectory_id": trajectory_id, "reason": self.reason, "detail": self.detail}


def quarantine_records(
    chosen: dict[str, tuple[Trajectory, str]], seen: set[str], quarantine: list[dict], step_skips: list[dict]
) -> tuple[list[dict], dict[str, int], dict[str, int]]:
    """(all quarantine lines in file order, skipped trajectories per reason,
    skipped steps per reason).

    `quarantine` holds the trajectories already refused; a chosen trajectory
    whose step rows never came (`seen` lacks it) is added here with why.
    """
    quarantine = list(quarantine)
    for tid in sorted(set(chosen) - seen):
        if chosen[tid][0].num_steps == 0:
            quarantine.append(Unusable("no_steps", "num_steps=0").record(tid))
        else:
            quarantine.append(Unusable("steps_missing", f"no step rows in {chosen[tid][1]}").record(tid))
    quarantine.sort(key=lambda q: (q["trajectory_id"], q["reason"]))
    skipped: dict[str, int] = {}
    for q in quarantine:
        skipped[q["reason"]] = skipped.get(q["reason"], 0) + 1
    skipped_steps: dict[str, int] = {}
    for q in step_skips:
        skipped_steps[q["reason"]] = skipped_steps.get(q["reason"], 0) + 1
    quarantine += sorted(step_skips, key=lambda q: (q["trajectory_id"], q["index"]))
    return quarantine, skipped, skipped_steps


def quarantine_jsonl(records: list[dict]) -> bytes:
    """The quarantine file's bytes: one JSON object a line, sorted keys."""
    return "".join(json.dumps(q, sort_keys=True, ensure_ascii=False) + "\n" for q in records).encode()
