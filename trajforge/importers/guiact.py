"""GUIAct (GUICourse, github.com/yiye3/GUICourse) web-single, web-multi and smartphone steps.

Native records (`*_data.json`, a list): `uid`, `image_id`, `image_size`
{width, height}, `question` (the task), `actions_history`, `logs`,
`thoughts`, `actions_label` (a list of actions; a single dict is read too).
Images ship base64 in parquet; `convert_parquet_to_png.py` writes
`<image_id>.png`, looked for next to the file and in `images/`.

Quirks handled:
- The uid scheme differs by subset: web-single `uid_image_<uuid>_qa_NN`
  (one single-step episode per uid), web-multi `uid_record_<N>_step_<NN>`,
  smartphone `uid_episode_<id>_step_<NN>` (steps of one episode, ordered by NN).
- One uid can carry several actions: each becomes its own step on the same
  screenshot, in the order given.
- Positions are dicts keyed by format: `related` (0-1 floats) is read, else
  `absolute` (pixels of `image_size`); strings "<box>x1, y1, x2, y2</box>"
  and "<point>x, y</point>"; `dual_point` {from, to}; `scroll` {down, right}.
- `actions_history` / `logs` are strings in the quoted records (empty lists
  elsewhere): neither is needed, so either is accepted.

Mapping: click / tap -> tap (centre of `element`, which is also the target,
or `point`), input -> type, enter -> key "enter", scroll -> scroll (sign of
the larger of down/right; its size as `amount` in wheel notches of
SCROLL_NOTCH_PX: `related` is a fraction of the image's height / width,
`absolute` pixels), select_text -> swipe (the drag that selects),
copy / copy_text -> key "ctrl+c" (schemas.keys' canonical names), answer -> answer, select -> select,
swipe -> swipe, go_back -> back, go_home -> home, task_complete -> done,
task_impossible -> done("impossible"). hover has no canonical action: it is
read as wait at the point with description "hover" (the pointer moves,
nothing is clicked), so web-multi episodes keep their steps in order.

Not read: the official `results/*.json` files (model predictions, `pred`,
not ground truth) are quarantined with that reason. Also read: OS-Atlas's
converted GUIAct steps (osatlas.py); smartphone ones by their image path.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from schemas.actions import SCROLL_NOTCH_PX, ActionType
from schemas.converters import make_action
from schemas.errors import SchemaError
from schemas.records import Element
from trajforge.importers import osatlas
from trajforge.importers.base import (
    RECORD_ERRORS,
    Context,
    Draft,
    Episode,
    Importer,
    bad,
    locate_image,
    number,
    read_records,
    require,
)

_UID = [
    (re.compile(r"^uid_(record_\d+)_step_(\d+)$"), "web"),
    (re.compile(r"^uid_(episode_\w+?)_step_(\d+)$"), "android"),
    (re.compile(r"^uid_(image_.+)$"), "web"),
]
_NUM = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf", re.IGNORECASE)
_BARE = {
    "enter": (ActionType.KEY, "enter"),
    "copy": (ActionType.KEY, "ctrl+c"),
    "copy_text": (ActionType.KEY, "ctrl+c"),
    "go_back": (ActionType.BACK, None),
    "go_home": (ActionType.HOME, None),
    "task_complete": (ActionType.DONE, None),
    "task_impossible": (ActionType.DONE, "impossible"),
}


class GuiActImporter(Importer):
    name = "guiact"

    def episodes(self, file: Path, ctx: Context) -> Iterator[Episode | SchemaError]:
        if osatlas.file_is_osatlas(file):
            yield from osatlas.episodes(file, lambda img: "android" if "smartphone" in img else "web")
            return
        groups: dict[str, list] = defaultdict(list)
        for label, rec in read_records(file):
            if isinstance(rec, SchemaError):
                yield bad(rec, file, label)
                continue
            try:
                ep, step, platform = _uid(rec)
                question = require(rec, "question", str)
                drafts = _drafts(file, rec)
                groups[ep].append((step, platform, question, drafts))
            except RECORD_ERRORS as err:
                uid = rec.get("uid") if isinstance(rec, dict) else None
                yield bad(err, file, f"{label} ({uid})" if uid else label, rec)
        for ep, items in groups.items():
            items.sort(key=lambda t: t[0])
            steps = [t[0] for t in items]
            if len(set(steps)) != len(steps):
                yield bad(SchemaError(f"steps repeat: {steps}", field="uid"), file, f"episode {ep}")
                continue
            platform = items[0][1]
            yield Episode(
                episode_id=ep,
                instruction=items[0][2],
                drafts=[d for t in items for d in t[3]],
                platform=platform,
                device_name="desktop" if platform == "web" else "android",
            )


def _uid(rec: Any) -> tuple[str, int, str]:
    if isinstance(rec, dict) and "pred" in rec:
        raise SchemaError("a model prediction (GUICourse results file), not ground truth", field="pred")
    uid = require(rec, "uid", str)
    for pattern, platform in _UID:
        if m := pattern.match(uid):
            step = int(m.group(2)) if m.lastindex and m.lastindex > 1 else 0
            return m.group(1), step, platform
    raise SchemaError(f"{uid!r} matches no GUIAct uid scheme", field="uid")


def _drafts(file: Path, rec: dict) -> list[Draft]:
    labels = rec.get("actions_label")
    if isinstance(labels, dict):
        labels = [labels]
    if not isinstance(labels, list) or not labels:
        raise SchemaError(f"{labels!r} is not a list of actions", field="actions_label")
    size = None
    if isinstance(rec.get("image_size"), dict):
        s = rec["image_size"]
        size = (
            int(number(s.get("width"), field="image_size.width")),
            int(number(s.get("height"), field="image_size.height")),
        )
    image_id = str(rec.get("image_id") or rec["uid"])
    image = locate_image(file.parent, f"{image_id}.png") or locate_image(
        file.parent, f"images/{image_id}.png"
    )
    thought = rec.get("thoughts") or None
    out = []
    for i, a in enumerate(labels):
        field = f"actions_label[{i}]"
        if not isinstance(a, dict):
            raise SchemaError(f"{a!r} is not an action object", field=field)
        _check(a, field)  # errors in the record show now, not at build time
        out.append(
            Draft(
                make=(lambda a, f: lambda w, h: _action(a, w, h, f))(a, field),
                image=image,
                size=size,
                thought=thought,
            )
        )
    return out


def _check(a: dict, field: str) -> None:
    _action(a, 1, 1, field, check_only=True)


def _numbers(s: Any, n: int, field: str) -> list[float]:
    if isinstance(s, (list, tuple)):
        vals = list(s)
    elif isinstance(s, str):
        vals = [float(v) for v in _NUM.findall(re.sub(r"</?(box|point)>", " ", s))]
    else:
        raise SchemaError(f"{s!r} is not a position", field=field)
    if len(vals) != n:
        raise SchemaError(f"{s!r} does not hold {n} numbers", field=field)
    return [number(v, field=field) for v in vals]


def _pos(p: Any, n: int, w: int, h: int, field: str, check_only: bool) -> list[float]:
    """Normalised numbers of a position dict: `related` as is, else `absolute` / pixels."""
    if not isinstance(p, dict):
        raise SchemaError(f"{p!r} is not a position dict", field=field)
    if "related" in p:
        vals = _numbers(p["related"], n, f"{field}.related")
        if not all(0.0 <= v <= 1.0 for v in vals):
            raise SchemaError(f"{p['related']!r} is outside 0..1", field=f"{field}.related")
        return vals
    vals = _numbers(require(p, "absolute", (str, list), field=f"{field}.absolute"), n, f"{field}.absolute")
    if check_only:
        return [0.0] * n
    out = [v / (w if k % 2 == 0 else h) for k, v in enumerate(vals)]
    if not all(0.0 <= v <= 1.0 for v in out):
        raise SchemaError(f"{p['absolute']!r} lies outside the {w}x{h} image", field=f"{field}.absolute")
    return out


def _action(a: dict, w: int, h: int, field: str, check_only: bool = False):
    name = require(a, "name", str, field=f"{field}.name")
    target = None
    kw: dict[str, Any] = {}
    if name in _BARE:
        t, text = _BARE[name]
        return make_action(type=t, text=text, field=field), None, []
    if name == "answer":
        return (
            make_action(
                type=ActionType.ANSWER, text=require(a, "text", str, field=f"{field}.text"), field=field
            ),
            None,
            [],
        )
    if name == "scroll":
        s = require(a, "scroll", dict, field=f"{field}.scroll")
        related = "related" in s
        d = s.get("related", s.get("absolute"))
        if not isinstance(d, dict):
            raise SchemaError(f"{d!r} is not {{down, right}}", field=f"{field}.scroll")
        down = number(d.get("down", 0), field=f"{field}.scroll.down")
        right = number(d.get("right", 0), field=f"{field}.scroll.right")
        if down == right == 0:
            raise SchemaError("a scroll by 0", field=f"{field}.scroll")
        vertical = abs(down) >= abs(right)
        direction = ("down" if down > 0 else "up") if vertical else ("right" if right > 0 else "left")
        px = abs(down if vertical else right) * ((h if vertical else w) if related else 1)
        return (
            make_action(
                type=ActionType.SCROLL,
                direction=direction,
                field=field,
                amount=None if check_only else round(px / SCROLL_NOTCH_PX, 2) or None,
            ),
            None,
            [],
        )
    if name in ("select_text", "swipe"):
        dp = require(a, "dual_point", dict, field=f"{field}.dual_point")
        rel = dp.get("related", dp.get("absolute"))
        if not isinstance(rel, dict):
            raise SchemaError(f"{dp!r} has no from/to", field=f"{field}.dual_point")
        key = "related" if "related" in dp else "absolute"
        x, y = _pos({key: rel.get("from")}, 2, w, h, f"{field}.dual_point.from", check_only)
        x2, y2 = _pos({key: rel.get("to")}, 2, w, h, f"{field}.dual_point.to", check_only)
        return (
            make_action(
                type=ActionType.SWIPE,
                x=x,
                y=y,
                x2=x2,
                y2=y2,
                field=field,
                description="select_text" if name == "select_text" else None,
            ),
            None,
            [],
        )
    types = {
        "click": ActionType.TAP,
        "tap": ActionType.TAP,
        "hover": ActionType.WAIT,
        "input": ActionType.TYPE,
        "select": ActionType.SELECT,
    }
    if name not in types:
        raise SchemaError(f"unknown action {name!r}", field=f"{field}.name")
    if "element" in a:
        x0, y0, x1, y1 = _pos(a["element"], 4, w, h, f"{field}.element", check_only)
        target = Element(role="element", bbox=(x0, y0, max(x0, x1), max(y0, y1)))
        kw["x"], kw["y"] = target.centre()
    elif "point" in a:
        kw["x"], kw["y"] = _pos(a["point"], 2, w, h, f"{field}.point", check_only)
    elif name in ("click", "tap", "hover", "select"):
        raise SchemaError(f"{name} without element or point", field=field)
    if name in ("input", "select"):
        kw["text"] = require(a, "text", str, field=f"{field}.text")
    if name == "hover":
        kw["description"] = "hover"
    return make_action(type=types[name], field=field, **kw), target, []
