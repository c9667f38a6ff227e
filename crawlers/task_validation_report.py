"""What validation found: per-task figures, rejections by reason, the report, and the
kept tasks' rows as a task file writes them (crawlers/task_validation.py fills it)."""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field

from schemas.environment import Environment
from schemas.records import Task

REASONS = (
    "duplicate",
    "no_demonstration",
    "trivial",
    "unachievable",
    "not_specific",
    "random_shortcut",
    "error",
)


@dataclass
class TaskFigures:
    """What validation measured of one task."""

    task_id: str
    checks: int
    language: str = "en"
    demo_steps: int | None = None  # executed steps of its demonstration (the fewest)
    fallback: bool = False  # its demonstration missed and its params.fallback was played
    random_success: int = 0
    random_tries: int = 0
    difficulty: float | None = None

    @property
    def random_rate(self) -> float | None:
        return self.random_success / self.random_tries if self.random_tries else None

    def as_dict(self) -> dict:
        return {
            "task_id": self.task_id,
            "language": self.language,
            "checks": self.checks,
            "demo_steps": self.demo_steps,
            "fallback": self.fallback,
            "random_success": self.random_success,
            "random_tries": self.random_tries,
            "random_rate": None if self.random_rate is None else round(self.random_rate, 3),
            "difficulty": self.difficulty,
        }


@dataclass(frozen=True)
class Rejection:
    task_id: str
    reason: str  # one of REASONS
    detail: str


@dataclass
class ValidationReport:
    """Kept tasks (in file order), rejections by reason, per-task figures, cost."""

    environment: str
    tasks_in: int
    kept: list[str] = field(default_factory=list)
    rejections: list[Rejection] = field(default_factory=list)
    unplayed: list[str] = field(default_factory=list)  # not reached before the deadline
    figures: dict[str, TaskFigures] = field(default_factory=dict)
    episodes: int = 0
    seconds: float = 0.0
    cores: int = field(default_factory=lambda: os.cpu_count() or 1)

    def by_reason(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for r in self.rejections:
            out.setdefault(r.reason, []).append(r.task_id)
        return out

    def reason_of(self, task_id: str) -> Rejection | None:
        return next((r for r in self.rejections if r.task_id == task_id), None)

    @property
    def tasks_per_core_hour(self) -> float | None:
        """Kept tasks per core-hour of validation (the machine's cores)."""
        hours = self.seconds * self.cores / 3600
        return round(len(self.kept) / hours, 1) if hours > 0 else None

    def summary(self) -> dict:
        kept = [self.figures[t] for t in self.kept]
        return {
            "environment": self.environment,
            "tasks_in": self.tasks_in,
            "kept": len(self.kept),
            "rejected": {k: len(v) for k, v in self.by_reason().items()},
            "unplayed": len(self.unplayed),
            "episodes": self.episodes,
            "seconds": round(self.seconds, 1),
            "seconds_per_task": round(self.seconds / self.tested, 2) if self.tested else None,
            "cores": self.cores,
            "tasks_per_core_hour": self.tasks_per_core_hour,
            "kept_3_steps_or_more": sum(1 for f in kept if (f.demo_steps or 0) >= 3),
            "kept_languages": dict(sorted(Counter(f.language for f in kept).items())),
        }

    @property
    def tested(self) -> int:
        """The tasks validation decided on (kept or rejected): those reached in time."""
        return self.tasks_in - len(self.unplayed)

    def rates(self) -> dict:
        """The funnel's two rates (None when nothing reached that stage):
        `non_trivial_rate` = 1 - trivial / played, `achievable_rate` = 1 - unachievable /
        (played - trivial), where `played` counts the tasks whose demonstration was
        played (neither a duplicate nor without one)."""
        n = {k: len(v) for k, v in self.by_reason().items()}
        played = self.tested - n.get("duplicate", 0) - n.get("no_demonstration", 0)
        reached = played - n.get("trivial", 0)
        return {
            "played": played,
            "non_trivial_rate": round(1 - n.get("trivial", 0) / played, 3) if played > 0 else None,
            "achievable_rate": round(1 - n.get("unachievable", 0) / reached, 3) if reached > 0 else None,
        }

    def as_dict(self) -> dict:
        return {
            **self.summary(),
            "kept_tasks": list(self.kept),
            "rejections": [r.__dict__ for r in self.rejections],
            "figures": [f.as_dict() for f in self.figures.values()],
        }


def kept_rows(report: ValidationReport, rows: list[dict]) -> list[dict]:
    """The kept tasks' rows (a task file's, or TaskSpec dumps) with their `difficulty`
    and the demonstration that reached their goal (`params.fallback` where it did, in
    the place of the one that missed), every other field as it was, in the rows' order."""
    kept = set(report.kept)
    out = []
    for row in rows:
        task_id = row.get("task_id")
        if task_id in kept:
            figures = report.figures[task_id]
            params = row.get("params") or {}
            if "fallback" in params:
                params = _fallback_params(params) if figures.fallback else _without(params, "fallback")
                row = {**row, "params": params}
            out.append({**row, "difficulty": figures.difficulty})
    return out


# What a fallback replaces: the demonstration and where it came from.
_DEMONSTRATION_PARAMS = ("script", "actions", "device", "walk_steps", "fallback")


def with_fallback(task: Task) -> Task:
    """`task` with its `params.fallback` as its demonstration."""
    return task.model_copy(update={"params": _fallback_params(task.params)})


def _fallback_params(params: dict) -> dict:
    return {**_without(params, *_DEMONSTRATION_PARAMS), **params["fallback"]}


def _without(params: dict, *keys: str) -> dict:
    return {k: v for k, v in params.items() if k not in keys}


def task_rows(environment: Environment) -> list[dict]:
    """An environment's tasks as task-file rows (when it has no task file to keep)."""
    return [t.model_dump(mode="json", exclude_defaults=True) for t in environment.tasks]
