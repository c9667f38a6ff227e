"""Shared helpers for the importer tests: the sample copies, a store, GUI-Libra export."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from schemas.converters.gui_libra import to_gui_libra
from trajforge.importers import import_path
from trajforge.store.raw import RawStore

SAMPLES = Path(__file__).parent / "samples"


@pytest.fixture
def store(tmp_path) -> RawStore:
    return RawStore(tmp_path / "raw")


def load(store: RawStore, fmt: str):
    """{trajectory_id: Trajectory} and {trajectory_id: [Step...]} of an import collection."""
    trajs = {t.trajectory_id: t for t in store.iter_trajectories(f"import/{fmt}")}
    steps: dict[str, list] = {}
    for s in store.iter_steps(f"import/{fmt}"):
        steps.setdefault(s.trajectory_id, []).append(s)
    return trajs, {k: sorted(v, key=lambda s: s.index) for k, v in steps.items()}


def by_episode(trajs: dict, fmt: str, episode_id: str):
    return next(t for t in trajs.values() if t.task.task_id == f"{fmt}:{episode_id}")


def libra(step, coords: str = "pixels") -> dict:
    """The step's action exported to GUI-Libra's answer JSON."""
    text = to_gui_libra(step.action, step.width, step.height, coords=coords)
    return json.loads(text.split("<answer>", 1)[1].split("</answer>", 1)[0])


def quarantined(result) -> list[dict]:
    if result.quarantine_path is None:
        return []
    return [json.loads(line) for line in result.quarantine_path.read_text().splitlines()]


def with_bad_file(tmp_path: Path, good: Path, name: str, content: str) -> Path:
    """A folder holding a copy of the good sample file (and its images) and a bad file beside it."""
    folder = tmp_path / "in"
    folder.mkdir(exist_ok=True)
    shutil.copy(good, folder / good.name)
    for img in good.parent.glob("*.png"):
        shutil.copy(img, folder / img.name)
    (folder / name).write_text(content, encoding="utf-8")
    return folder


def run(fmt: str, path: Path, store: RawStore, **kw):
    return import_path(fmt, path, store, **kw)
