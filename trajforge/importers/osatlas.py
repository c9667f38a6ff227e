"""OS-Atlas evaluation lines (github.com/OS-Copilot/OS-Atlas `eval/data/*.jsonl`).

OS-Atlas converted AndroidControl, GUI-Odyssey and GUIAct steps into InternVL
conversations: `{id, image, conversations: [{from: human, value: "...Task: T
\\nHistory: ..."}, {from: gpt, value: "thoughts:\\n...\\nactions:\\nCLICK
<point>[[683,321]]</point>"}]}`. The action grammar, on the **0-1000 grid**:
CLICK / LONG_PRESS <point>[[x,y]]</point>, TYPE [text], SCROLL [UP|DOWN|LEFT|
RIGHT], OPEN_APP [name], PRESS_BACK, PRESS_HOME, PRESS_RECENT, ENTER /
PRESS_ENTER, WAIT, COMPLETE, IMPOSSIBLE.

Lines are steps; the episode and step come from the image name, which keeps
the source dataset's naming: `<ep>_<step>.png` (GUI-Odyssey),
`episode_<ep>_screenshot_<step>.png` (AndroidControl), `record_<ep>/step_NN.png`
(GUIAct smartphone), `<uuid>.png` (GUIAct web-single: one step per episode).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

from schemas.actions import ActionType
from schemas.converters import make_action
from schemas.errors import SchemaError
from schemas.grids import GRID_1000, point_from_grid
from trajforge.importers.base import RECORD_ERRORS, Draft, Episode, bad, locate_image, read_records, require

_POINT = re.compile(r"^(CLICK|LONG_PRESS)\s*<point>\s*\[\[\s*([^\]]*)\]\]\s*</point>$")
_ARG = re.compile(r"^([A-Z_]+)\s*\[(.*)\]$", re.DOTALL)
_BARE = {
    "PRESS_BACK": (ActionType.BACK, None),
    "PRESS_HOME": (ActionType.HOME, None),
    "PRESS_RECENT": (ActionType.KEY, "app_switch"),
    "ENTER": (ActionType.KEY, "enter"),
    "PRESS_ENTER": (ActionType.KEY, "enter"),
    "WAIT": (ActionType.WAIT, None),
    "COMPLETE": (ActionType.DONE, None),
    "IMPOSSIBLE": (ActionType.DONE, "impossible"),
}


def is_osatlas(rec) -> bool:
    return isinstance(rec, dict) and "conversations" in rec and "image" in rec


def parse_action(line: str):
    """A canonical Action from one OS-Atlas action line."""
    line = line.strip()
    if m := _POINT.match(line):
        try:
            coords = [float(v) for v in m.group(2).split(",")]
        except ValueError:
            raise SchemaError(f"not a point: {m.group(2)!r}", field="point") from None
        x, y = point_from_grid(coords, GRID_1000, field="point")
        t = ActionType.TAP if m.group(1) == "CLICK" else ActionType.LONG_PRESS
        return make_action(type=t, x=x, y=y, field="point")
    if line in _BARE:
        t, text = _BARE[line]
        return make_action(type=t, text=text)
    if m := _ARG.match(line):
        name, arg = m.group(1), m.group(2)
        if name == "TYPE":
            return make_action(type=ActionType.TYPE, text=arg)
        if name == "OPEN_APP":
            return make_action(type=ActionType.OPEN_APP, text=arg)
        if name == "SCROLL" and arg.lower() in ("up", "down", "left", "right"):
            return make_action(type=ActionType.SCROLL, direction=arg.lower())
    raise SchemaError(f"unknown action {line[:60]!r}", field="actions")


def split_answer(value: str) -> tuple[str | None, str]:
    """(thoughts or None, the action line) of the gpt turn."""
    if "actions:" not in value:
        raise SchemaError("no 'actions:' section", field="conversations")
    head, action = value.rsplit("actions:", 1)
    thought = head.split("thoughts:", 1)[1].strip() if "thoughts:" in head else None
    lines = [s for s in action.strip().splitlines() if s.strip()]
    if len(lines) != 1:
        raise SchemaError(f"expected one action line, got {len(lines)}", field="actions")
    return thought or None, lines[0]


def episode_step(image: str) -> tuple[str, int]:
    p = Path(image.replace("\\", "/"))
    if m := re.match(r"^(?:step_)?(\d+)$", p.stem):
        return p.parent.name, int(m.group(1))
    if m := re.match(r"^(.*)_(\d+)$", p.stem):
        return re.sub(r"_(screenshot|step)$", "", m.group(1)), int(m.group(2))
    return p.stem, 0


def episodes(file: Path, platform: str | Callable[[str], str]) -> Iterator[Episode | SchemaError]:
    """Episodes of an OS-Atlas .jsonl file, steps grouped by the image name.

    `platform` may be a function of the image path (GUIAct mixes web and phone).
    """
    groups: dict[str, list] = defaultdict(list)
    for label, rec in read_records(file):
        if isinstance(rec, SchemaError):
            yield bad(rec, file, label)
            continue
        try:
            image = require(rec, "image", str)
            conv = require(rec, "conversations", list)
            if len(conv) < 2 or not all(isinstance(c, dict) for c in conv):
                raise SchemaError("expected a human and a gpt turn", field="conversations")
            human = str(conv[0].get("value", ""))
            m = re.search(r"Task:\s*(.+)", human)
            if not m:
                raise SchemaError("no 'Task:' line in the human turn", field="conversations")
            thought, line = split_answer(str(conv[-1].get("value", "")))
            action = parse_action(line)
        except RECORD_ERRORS as err:
            yield bad(err, file, label, rec)
            continue
        ep, step = episode_step(image)
        groups[ep].append((step, m.group(1).strip(), thought, action, image, label))
    for ep, items in groups.items():
        items.sort(key=lambda t: t[0])
        steps = [t[0] for t in items]
        if len(set(steps)) != len(steps):
            yield bad(SchemaError(f"step numbers repeat: {steps}", field="image"), file, f"episode {ep}")
            continue
        plat = platform(items[0][4]) if callable(platform) else platform
        drafts = [
            Draft(
                make=(lambda a: lambda w, h: (a, None, []))(a),
                thought=th,
                image=locate_image(file.parent, img),
            )
            for _, _, th, a, img, _ in items
        ]
        yield Episode(
            episode_id=ep,
            instruction=items[0][1],
            drafts=drafts,
            platform=plat,
            device_name="desktop" if plat == "web" else "android",
        )


def file_is_osatlas(file: Path) -> bool:
    """Whether a .jsonl file's first record is an OS-Atlas line."""
    if file.suffix != ".jsonl":
        return False
    for _, rec in read_records(file):
        return is_osatlas(rec)
    return False
