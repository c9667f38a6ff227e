"""Judge (only with a Judge): the VLM's verdicts on the trajectories it should see, a few
trajectories per call. It runs before scoring: JudgeFailure and JudgeIrrelevant
(filters/steps.py) score from its verdicts like any other score.
"""

from __future__ import annotations

from schemas.errors import SchemaError
from schemas.records import Trajectory

from ..config import CurateConfig
from ..judge import Judge, JudgeInput, JudgeVerdict, agreement
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


def judge_trajectories(
    judge: Judge, source: RawSteps, trajs: dict[str, Trajectory], config: CurateConfig
) -> dict[str, JudgeVerdict]:
    """trajectory_id -> the judge's verdict, for each trajectory it wants to see."""
    verdicts: dict[str, JudgeVerdict] = {}
    pending: list[JudgeInput] = []

    def flush():
        for v in judge.judge(pending):
            verdicts[v.trajectory_id] = v
        pending.clear()

    for tid, rows in source.groups("judge"):
        traj = trajs.get(tid)
        if traj is None or not wants_judge(config, traj, len(rows)):
            continue
        item = judge_input(source, traj, rows)
        if item is not None:
            pending.append(item)
        if len(pending) >= config.judge_batch:
            flush()
    if pending:
        flush()
    return verdicts


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
