"""One stage interface and the pipeline that chains stages (datatrove's shape).

A stage's `run` takes the stream of work items the previous stage yields and yields
them on, done; `stats` is what the stage counted, kept by the stage itself. A
`Pipeline` chains the runs (each wraps the previous one's generator) and reports
every stage's stats by its name, without reading any stage's internals.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from schemas.records import Task, Trajectory

from ..base import ScreenInfo


@dataclass
class Work:
    """One trajectory on its way through curation: its raw rows in index order,
    then what each stage adds."""

    tid: str
    raws: list[dict]
    traj: Trajectory | None
    screens: list[ScreenInfo] = field(default_factory=list)  # one per raw row
    rows: list[dict] = field(default_factory=list)  # scores, then the decision
    verdict: dict | None = None  # its trajectories.parquet row
    # What the scrub found (its ScrubbedSteps, of the kept steps, and its Policy).
    scrubbed: list[Any] = field(default_factory=list)
    policy: Any = None
    task: Task | None = None  # a kept trajectory's task, scrubbed
    task_records: list[dict] = field(default_factory=list)


class Stage:
    """Subclasses set `name` and implement `run` and `stats`."""

    name: ClassVar[str]

    def run(self, items: Iterator[Any]) -> Iterator[Any]:
        raise NotImplementedError

    def stats(self) -> dict:
        raise NotImplementedError


class Pipeline:
    """Stages chained in their order; `counts` are each stage's own stats."""

    def __init__(self, stages: Iterable[Stage]):
        self.stages = list(stages)

    def run(self, items: Iterable[Any]) -> Iterator[Any]:
        stream = iter(items)
        for stage in self.stages:
            stream = stage.run(stream)
        return stream

    def drain(self, items: Iterable[Any]) -> None:
        deque(self.run(items), maxlen=0)

    def counts(self) -> dict[str, dict]:
        return stage_counts(self.stages)


def stage_counts(stages: Iterable[Stage]) -> dict[str, dict]:
    """stage name -> its stats, in the stages' order."""
    return {stage.name: stage.stats() for stage in stages}
