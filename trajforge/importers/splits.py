"""An imported dataset's own train / validation / test split, kept on import.

Datasets that ship a split (AndroidControl's and AitW's `splits.json`:
`{"train": [episode_id, ...], "validation": [...], "test": [...]}`;
GUI-Odyssey's `*_split.json`) have it honoured: the importer writes it into
the task's params as `official_split` (trajforge.publish.holdout.OFFICIAL_SPLIT), and
the export and the set writers put the trajectory in that split. Where no
split file exists, a file the dataset itself names after its split
(UI-S1's `android_control_train_example.jsonl` / `..._evaluation_std.jsonl`,
OS-Atlas's `ac_test.jsonl`) says it; otherwise there is none and the
template hold-out decides.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

from trajforge.publish.holdout import OFFICIAL_SPLIT

SPLIT_FILES = ("splits.json", "split.json")
_NAMED = [
    (re.compile(r"(^|[^a-z])(test|eval|evaluation)([^a-z]|$)"), "test"),
    (re.compile(r"(^|[^a-z])(val|valid|validation|dev)([^a-z]|$)"), "val"),
    (re.compile(r"(^|[^a-z])(train|training)([^a-z]|$)"), "train"),
]


@lru_cache(maxsize=64)
def _split_file(folder: Path) -> dict[str, str]:
    """{episode id: split} from a split file in `folder` or its parent ({} without one)."""
    for where in (folder, folder.parent):
        for name in SPLIT_FILES:
            path = where / name
            if not path.is_file():
                continue
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if isinstance(data, dict):
                return {
                    str(ep): str(split) for split, eps in data.items() if isinstance(eps, list) for ep in eps
                }
    return {}


def split_from_name(file: Path) -> str | None:
    stem = file.name.lower()
    for pattern, split in _NAMED:
        if pattern.search(stem):
            return split
    return None


def official_split(file: Path, episode_id: str) -> str | None:
    """The dataset's own split of an episode read from `file`, or None."""
    by_episode = _split_file(Path(file).resolve().parent)
    if by_episode:
        return by_episode.get(str(episode_id))
    return split_from_name(Path(file))


def with_official_split(params: dict, file: Path, episode_id: str) -> dict:
    split = official_split(file, episode_id)
    return {**params, OFFICIAL_SPLIT: split} if split else params
