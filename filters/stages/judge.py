"""Judge (only with a Judge): the VLM's verdicts on the trajectories it should see, a few
trajectories per call, in a pass of its own before scoring: JudgeFailure and JudgeIrrelevant
(filters/steps.py) score from its verdicts like any other score.
"""

from __future__ import annotations

from collections.abc import Iterator

from schemas.errors import SchemaError
from schemas.records import Trajectory

from ..config import CurateConfig
from ..judge import Judge, JudgeInput, JudgeVerdict, agreement
from .base import Stage, Work
from .read import RawSteps


def wants_judge(config: CurateConfig, traj: Trajectory, n_rows: int) -> bool:
    """Not runs the trajectory filters drop anyway; trusted runs only to measure agreement."""
    if not config.min_steps <= n_rows <= config.max_steps:
        return False
    if traj.verified_by in config.trusted_verifiers:
        return config.judge_trusted
    return not (config.drop_failed and traj.outcome in ("failure", "error"))


def judge_input(source: RawSteps, traj: Trajectory, rows: list[dict]) -> JudgeInput | None:
    """The steps that validate and their screenshots (b"" where there is none)."""
    steps, images = [], []
    for raw in rows:
        try:
            step = source.step(raw)
        except SchemaError:
            continue  # the judge sees the steps it can; the filters count the rest
        path = source.blobs.path(step.screenshot, step.image_format)
        steps.append(step)
        images.append(path.read_bytes() if step.screenshot and path.is_file() else b"")
    return JudgeInput(trajectory=traj, steps=steps, images=images) if steps else None


class Judging(Stage):
    """trajectory_id -> the judge's verdict (`verdicts`), for each trajectory it wants
    to see, `judge_batch` trajectories per call; without a judge, none. Counts the
    verdicts and those parsed."""

    name = "judge"

    def __init__(self, judge: Judge | None, source: RawSteps, config: CurateConfig):
        self.judge, self.source, self.config = judge, source, config
        self.verdicts: dict[str, JudgeVerdict] = {}

    def run(self, items: Iterator[Work]) -> Iterator[Work]:
        pending: list[JudgeInput] = []
        for work in items:
            if work.traj is not None and wants_judge(self.config, work.traj, len(work.raws)):
                self._add(pending, judge_input(self.source, work.traj, work.raws))
            yield work
        if pending:
            self._judge(pending)

    def _add(self, pending: list[JudgeInput], item: JudgeInput | None) -> None:
        if item is not None:
            pending.append(item)
        if len(pending) >= self.config.judge_batch:
            self._judge(pending)

    def _judge(self, pending: list[JudgeInput]) -> None:
        for v in self.judge.judge(pending):
            self.verdicts[v.trajectory_id] = v
        pending.clear()

    def stats(self) -> dict:
        verdicts = self.verdicts.values()
        return {"judged": len(verdicts), "parsed": sum(1 for v in verdicts if v.parsed)}


def verdict_columns(v: JudgeVerdict | None) -> dict:
    """The judge's columns of trajectories.parquet."""
    if v is None:
        return {
            "judge_success": None,
            "judge_parsed": None,
            "judge_model": None,
            "judge_irrelevant": None,
            "judge_raw": None,
        }
    return {
        "judge_success": v.success,
        "judge_parsed": v.parsed,
        "judge_model": v.model_id,
        "judge_irrelevant": list(v.irrelevant_steps),
        "judge_raw": v.raw,
    }


def judge_summary(
    verdicts: dict[str, JudgeVerdict], traj_rows: dict[str, dict], trusted: tuple[str, ...]
) -> dict:
    """How many were judged and parsed, and the agreement with trusted verifiers."""
    verified = [v for tid, v in verdicts.items() if traj_rows.get(tid, {}).get("verified_by") in trusted]
    outcomes = {tid: r["outcome"] for tid, r in traj_rows.items()}
    return {
        "judged": len(verdicts),
        "models": sorted({v.model_id for v in verdicts.values()}),
        "parsed": sum(1 for v in verdicts.values() if v.parsed),
        "agreement": agreement(verified, outcomes),
    }
