"""curate(): every raw step gets a verdict, a reason and its scores; the kept ones are scrubbed.

Six stages (filters/stages/), each a `Stage` (filters/stages/base.py): a `run` over
the stream of trajectories (`Work` items) and its own `stats` (CurateResult.counts):

1. read: raw_steps/steps.parquet in (trajectory_id, index) order, a trajectory at a
   time (only hashes, signatures and keys are held across the dataset, never images),
   each distinct screenshot decoded once.
2. judge (only with a Judge): the trajectories it should see, in small batches.
3. score: every filter's scores (filters/steps.py), spilled to a temporary Parquet file.
4. decide: near-duplicate search once over all the hashes as it sets out; the first
   failing filter (FILTER_ORDER) is a step's reason; then each trajectory's verdict.
5. scrub: personal data in the kept steps and tasks, by the trajectory's policy.
6. write: the verdict tables, the curated store (out_dir/store, collection "curated"),
   pii_audit.jsonl and summary.json, written last.

Each pass is a `Pipeline` of stages over one ordered read of the raw table: read →
judge, read → score, then read → decide → scrub → write, a trajectory at a time (the
decisions wait for the whole scoring pass: "earlier" spans the dataset). Tables go to
temporary names and are renamed; the store is built beside the old one and swapped
in, so a re-run replaces it. The same input gives the same bytes.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from trajforge.store.raw import BlobStore, RawStore

from .base import check_order, score_columns
from .config import CurateConfig
from .stages.base import Pipeline, stage_counts
from .stages.decide import Decider
from .stages.judge import Judging, judge_summary
from .stages.read import RawSteps, Read
from .stages.score import Scorer
from .stages.scrub import Scrubber
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
    read = Read(source, config.workers)
    judging = Judging(judge, source, config)
    if judge is not None:
        with _timed(timings, "judge_s"):
            Pipeline([read, judging]).drain(source.groups("judge"))
        say(f"curate: judged {len(judging.verdicts)} trajectories")
    scores = source.work / "scores.parquet"
    scorer = Scorer(source, filters, judging.verdicts, scores, say)
    with _timed(timings, "score_s"):
        Pipeline([read, scorer]).drain(source.groups("score"))
    steps_in = scorer.stats()["steps"]
    decider = Decider(filters, scores, read.trajectories, judging.verdicts, config.batch_rows)
    scrubber = Scrubber(config, source)
    writer = CurationWriter(
        out_dir,
        source.work,
        source.blobs,
        steps_schema(score_columns(filters)),
        config.batch_rows,
        progress=lambda n: say(f"curate: decided {n} of {steps_in} steps"),
    )
    with _timed(timings, "write_s"):
        last_pass = Pipeline([read, decider, scrubber, writer]).run(source.groups("write"))
        traj_rows = {work.tid: work.verdict for work in last_pass}
    counts = stage_counts([read, judging, scorer, decider, scrubber, writer])
    summary = _summary(counts, traj_rows, config, decider, scrubber)
    if judge is not None:
        summary["judge"] = judge_summary(judging.verdicts, traj_rows, config.trusted_verifiers)
    writer.commit([traj_rows[t] for t in sorted(traj_rows)], summary)
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
        counts=counts,
    )


def _summary(
    counts: dict[str, dict],
    traj_rows: dict[str, dict],
    config: CurateConfig,
    decider: Decider,
    scrubber: Scrubber,
) -> dict:
    """summary.json: the stages' figures that a reader of the curated data needs."""
    steps_in, d = counts["score"]["steps"], counts["decide"]
    # Reconciliation holds by construction; a failure here is a bug, not bad data.
    assert steps_in == d["steps_kept"] + sum(d["steps_dropped"].values()), (steps_in, d)
    assert len(traj_rows) == d["trajectories_kept"] + sum(d["trajectories_dropped"].values())
    return {
        "steps_in": steps_in,
        "steps_kept": d["steps_kept"],
        "dropped": dict(d["steps_dropped"]),
        "trajectories_in": len(traj_rows),
        "trajectories_kept": d["trajectories_kept"],
        "trajectories_dropped": dict(d["trajectories_dropped"]),
        "pii": dict(counts["scrub"]["replaced"]),
        **scrubber.summary(),
        "neardup_histogram": {
            str(k): v for k, v in sorted(decider.histogram(config.histogram_max_distance).items())
        },
        "screens_decoded": counts["read"]["screens_decoded"],
        "filter_order": list(FILTER_ORDER),
        "config": {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(config).items()},
        "near_duplicate_max_distance": decider.near.max_distance,
    }
