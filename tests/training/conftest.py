"""Shared by the training tests: the tiny model and a small reasoning set on disk.

Both are built once per test session (the tiny model once per process, under
$TRAJFORGE_DATA/models when that is set). Sizes are small on purpose: the whole
tests/training folder must run in about two minutes on a loaded 2-core machine.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.vlm.helpers import tiny_model_path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

# Small images: at most 16 image tokens for the tiny model (28*28 per merged token).
TINY_IMAGE_PIXELS = 28 * 28 * 16
SPLITS = (("train", 0.6), ("val", 0.2), ("test", 0.2))


def build_small_reasoning_set(root: Path, n_traj: int = 12) -> Path:
    """A reasoning set (template CoT, both modes, splits train/val/test) from the export
    fixture's store (96x60 screenshots, EN and ZH, varied actions); returns its folder."""
    from synthesis.cot import generate_cot
    from synthesis.set_options import ReasoningSetOptions
    from synthesis.set_writer import write_reasoning_set
    from tests.export.shard_fixtures import build_store

    built = build_store(root / "curated", n_traj=n_traj)
    rows = [
        c.to_row()
        for c in generate_cot([(built.trajectories[t], built.steps[t]) for t in sorted(built.trajectories)])
    ]
    out = root / "reasoning"
    options = ReasoningSetOptions(splits=SPLITS, max_samples_per_shard=16)
    write_reasoning_set(built.store, rows, out, dataset="reasoning", options=options)
    return out


@pytest.fixture(scope="session")
def tiny_model() -> Path:
    """Path of the tiny Qwen2-VL (random weights, offline tokenizer)."""
    return tiny_model_path()


@pytest.fixture(scope="session")
def small_reasoning_set(tmp_path_factory) -> Path:
    """Path of a small reasoning-set folder (manifest.json + train/val/test shards)."""
    return build_small_reasoning_set(tmp_path_factory.mktemp("training-set"))
