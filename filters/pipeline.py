"""curate(): every raw step gets a verdict, a reason and its scores; the kept ones are scrubbed.

Six stages (filters/stages/), each small and with its own counts (CurateResult.counts):

1. read: raw_steps/steps.parquet in (trajectory_id, index) order, a trajectory at a
   time (only hashes, signatures and keys are held across the dataset, never images),
   each row validated, each distinct screenshot decoded once.
2. judge (only with a Judge): the trajectories it should see, in small batches.
3. score: every filter's scores (filters/steps.py), spilled to a temporary Parquet file.
4. decide: the first failing filter (FILTER_ORDER) is a step's reason; near-duplicate
   search runs once over all the hashes; then each trajectory's verdict.
5. scrub: personal data in the kept steps and tasks, by the trajectory's policy.
6. write: the verdict tables, the curated store (out_dir/store, collection "curated"),
   pii_audit.jsonl and summary.json, written last.

Read, judge and score are passes of their own; decide, scrub and write run together in
the last pass, a trajectory at a time. Tables go to temporary names and are renamed; the
store is built beside the old one and swapped in, so a re-run replaces it. The same
input gives the same bytes.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from schemas.records import Step, Trajectory
from trajforge.store.raw import BlobStore, RawStore

from .base import check_order, score_columns
from .config import CurateConfig
from .judge import JudgeVerdict
from .stages.decide import Decider
from .stages.judge import judge_summary, judge_trajectories, verdict_columns
from .stages.read import RawSteps
from .stages.score import Scorer
from .stages.scrub import Policy, ScrubbedStep, Scrubber, task_columns
from .stages.write import CurationWriter, steps_schema
from .steps import FILTER_ORDER, default_filters


@dataclass
class CurateResult:
    out_dir: Path
    steps_in: int
    steps_kept: int
    dropped: dict[str, int]
    trajectories_in: int
    trajectories_kept: int
    pii: dict[str, int]
    summary: dict
    seconds: float
    timings: dict[str, float] = field(default_factory=dict)
    counts: dict[str, dict] = field(default_factory=dict)  # stage -> what it counted

    @property
    def store(self) -> RawStore:
        return RawStore(self.out_dir / "store")


def curate(
    raw_steps_dir: Path,
    blobs: BlobStore,
    out_dir: Path,
    *,
    config: CurateConfig | None = None,
    judge=None,
    progress: Callable[[str], Any] | None = None,
) -> CurateResult:
    """Curate raw_steps_dir (steps.parquet + trajectories.parquet; screenshots in `blobs`).

    `progress`, if given, is called with a short line of text after each batch
    (a logger's `info` fits).
    """
    started = time.perf_counter()
    config = config or CurateConfig()
    raw_steps_dir, out_dir = Path(raw_steps_dir), Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    work = out_dir / ".curate-work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    try:
        config.check()
        result = _run(
            RawSteps(raw_steps_dir, blobs, work, config.batch_rows),
            out_dir,
            config,
            judge,
            progress or (lambda msg: None),
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result.seconds = time.perf_counter() - started
    return result


@contextmanager
def _timed(timings: dict[str, float], name: str) -> Iterator[None]:
    t0 = time.perf_counter()
    yield
    timings[name] = round(time.perf_counter() - t0, 3)


def _run(
    source: RawSteps, out_dir: Path, config: CurateConfig, judge, say: Callable[[str], Any]
) -> CurateResult:
    """The stages in their order (see the module's docstring)."""
    timings: dict[str, float] = {}
    filters = default_filters(config)
    check_order(filters)
    trajs = source.trajectories()
    verdicts: dict[str, JudgeVerdict] = {}
    if judge is not None:
        with _timed(timings, "judge_s"):
            verdicts = judge_trajectories(judge, source, trajs, config)
        say(f"curate: judged {len(verdicts)} trajectories")
    scorer = Scorer(source, filters, verdicts)
    with _timed(timings, "score_s"):
        scorer.run(trajs, source.work / "scores.parquet", config.workers, say)
    with _timed(timings, "write_s"):
        stages = _Stages(
            source=source,
            scorer=scorer,
            decider=Decider(filters, scorer.steps),
            scrubber=Scrubber(config, source),
            verdicts=verdicts,
            writer=CurationWriter(
                out_dir, source.work, source.blobs, steps_schema(score_columns(filters)), config.batch_rows
            ),
        )
        traj_rows = stages.last_pass(trajs, config.workers, say)
    for tid in sorted(set(trajs) - scorer.trajectories):  # a trajectory with no step rows
        traj_rows[tid] = stages.decider.without_steps(trajs[tid])
    summary = _summary(stages, config, traj_rows, judged=judge is not None)
    stages.writer.commit([traj_rows[t] for t in sorted(traj_rows)], summary)
    return CurateResult(
        out_dir=out_dir,
        steps_in=summary["steps_in"],
        steps_kept=summary["steps_kept"],
        dropped=summary["dropped"],
        trajectories_in=summary["trajectories_in"],
        trajectories_kept=summary["trajectories_kept"],
        pii=summary["pii"],
        summary=summary,
        seconds=0.0,
        timings=timings,
        counts=_counts(stages),
    )


@dataclass(frozen=True)
class _Stages:
    """One run's stages, once scored; decide, scrub and write run together in the last
    pass, a trajectory at a time over the scored steps."""

    source: RawSteps
    scorer: Scorer
    decider: Decider
    scrubber: Scrubber
    writer: CurationWriter
    verdicts: dict[str, JudgeVerdict]

    def last_pass(
        self, trajs: dict[str, Trajectory], workers: int, say: Callable[[str], Any]
    ) -> dict[str, dict]:
        """trajectory_id -> its trajectories.parquet row, for those with step rows."""
        scores = _rows_of(pq.ParquetFile(self.source.work / "scores.parquet"), self.source.batch_rows)
        traj_rows = {}
        # Decoding, blurring and encoding let go of the GIL: a kept step per thread.
        with self.writer, ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            for tid, raws in self.source.groups("write"):
                rows = [next(scores) for _ in raws]
                traj_rows[tid] = self.trajectory(pool, trajs.get(tid), raws, rows)
                if self.writer.step_rows(rows):
                    say(f"curate: decided {rows[-1]['row'] + 1} of {self.scorer.steps} steps")
        return traj_rows

    def trajectory(
        self, pool: ThreadPoolExecutor, traj: Trajectory | None, raws: list[dict], rows: list[dict]
    ) -> dict:
        """Decides the rows (in place), scrubs and stores the kept steps; the verdict row."""
        for raw, row in zip(raws, rows):
            assert (row["trajectory_id"], row["index"]) == (raw["trajectory_id"], raw["index"])
            self.decider.step(row)
            row.update(pii_kinds=None, pii_count=None, screenshot_out=None)
        kept_rows = [row for row in rows if row["keep"]]
        kept_raws = [raw for raw, row in zip(raws, rows) if row["keep"]]
        policy = self.scrubber.policy(traj, kept_raws)
        scrubbed = pool.map(lambda raw: self.scrubber.step(raw, policy), kept_raws)
        kept = [self._store_step(s, row, policy) for s, row in zip(scrubbed, kept_rows)]
        verdict = self.decider.trajectory(traj, rows, len(kept))
        verdict.update(verdict_columns(self.verdicts.get(verdict["trajectory_id"])))
        if verdict["keep"] and traj is not None:
            task, records = self.scrubber.task(traj, policy)
            self.writer.audit(traj.trajectory_id, None, policy.audit_action, records)
            self.writer.trajectory(traj.model_copy(update={"task": task}), kept)
            verdict.update(task_columns(policy, records))
        return verdict

    def _store_step(self, scrubbed: ScrubbedStep, row: dict, policy: Policy) -> Step:
        step = self.writer.screenshot(scrubbed.step, scrubbed.image)
        kinds = self.scrubber.count_step(scrubbed, policy)
        self.writer.audit(step.trajectory_id, step.index, policy.audit_action, scrubbed.records)
        row.update(pii_kinds=sorted(kinds), pii_count=len(scrubbed.records), screenshot_out=step.screenshot)
        return step


def _summary(stages: _Stages, config: CurateConfig, traj_rows: dict[str, dict], judged: bool) -> dict:
    """summary.json: the stages' figures that a reader of the curated data needs."""
    d, scorer = stages.decider, stages.scorer
    # Reconciliation holds by construction; a failure here is a bug, not bad data.
    assert scorer.steps == d.steps_kept + sum(d.dropped.values()), (scorer.steps, d.dropped)
    assert len(traj_rows) == d.trajectories_kept + sum(d.trajectories_dropped.values())
    summary = {
        "steps_in": scorer.steps,
        "steps_kept": d.steps_kept,
        "dropped": dict(d.dropped),
        "trajectories_in": len(traj_rows),
        "trajectories_kept": d.trajectories_kept,
        "trajectories_dropped": dict(sorted(d.trajectories_dropped.items())),
        "pii": dict(sorted(stages.scrubber.replaced.items())),
        **stages.scrubber.summary(),
        "neardup_histogram": {
            str(k): v for k, v in sorted(d.histogram(config.histogram_max_distance).items())
        },
        "screens_decoded": len(scorer.screens),
        "filter_order": list(FILTER_ORDER),
        "config": {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(config).items()},
        "near_duplicate_max_distance": d.near.max_distance,
    }
    if judged:
        summary["judge"] = judge_summary(stages.verdicts, traj_rows, config.trusted_verifiers)
    return summary


def _counts(stages: _Stages) -> dict[str, dict]:
    """What each stage counted (CurateResult.counts)."""
    d, s, w = stages.decider, stages.scrubber, stages.writer
    verdicts = stages.verdicts.values()
    return {
        "read": {
            "trajectories": stages.source.trajectories_read,
            "screens_decoded": len(stages.scorer.screens),
        },
        "judge": {"judged": len(verdicts), "parsed": sum(1 for v in verdicts if v.parsed)},
        "score": {"steps": stages.scorer.steps, "trajectories": len(stages.scorer.trajectories)},
        "decide": {
            "steps_kept": d.steps_kept,
            "steps_dropped": dict(d.dropped),
            "trajectories_kept": d.trajectories_kept,
            "trajectories_dropped": dict(sorted(d.trajectories_dropped.items())),
        },
        "scrub": {
            "steps_with_pii": s.steps_with_pii,
            "replaced": dict(sorted(s.replaced.items())),
            "synthetic_kept": dict(sorted(s.synthetic_kept.items())),
            "trajectories": dict(sorted(s.policies.items())),
            "ocr_screens": s.ocr_screens,
        },
        "write": {
            "step_rows": w.rows_written,
            "trajectories": w.trajectories_stored,
            "steps": w.steps_stored,
            "audit_lines": w.audit_lines,
        },
    }


def _rows_of(pf: pq.ParquetFile, batch_size: int):
    for batch in pf.iter_batches(batch_size=batch_size):
        yield from batch.to_pylist()
