"""The filter framework: score first, keep second (datatrove / NeMo-Curator style).

A filter computes scores for every step of a trajectory and stores them as
columns; `keep(scores)` then decides from those stored scores and the filter's
thresholds only. So a threshold can move and the whole table be re-decided
(`decide_table`) without decoding a single image again.

A step is dropped for one reason: the first filter, in the fixed order the
pipeline is given, whose `keep` says no. Every filter's scores are stored
anyway, so a drop can be looked at and recounted under other thresholds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import pyarrow as pa

from schemas.records import Step, Trajectory

Level = Literal["trajectory", "step"]

# Columns every row of the verdict table carries besides the filters' scores;
# filters may read them in `keep`.
BASE_COLUMNS: dict[str, pa.DataType] = {
    "trajectory_id": pa.string(),
    "index": pa.int32(),
    "row": pa.int64(),  # position in (trajectory_id, index) order: the row id
    "action_type": pa.string(),
}


@dataclass
class ScreenInfo:
    """What was read from one screenshot (cached by sha: each is decoded once)."""

    status: Literal["ok", "empty", "missing", "broken"]
    phash: int | None = None  # unsigned 64-bit pHash (filters.phash)
    gray_std: float | None = None
    error: str | None = None


@dataclass
class StepView:
    """A step as the filters see it: its raw row, the validated Step (None when the
    row does not validate: `error` says why) and its screenshot's ScreenInfo."""

    row: int
    raw: dict
    step: Step | None
    error: str | None
    screen: ScreenInfo


@dataclass
class TrajectoryContext:
    """One trajectory's steps in index order, with what the pipeline knows about it."""

    trajectory: Trajectory | None
    steps: list[StepView]
    judge: Any = None  # a filters.judge.JudgeVerdict when the judge ran on it
    extra: dict = field(default_factory=dict)


class Filter:
    """Subclasses set `name` (the drop reason), `level` and `columns`."""

    name: ClassVar[str]
    level: ClassVar[Level] = "step"
    columns: ClassVar[dict[str, pa.DataType]] = {}

    def score(self, ctx: TrajectoryContext) -> list[dict[str, Any]]:
        """One dict of this filter's columns per step of ctx, in order."""
        raise NotImplementedError

    def keep(self, scores: Mapping[str, Any]) -> bool:
        """From stored scores and thresholds only (never the image or the step)."""
        raise NotImplementedError

    def settle(self) -> Callable[[dict[str, Any]], None] | None:
        """Once every step is scored: what completes a scored row's columns, for a filter
        whose score needs the whole dataset (the near-duplicate search: "earlier" spans
        every trajectory); None for one whose `score` said it all."""
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name})"


def decide(filters: Sequence[Filter], scores: Mapping[str, Any]) -> tuple[bool, str | None]:
    """(keep, reason): the reason is the first failing filter's name."""
    for f in filters:
        if not f.keep(scores):
            return False, f.name
    return True, None


def check_order(filters: Sequence[Filter]) -> None:
    """Trajectory-level filters come first, and names and columns are unique."""
    seen_step = False
    for f in filters:
        if f.level == "step":
            seen_step = True
        elif seen_step:
            raise ValueError(f"trajectory-level filters must come first: {list(filters)}")
    names = [f.name for f in filters]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate filter names: {names}")
    cols = [c for f in filters for c in f.columns]
    clash = set(cols) & set(BASE_COLUMNS) | {c for c in cols if cols.count(c) > 1}
    if clash:
        raise ValueError(f"score columns defined twice: {sorted(clash)}")


def score_columns(filters: Iterable[Filter]) -> dict[str, pa.DataType]:
    out: dict[str, pa.DataType] = {}
    for f in filters:
        out.update(f.columns)
    return out


def decide_table(table: pa.Table, filters: Sequence[Filter]) -> tuple[list[bool], list[str | None]]:
    """Re-decide a stored verdict table under (possibly moved) thresholds."""
    keeps, reasons = [], []
    for batch in table.to_batches(max_chunksize=4096):
        for row in batch.to_pylist():
            k, r = decide(filters, row)
            keeps.append(k)
            reasons.append(r)
    return keeps, reasons
