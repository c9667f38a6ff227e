"""Validating mousepad's example tasks (a desktop file, the environment's `command`
verifier reading each task's TASK_PARAM_TEXT) on a real Xvfb and AT-SPI bus: another
task's verifier judged on a demonstration's end state reads that task's params, not the
episode's, so the English and Chinese notes do not satisfy each other."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from crawlers.task_validation import ValidationSettings, validate_tasks
from schemas.environment import load_environment

from .procs import assert_nothing_left, session_pids

ENVIRONMENTS = Path(__file__).resolve().parents[2] / "examples" / "environments"
pytestmark = pytest.mark.skipif(
    any(shutil.which(p) is None for p in ("Xvfb", "mousepad")),
    reason="needs Xvfb and mousepad (scripts/setup_desktop.sh)",
)


def test_mousepads_notes_are_kept_each_specific_to_its_text():
    before = session_pids()
    environment = load_environment(ENVIRONMENTS / "mousepad.yaml")
    report = validate_tasks(environment, ValidationSettings(random_tries=3, random_steps=2))
    assert report.kept == ["note-en", "note-zh"] and report.rejections == []
    for task_id in report.kept:
        figures = report.figures[task_id]
        # tap the text box, type, ctrl+s; no 2-step walk saves the exact note
        assert (figures.demo_steps, figures.random_success, figures.random_tries) == (3, 0, 3)
    assert report.episodes == 2 * 2 + 3  # the two notes start alike: one set of walks
    assert_nothing_left(before)
