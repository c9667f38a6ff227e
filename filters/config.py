"""CurateConfig: the thresholds and switches of one curation run (filters.pipeline.curate).

Its own module because every stage reads it (filters/stages/) and the pipeline composes
the stages: defined here, neither imports the other for it.
"""

from __future__ import annotations

from dataclasses import dataclass

from .pii_sources import DEFAULT_SYNTHETIC_SOURCES
from .steps import BLANK_MIN_STD

OCR_MODES = ("no_tree", "always", "never")


@dataclass(frozen=True)
class CurateConfig:
    min_steps: int = 3
    max_steps: int = 50
    drop_failed: bool = True
    loop_k: int = 3
    near_duplicate_max_distance: int | None = None  # None: neardup.DEFAULT_MAX_DISTANCE
    noop_max_distance: int = 1
    blank_min_std: float = BLANK_MIN_STD
    element_max_distance: float = 0.0
    oob_tolerance: float = 0.0
    trusted_verifiers: tuple[str, ...] = ("state",)
    judge_trusted: bool = True  # judge state-verified runs too, to measure agreement
    judge_batch: int = 4  # trajectories per Judge.judge call
    scrub: bool = True
    # Sources whose personal data is synthetic (filters/pii_sources.py): kept, listed.
    synthetic_sources: tuple[str, ...] = DEFAULT_SYNTHETIC_SOURCES
    # OCR for real data's screenshots: "no_tree" (those without a tree or elements),
    # "always", or "never" (filters/pii_ocr.py).
    ocr: str = "no_tree"
    batch_rows: int = 512
    workers: int = 2  # screenshot decoding threads (PIL lets go of the GIL)
    histogram_max_distance: int = 32  # the whole range, so the plot shows where the radius cuts

    def check(self) -> None:
        """curate() calls it before it reads anything."""
        if self.ocr not in OCR_MODES:
            raise ValueError(f"CurateConfig.ocr={self.ocr!r}: expected one of {OCR_MODES}")
