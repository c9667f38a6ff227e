"""Scrub: personal data in the kept steps and in the task of each kept trajectory.

Each trajectory gets a policy: "off" (scrubbing switched off, or no trajectory row),
"synthetic_kept" (its source declares its data synthetic, filters/pii_sources.py:
values are found and listed, never changed) or "surrogate" (real data: each value
replaced by its format-preserving surrogate, filters/pii_surrogate.py, and its boxes
blurred, filters/pii_blur.py; OCR reads the screenshots that say nowhere where their
text is, filters/pii_ocr.py). The records name what was found where; the audit file
(filters/stages/write.py) lists them without the values.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from schemas.records import Step, Task, Trajectory

from ..config import CurateConfig
from ..pii import find_pii, scrub_task
from ..pii_blur import needs_ocr, scrub_step
from ..pii_ocr import OcrEngine, default_engine
from ..pii_sources import is_synthetic
from ..pii_surrogate import Surrogates
from .base import Stage, Work
from .read import RawSteps


@dataclass(frozen=True)
class Policy:
    name: str  # "off", "synthetic_kept" or "surrogate"
    surrogates: Surrogates | None = None  # the trajectory's, with "surrogate"

    @property
    def audit_action(self) -> str:
        return "kept_synthetic" if self.name == "synthetic_kept" else "surrogate"


@dataclass
class ScrubbedStep:
    step: Step
    records: list[dict]
    image: bytes | None  # the blurred screenshot; None: the original is kept
    read_by_ocr: bool


class Scrubber(Stage):
    """Scrubs the kept steps and the kept trajectory's task by policy, setting the rows'
    and the verdict's personal-data columns; counts what it found: replaced (real data),
    kept (synthetic), steps with any, trajectories per policy and screens OCR read."""

    name = "scrub"

    def __init__(self, config: CurateConfig, source: RawSteps):
        self.config, self.source = config, source
        self.replaced: Counter[str] = Counter()
        self.synthetic_kept: Counter[str] = Counter()
        self.steps_with_pii = 0
        self.policies: Counter[str] = Counter()
        self.ocr_screens = 0
        self.ocr_engine: OcrEngine | None = None  # loaded on the first screen OCR reads

    def run(self, items: Iterator[Work]) -> Iterator[Work]:
        # Decoding, blurring and encoding let go of the GIL: a kept step per thread.
        with ThreadPoolExecutor(max_workers=max(1, self.config.workers)) as pool:
            for work in items:
                self.trajectory(pool, work)
                yield work

    def trajectory(self, pool: ThreadPoolExecutor, work: Work) -> None:
        """The kept steps scrubbed and their rows' columns set; a kept trajectory's task."""
        for row in work.rows:
            row.update(pii_kinds=None, pii_count=None, screenshot_out=None)
        kept_rows = [row for row in work.rows if row["keep"]]
        kept_raws = [raw for raw, row in zip(work.raws, work.rows) if row["keep"]]
        policy = work.policy = self.policy(work.traj, kept_raws)
        work.scrubbed = list(pool.map(lambda raw: self.step(raw, policy), kept_raws))
        for scrubbed, row in zip(work.scrubbed, kept_rows):
            kinds = self.count_step(scrubbed, policy)
            row.update(pii_kinds=sorted(kinds), pii_count=len(scrubbed.records))
        if work.verdict["keep"] and work.traj is not None:
            work.task, work.task_records = self.task(work.traj, policy)
            work.verdict.update(task_columns(policy, work.task_records))

    def policy(self, traj: Trajectory | None, kept_raws: list[dict]) -> Policy:
        """The surrogates learn the values of the task and of the typed text first, so
        that the same value is replaced in every field even where only one field's
        context lets the detectors find it."""
        if not self.config.scrub or traj is None:
            return Policy("off")
        if is_synthetic(traj, self.config.synthetic_sources):
            return Policy("synthetic_kept")
        surrogates = Surrogates(traj.trajectory_id)
        surrogates.learn(traj.task.instruction)
        surrogates.learn(traj.task.params_json())
        for raw in kept_raws:
            surrogates.learn((raw.get("action") or {}).get("text"))
        return Policy("surrogate", surrogates)

    def step(self, raw: dict, policy: Policy) -> ScrubbedStep:
        """Runs in a worker thread: decoding, blurring and encoding let go of the GIL."""
        step = self.source.step(raw)
        if policy.name == "off":
            return ScrubbedStep(step, [], None, False)
        ocr = self._ocr() if self._wants_ocr(step, policy) else None
        image = self.source.blobs.get(step.screenshot, step.image_format)
        res = scrub_step(
            step,
            image,
            surrogates=policy.surrogates,
            keep=policy.name == "synthetic_kept",
            ocr=ocr,
            ocr_always=self.config.ocr == "always",
        )
        return ScrubbedStep(res.step, res.records, res.image, ocr is not None and image is not None)

    def _wants_ocr(self, step: Step, policy: Policy) -> bool:
        mode = self.config.ocr
        return (
            policy.name == "surrogate"
            and mode != "never"
            and bool(step.screenshot)
            and (mode == "always" or needs_ocr(step))
        )

    def _ocr(self) -> OcrEngine:
        if self.ocr_engine is None:
            self.ocr_engine = default_engine()
        return self.ocr_engine

    def count_step(self, scrubbed: ScrubbedStep, policy: Policy) -> Counter[str]:
        """The kinds found on one kept step, counted (in the main thread)."""
        self.ocr_screens += scrubbed.read_by_ocr
        kinds = Counter(r["kind"] for r in scrubbed.records)
        self.steps_with_pii += bool(scrubbed.records)
        (self.synthetic_kept if policy.name == "synthetic_kept" else self.replaced).update(kinds)
        return kinds

    def task(self, traj: Trajectory, policy: Policy) -> tuple[Task, list[dict]]:
        """A kept trajectory's task, scrubbed by its policy, and the records found in it."""
        self.policies[policy.name] += 1
        task = traj.task
        if policy.name == "off":
            return task, []
        if policy.name == "synthetic_kept":
            matches = find_pii(task.instruction) + find_pii(task.params_json())
            self.synthetic_kept.update(Counter(m.kind for m in matches))
        else:
            task, matches = scrub_task(task, policy.surrogates)
            self.replaced.update(Counter(m.kind for m in matches))
        return task, [
            {"kind": m.kind, "field": "task", "box": None, "note": "not_on_screen"} for m in matches
        ]

    def stats(self) -> dict:
        return {
            "steps_with_pii": self.steps_with_pii,
            "replaced": dict(sorted(self.replaced.items())),
            "synthetic_kept": dict(sorted(self.synthetic_kept.items())),
            "trajectories": dict(sorted(self.policies.items())),
            "ocr_screens": self.ocr_screens,
        }

    def summary(self) -> dict:
        """summary.json's personal-data figures (besides "pii", the replaced kinds)."""
        return {
            "pii_steps": self.steps_with_pii,
            # Synthetic values (pii_synthetic_sources) found and kept as they are; "pii"
            # counts the real ones replaced by surrogates. Each is a line of pii_audit.jsonl.
            "pii_synthetic_kept": dict(sorted(self.synthetic_kept.items())),
            "pii_synthetic_sources": sorted(self.config.synthetic_sources),
            "pii_trajectories": dict(sorted(self.policies.items())),
            "pii_ocr": {
                "mode": self.config.ocr,
                "screens_read": self.ocr_screens,
                "engine": None if self.ocr_engine is None else self.ocr_engine.name,
            },
        }


def task_columns(policy: Policy, records: list[dict]) -> dict:
    """The personal-data columns of a kept trajectory's trajectories.parquet row."""
    kinds = None if policy.name == "off" else sorted({r["kind"] for r in records})
    return {"pii_task_kinds": kinds, "pii_policy": policy.name}
