"""A curriculum sampler for RL: train on tasks the policy solves sometimes, not always or never.

Each task carries a success estimate, a smoothed rate

    estimate = (successes + prior * prior_count) / (attempts + prior_count)

so an unseen task starts at `prior` (0.5: eligible). A task is ELIGIBLE while
low <= estimate <= high ([0.3, 0.7] by default): below, rollouts are almost
all failures and teach little; above, the task is mastered.

`update(rollouts)` re-estimates once per epoch: the old counts are first
multiplied by `memory` (0.5), so the estimate follows the policy as it
improves instead of averaging over its whole past (memory=1 keeps everything).
Every task's counts decay, drawn or not, so a task left out for a while
drifts back toward the prior and is checked again.

Sampling by difficulty, near a moving FRONTIER: an eligible task of difficulty
d gets weight max(floor, 1 - |d - frontier| / width). The frontier starts at
the easiest task's difficulty and moves each update by
rate * (mean success of the update's rollouts - target), so it climbs while
the policy succeeds more than `target` of the time and falls back when it
fails more. `epoch()` draws up to `batch_size` distinct eligible tasks with
these weights (a seeded numpy Generator: the same seed and updates give the
same batches).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np


@dataclass
class TaskStats:
    successes: float = 0.0
    attempts: float = 0.0


@dataclass
class EpochRecord:
    """What one epoch drew, for logs and asset metadata."""

    epoch: int
    frontier: float
    eligible: int
    batch: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class CurriculumSettings:
    """The eligible band [low, high], the estimate's prior (`prior`, weighing
    `prior_count` attempts) and `memory`, and the frontier's `width`, `floor`, `rate`
    and `target` (module docstring)."""

    low: float = 0.3
    high: float = 0.7
    prior: float = 0.5
    prior_count: float = 2.0
    memory: float = 0.5
    width: float = 0.5
    floor: float = 0.05
    rate: float = 0.5
    target: float = 0.5

    def __post_init__(self):
        if not 0.0 <= self.low <= self.high <= 1.0:
            raise ValueError(f"need 0 <= low <= high <= 1, got low={self.low}, high={self.high}")
        if not 0.0 <= self.memory <= 1.0 or self.prior_count <= 0 or self.width <= 0:
            raise ValueError("need 0 <= memory <= 1, prior_count > 0, width > 0")


class CurriculumSampler:
    def __init__(
        self,
        tasks: Mapping[str, float],
        settings: CurriculumSettings = CurriculumSettings(),
        *,
        seed: int = 0,
        batch_size: int = 16,
        frontier: float | None = None,
    ):
        if not tasks:
            raise ValueError("CurriculumSampler needs at least one task")
        for tid, d in tasks.items():
            if not 0.0 <= d <= 1.0:
                raise ValueError(f"task {tid!r}: difficulty {d} is not in [0, 1]")
        if batch_size < 1:
            raise ValueError("need batch_size >= 1")
        # Sorted ids: the draw depends on the seed, never on dict order.
        self.difficulty = {tid: float(tasks[tid]) for tid in sorted(tasks)}
        s = settings
        self.low, self.high = s.low, s.high
        self.batch_size = batch_size
        self.prior, self.prior_count, self.memory = s.prior, s.prior_count, s.memory
        self.width, self.floor, self.rate, self.target = s.width, s.floor, s.rate, s.target
        self.frontier = min(self.difficulty.values()) if frontier is None else float(frontier)
        self.stats = {tid: TaskStats() for tid in self.difficulty}
        self.rng = np.random.default_rng(seed)
        self.history: list[EpochRecord] = []

    # -- estimates ------------------------------------------------------------------
    def success_estimate(self, task_id: str) -> float:
        s = self.stats[task_id]
        return (s.successes + self.prior * self.prior_count) / (s.attempts + self.prior_count)

    def eligible(self) -> list[str]:
        """Task ids whose estimate lies in [low, high], sorted."""
        return [t for t in self.difficulty if self.low <= self.success_estimate(t) <= self.high]

    def weight(self, task_id: str) -> float:
        """The sampling weight of a task (before normalising over the eligible ones)."""
        d = self.difficulty[task_id]
        return max(self.floor, 1.0 - abs(d - self.frontier) / self.width)

    def probabilities(self) -> dict[str, float]:
        """The draw probability of each eligible task."""
        ids = self.eligible()
        w = np.array([self.weight(t) for t in ids], dtype=float)
        return dict(zip(ids, (w / w.sum()).tolist())) if ids else {}

    # -- the loop -------------------------------------------------------------------
    def epoch(self, batch_size: int | None = None) -> list[str]:
        """The next batch: distinct eligible tasks drawn by weight; [] when none is eligible."""
        n = self.batch_size if batch_size is None else batch_size
        probs = self.probabilities()
        ids = list(probs)
        batch: list[str] = []
        if ids:
            k = min(n, len(ids))
            picked = self.rng.choice(len(ids), size=k, replace=False, p=np.array(list(probs.values())))
            batch = [ids[i] for i in picked]
        self.history.append(EpochRecord(len(self.history), self.frontier, len(ids), batch))
        return batch

    def update(self, rollouts: Iterable[tuple[str, bool]]) -> None:
        """Fold one epoch's rollouts (task_id, success) into the estimates and the frontier."""
        rollouts = list(rollouts)
        for tid, _ in rollouts:
            if tid not in self.stats:
                raise KeyError(f"rollout for unknown task {tid!r} (not in the curriculum)")
        for s in self.stats.values():  # forget part of the past: the policy has changed
            s.successes *= self.memory
            s.attempts *= self.memory
        for tid, ok in rollouts:
            self.stats[tid].attempts += 1
            self.stats[tid].successes += float(bool(ok))
        if rollouts:
            mean = sum(float(bool(ok)) for _, ok in rollouts) / len(rollouts)
            self.frontier = min(max(self.frontier + self.rate * (mean - self.target), 0.0), 1.0)
