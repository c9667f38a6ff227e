"""Shared by verl and EasyR1: the rule reward's ground truth of an Item, images as
Parquet structs of embedded bytes (what both readers decode), and the reward file.

The ground truth is synthesis.gui_reward.ground_truth as a JSON string (one Arrow type in
every row): GUI-Libra's RL data (the action type, the value, the point in the profile's
frame and normalised, the target box on a 0-1000 grid and normalised), plus a swipe's
direction and end point and a long press's duration, so every action is expressed.
The reward that scores it (synthesis/gui_reward.py, standard library only) is copied
into the output as `reward.py`, which verl and EasyR1 load by path.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from synthesis import gui_reward
from trajforge.convert.source import Item

REWARD_FILE = "reward.py"
README = "README.md"


class Inexpressible(Exception):
    """A sample the target format cannot carry (counted and listed in the manifest)."""


def ground_truth(item: Item) -> str:
    if item.kind == "grounding":
        gt = gui_reward.ground_truth(
            gui_reward.GROUND,
            item.point,
            None,
            coords=item.meta.get("coords") or "pixels",
            size=[item.width, item.height],
            target_box=item.meta.get("box_norm"),
            box=item.box,
        )
    else:
        body = item.answer[item.answer.index("<answer>") + 8 : item.answer.rindex("</answer>")]
        gt = gui_reward.ground_truth(
            item.action_type,
            item.point,
            json.loads(body).get("value"),
            coords=item.meta.get("coords") or "pixels",
            size=[item.width, item.height],
            target_box=item.meta.get("target_box"),
            action=item.meta.get("action"),
        )
    return json.dumps(gt, ensure_ascii=False, sort_keys=True)


def image_struct(item: Item) -> dict:
    return {"bytes": item.image, "path": f"{item.key}.{item.image_ext}"}


def write_reward(tmp: Path, how: str) -> dict:
    """Copy the reward file into the output, with a README saying how to point the trainer
    at it (`how`, markdown); the manifest's `reward_function` entry."""
    shutil.copyfile(gui_reward.__file__, tmp / REWARD_FILE)
    (tmp / README).write_text(
        "# GUI-Libra step reward\n\n"
        f"`{REWARD_FILE}` is trajforge's step reward (synthesis/gui_reward.py, standard library "
        "only): 0.1 for a well-formed answer + 0.9 when the action type, the value (token F1 "
        ">= 0.5; a swipe's or scroll's direction) and the point (in the target box, or near "
        "the recorded point) all match. Each row's ground truth is its JSON.\n\n" + how,
        encoding="utf-8",
    )
    return {"path": REWARD_FILE, "readme": README}
