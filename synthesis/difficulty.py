"""Task difficulty: four features per task, one weighted score, three levels.

Features (raw values; `normalise` maps each into [0, 1]):
- `min_steps`: the fewest steps the task needs. In order of trust: the
  shortest *verified* successful trajectory of the task (measured in our own
  environment: a verdict of any verifier kind, schemas.records.is_verified;
  a dataset's own success label is not one), else an imported `optimal_steps` (AndroidWorld's task table,
  trajforge.importers.tasks_table.read_tasks), else the shortest recorded
  length. `min_steps_source` says which one was used.
- `apps`: distinct apps involved: the trajectory's app plus every `open_app`
  target (case and spaces ignored).
- `gesture`: the MAX over the task's actions of tap=1 (double_tap and select
  count as taps), swipe/scroll=2, long_press=3, multi-touch=5; typing, keys,
  navigation and final actions score 0. Max, not mean: one long-press in ten
  taps still makes a task need the long-press, and a mean would hide it. The
  action space (schemas/actions.py) has no multi-touch action yet; an action
  type named in MULTI_TOUCH scores 5 as soon as one appears.
- `distractions`: len(traj.distractions), the pop-ups the episode met (max
  over a task's trajectories).

Normalisation uses FIXED ranges (DEFAULT_NORMS), not min-max over the task
set: a task's score then does not move when other tasks are added, so scores
from different runs compare and a curriculum's thresholds stay put.
`fit_norms` gives min-max ranges for callers who want a relative scale.

score = sum(w_i * norm_i) / sum(w_i), default weights 0.4 steps + 0.2 apps +
0.2 gesture + 0.2 distractions (they sum to 1, so the division is a no-op
for them and keeps any other weights in [0, 1]).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from schemas.actions import ActionType
from schemas.records import Step, Trajectory, is_verified_success

FEATURES = ("min_steps", "apps", "gesture", "distractions")
DEFAULT_WEIGHTS: dict[str, float] = {"min_steps": 0.4, "apps": 0.2, "gesture": 0.2, "distractions": 0.2}
# (low, high) per feature: norm = clip((value - low) / (high - low), 0, 1).
# min_steps: 1 step is trivial, 30 is the crawler's step budget (sandbox.crawl max_steps).
# apps: one app is the floor, four or more is as cross-app as it gets.
# gesture: a tap-only task is the floor (1), multi-touch the ceiling (5).
# distractions: the sandbox shows at most 2 per session (sandbox.distractions.MAX_PER_SESSION).
DEFAULT_NORMS: dict[str, tuple[float, float]] = {
    "min_steps": (1.0, 30.0),
    "apps": (1.0, 4.0),
    "gesture": (1.0, 5.0),
    "distractions": (0.0, 2.0),
}
GESTURE_SCORES: dict[str, int] = {
    ActionType.TAP.value: 1,
    ActionType.DOUBLE_TAP.value: 1,
    ActionType.SELECT.value: 1,
    ActionType.RIGHT_CLICK.value: 1,
    ActionType.SWIPE.value: 2,
    ActionType.SCROLL.value: 2,
    ActionType.LONG_PRESS.value: 3,
}
MULTI_TOUCH = {"pinch", "zoom", "multi_touch", "two_finger_tap", "rotate"}
MULTI_TOUCH_SCORE = 5
# Fixed level cuts on the score (used when `levels="fixed"`).
LEVEL_CUTS = (1 / 3, 2 / 3)


def gesture_score(action_type: str) -> int:
    """tap=1, swipe/scroll=2, long_press=3, multi-touch=5, anything else 0."""
    if action_type in MULTI_TOUCH:
        return MULTI_TOUCH_SCORE
    return GESTURE_SCORES.get(action_type, 0)


@dataclass
class _ActionSummary:
    """What the features need of a trajectory's actions (kept small for streaming)."""

    gesture: int = 0
    open_apps: set[str] = field(default_factory=set)
    n: int = 0

    def add(self, action_type: str, text: str | None) -> None:
        self.n += 1
        self.gesture = max(self.gesture, gesture_score(action_type))
        if action_type == ActionType.OPEN_APP.value and text:
            self.open_apps.add(_app_key(text))


def _app_key(name: str) -> str:
    return " ".join(name.lower().split())


def _recorded_length(traj: Trajectory, n_steps: int) -> int:
    # A curated trajectory keeps its recorded num_steps while some steps were dropped.
    return traj.num_steps if traj.num_steps > 0 else n_steps


def _features(traj: Trajectory, summary: _ActionSummary, optimal_steps: int | None) -> dict:
    length = _recorded_length(traj, summary.n)
    if is_verified_success(traj.outcome, traj.verified_by):
        min_steps, source = length, "verified"
    elif optimal_steps is not None:
        min_steps, source = int(optimal_steps), "optimal_steps"
    else:
        min_steps, source = length, "recorded"
    return {
        "min_steps": min_steps,
        "min_steps_source": source,
        "apps": len({_app_key(traj.app)} | summary.open_apps),
        "gesture": summary.gesture,
        "distractions": len(traj.distractions),
    }


def task_features(traj: Trajectory, steps: list[Step], *, optimal_steps: int | None = None) -> dict:
    """Raw features of one trajectory (see the module docstring for each)."""
    summary = _ActionSummary()
    for s in steps:
        summary.add(s.action.type.value, s.action.text)
    return _features(traj, summary, optimal_steps)


_SOURCE_RANK = {"verified": 0, "optimal_steps": 1, "recorded": 2}


def merge_task_features(per_trajectory: Iterable[dict]) -> dict:
    """One task's features from its trajectories' features.

    min_steps: the shortest among the most trusted source present (a verified
    success beats an imported optimum beats a recorded length); apps, gesture,
    distractions: the max (what the task can demand).
    """
    rows = list(per_trajectory)
    if not rows:
        raise ValueError("merge_task_features needs at least one trajectory's features")
    best = min(_SOURCE_RANK[r["min_steps_source"]] for r in rows)
    trusted = [r for r in rows if _SOURCE_RANK[r["min_steps_source"]] == best]
    return {
        "min_steps": min(r["min_steps"] for r in trusted),
        "min_steps_source": trusted[0]["min_steps_source"],
        "apps": max(r["apps"] for r in rows),
        "gesture": max(r["gesture"] for r in rows),
        "distractions": max(r["distractions"] for r in rows),
        "trajectories": len(rows),
    }


def normalise(
    features: Mapping, norms: Mapping[str, tuple[float, float]] = DEFAULT_NORMS
) -> dict[str, float]:
    """Each feature mapped into [0, 1] by its (low, high) range, clipped."""
    out = {}
    for name in FEATURES:
        low, high = norms[name]
        if high <= low:  # a constant feature (min-max over identical tasks) carries no signal
            out[name] = 0.0
            continue
        out[name] = float(min(max((float(features[name]) - low) / (high - low), 0.0), 1.0))
    return out


def fit_norms(features: Iterable[Mapping]) -> dict[str, tuple[float, float]]:
    """Min-max ranges over a task set (the relative alternative to DEFAULT_NORMS)."""
    rows = list(features)
    if not rows:
        raise ValueError("fit_norms needs at least one task's features")
    return {n: (float(min(r[n] for r in rows)), float(max(r[n] for r in rows))) for n in FEATURES}


def difficulty_score(
    features: Mapping,
    weights: Mapping[str, float] = DEFAULT_WEIGHTS,
    norms: Mapping[str, tuple[float, float]] = DEFAULT_NORMS,
) -> float:
    """sum(w_i * norm_i) / sum(w_i) over the four features: a score in [0, 1]."""
    unknown = set(weights) - set(FEATURES)
    if unknown:
        raise ValueError(f"unknown difficulty weight(s) {sorted(unknown)}; expected {FEATURES}")
    if any(w < 0 for w in weights.values()) or sum(weights.values()) <= 0:
        raise ValueError(f"weights {dict(weights)} must be non-negative with a positive sum")
    norm = normalise(features, norms)
    total = sum(weights.values())
    return sum(weights.get(n, 0.0) * norm[n] for n in FEATURES) / total


def assign_levels(scores: list[float], levels: str = "tertile") -> list[str]:
    """easy / medium / hard: by tertiles of these scores, or by LEVEL_CUTS ("fixed").

    Tertiles split any task set into thirds (useful while all sandbox tasks are
    short and score low on the fixed scale); fixed cuts are stable across runs.
    A score equal to a cut goes to the lower level.
    """
    if not scores:
        return []
    if levels == "tertile":
        lo, hi = (float(q) for q in np.quantile(np.asarray(scores, dtype=float), [1 / 3, 2 / 3]))
    elif levels == "fixed":
        lo, hi = LEVEL_CUTS
    else:
        raise ValueError(f"levels must be 'tertile' or 'fixed', not {levels!r}")
    return ["easy" if s <= lo else "medium" if s <= hi else "hard" for s in scores]


DIFFICULTY_SCHEMA = pa.schema(
    [
        ("task_id", pa.string()),
        ("min_steps", pa.int32()),
        ("min_steps_source", pa.string()),
        ("apps", pa.int32()),
        ("gesture", pa.int32()),
        ("distractions", pa.int32()),
        ("trajectories", pa.int32()),
        ("score", pa.float64()),
        ("level", pa.string()),
    ]
)


def _optimal_steps_of(optimal_steps: Mapping[str, int] | Path | str | None) -> dict[str, int]:
    if optimal_steps is None:
        return {}
    if isinstance(optimal_steps, Mapping):
        return {k: int(v) for k, v in optimal_steps.items() if v is not None}
    from trajforge.importers.tasks_table import read_tasks

    return {
        r["task_id"]: int(r["optimal_steps"])
        for r in read_tasks(Path(optimal_steps))
        if r["optimal_steps"] is not None
    }


def _per_trajectory_from_store(store, collections, optimal: dict[str, int]):
    """(task_id, features) per trajectory, reading only two step columns (memory stays flat)."""
    trajs = {t.trajectory_id: t for t in store.iter_trajectories(collections)}
    summaries: dict[str, _ActionSummary] = defaultdict(_ActionSummary)
    for f in store.step_files(collections):
        pf = pq.ParquetFile(f)
        for batch in pf.iter_batches(batch_size=4096, columns=["trajectory_id", "action"]):
            tids = batch.column(0).to_pylist()
            actions = batch.column(1)
            types = actions.field("type").to_pylist()
            texts = actions.field("text").to_pylist()
            for tid, t, text in zip(tids, types, texts):
                summaries[tid].add(t, text)
    for tid, traj in trajs.items():
        yield (
            traj.task.task_id,
            _features(traj, summaries.get(tid, _ActionSummary()), optimal.get(traj.task.task_id)),
        )


def difficulty_rows(
    store_or_pairs,
    *,
    collections=None,
    optimal_steps: Mapping[str, int] | Path | str | None = None,
    weights: Mapping[str, float] = DEFAULT_WEIGHTS,
    norms: Mapping[str, tuple[float, float]] | str = DEFAULT_NORMS,
    levels: str = "tertile",
) -> list[dict]:
    """One row per task (sorted by task_id): its features, score and level.

    `store_or_pairs`: a trajforge.store.raw.RawStore (read in `collections`), or an
    iterable of (Trajectory, list[Step]). `optimal_steps`: {task_id: steps} or
    the path of an imported tasks table. `norms="minmax"` fits the ranges to
    this task set instead of the fixed DEFAULT_NORMS.
    """
    optimal = _optimal_steps_of(optimal_steps)
    if hasattr(store_or_pairs, "iter_trajectories"):
        pairs = _per_trajectory_from_store(store_or_pairs, collections, optimal)
    else:
        pairs = (
            (t.task.task_id, task_features(t, s, optimal_steps=optimal.get(t.task.task_id)))
            for t, s in store_or_pairs
        )
    per_task: dict[str, list[dict]] = defaultdict(list)
    for task_id, feats in pairs:
        per_task[task_id].append(feats)
    rows = [{"task_id": tid, **merge_task_features(per_task[tid])} for tid in sorted(per_task)]
    if norms == "minmax":
        norms = fit_norms(rows) if rows else DEFAULT_NORMS
    elif isinstance(norms, str):
        raise ValueError(f"norms must be a mapping or 'minmax', not {norms!r}")
    for r in rows:
        r["score"] = difficulty_score(r, weights, norms)
    for r, level in zip(rows, assign_levels([r["score"] for r in rows], levels)):
        r["level"] = level
    return rows


def difficulty_table(store_or_pairs, **kw) -> pa.Table:
    """`difficulty_rows` as an Arrow table (DIFFICULTY_SCHEMA), for a Dagster asset."""
    return pa.Table.from_pylist(difficulty_rows(store_or_pairs, **kw), schema=DIFFICULTY_SCHEMA)
