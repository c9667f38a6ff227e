"""AndroidControl (google-research/android_control) episodes.

Read in two JSON shapes of the same data:

1. The native episode, as its TFRecord Example holds it, dumped to JSON
   (one object per file or per .jsonl line): `episode_id`, `goal`,
   `screenshots` (image file names, or absent), `screenshot_widths`,
   `screenshot_heights`, `actions` (a list of **JSON strings**),
   `step_instructions`. There are len(screenshots) - 1 actions: action i goes
   from screenshot i to i + 1, so the last screenshot has no step.
   Action JSON: click / long_press (`x`, `y`, absolute pixels), scroll
   (`direction`), open_app (`app_name`), type (`x`, `y`, `text`: the recorder
   clicks there, types, then presses Enter; read as a canonical type with its
   focus point), input_text (`text`), navigate_home, navigate_back, wait.
2. UI-S1's conversion (X-PLUG/MobileAgent `UI-S1/datasets/*.jsonl`): one line
   per episode `{goal, is_successful, episode_id?, steps: [{action_content:
   {action, coordinate [x, y] px, coordinate2, bbox [x1, y1, x2, y2] px,
   text, button, time, status}, screenshot, step_instruction?}]}` with the
   action types renamed: click, long_press, swipe, type, open, wait,
   system_button (Back / Home / Enter), terminate. Its `bbox` becomes the
   step's target; the episode id is `episode_id` or, absent, the `<ep>` of
   the screenshot name `<ep>_<step>.png`.

Screen size: from the screenshot next to the file, else
`screenshot_widths/heights` (native), else the caller's `screen_size`.
AndroidControl does not document one fixed size (it stores one per
screenshot) and UI-S1 drops it, so without images a UI-S1 line needs
`screen_size`. Also read: OS-Atlas's converted steps (`ac_test.jsonl`,
see osatlas.py). The TFRecords themselves need TensorFlow and are reported, not read.
`is_successful` false gives outcome "failure"; absent, "success" (the
episodes are human demonstrations). The official split (`splits.json` beside
the files, else a file named after its split) is kept in the task's params as
`official_split` (trajforge/importers/splits.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from schemas.actions import ActionType
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
    norm_box,
    norm_point,
    number,
    numbers,
    read_records,
    require,
)
from trajforge.importers.splits import with_official_split

DIRECTIONS = ("up", "down", "left", "right")
_KEYS = {"back": ActionType.BACK, "home": ActionType.HOME}
TFRECORD_HINT = (
    "AndroidControl TFRecords need TensorFlow to parse (tf.train.Example per "
    "episode), which trajforge does not depend on: dump them to JSON first"
)


class AndroidControlImporter(Importer):
    name = "android_control"

    def unreadable(self, path: Path) -> SchemaError | None:
        if ".tfrecord" in path.name or path.suffix == ".gz":
            return SchemaError(TFRECORD_HINT, source=str(path), record="file", field="format")
        return super().unreadable(path)

    def episodes(self, file: Path, ctx: Context) -> Iterator[Episode | SchemaError]:
        if osatlas.file_is_osatlas(file):
            yield from osatlas.episodes(file, "android")
            return
        for label, rec in read_records(file):
            if isinstance(rec, SchemaError):
                yield bad(rec, file, label)
                continue
            try:
                if isinstance(rec, dict) and "steps" in rec:
                    yield self._uis1(file, label, rec)
                else:
                    yield self._native(file, label, rec)
            except RECORD_ERRORS as err:
                yield bad(err, file, label, rec)

    def _uis1(self, file: Path, label: str, rec: dict) -> Episode:
        goal = require(rec, "goal", str)
        steps = require(rec, "steps", list)
        drafts, ep_id = [], rec.get("episode_id")
        for i, s in enumerate(steps):
            try:
                content = require(s, "action_content", dict)
                shot = s.get("screenshot")
                if ep_id is None and isinstance(shot, str):
                    m = re.match(r"(.+)_(\d+)$", Path(shot).stem)
                    ep_id = m.group(1) if m else None
                drafts.append(
                    Draft(
                        make=_uis1_action(content, s.get("step_instruction")),
                        image=locate_image(file.parent, shot),
                    )
                )
            except SchemaError as err:
                raise SchemaError(err.reason, field=f"steps[{i}].{err.field}") from None
        if ep_id is None:
            raise SchemaError("no episode_id and no <ep>_<step>.png screenshot name", field="episode_id")
        ok = rec.get("is_successful", True)
        return Episode(
            episode_id=str(ep_id),
            instruction=goal,
            drafts=drafts,
            outcome="failure" if ok is False else "success",
            params=with_official_split({}, file, str(ep_id)),
        )

    def _native(self, file: Path, label: str, rec: Any) -> Episode:
        ep_id = require(rec, "episode_id", (int, str))
        goal = require(rec, "goal", str)
        actions = require(rec, "actions", list)
        shots = rec.get("screenshots") or []
        widths, heights = rec.get("screenshot_widths") or [], rec.get("screenshot_heights") or []
        if shots and len(shots) != len(actions) + 1:
            raise SchemaError(
                f"{len(shots)} screenshots for {len(actions)} actions "
                "(expected one more screenshot than actions)",
                field="screenshots",
            )
        instr = rec.get("step_instructions") or [None] * len(actions)
        drafts = []
        for i, raw in enumerate(actions):
            try:
                obj = json.loads(raw) if isinstance(raw, str) else raw
            except ValueError:
                raise SchemaError(f"not valid JSON: {raw[:60]!r}", field=f"actions[{i}]") from None
            size = None
            if i < len(widths) and i < len(heights):
                size = (
                    int(number(widths[i], field="screenshot_widths")),
                    int(number(heights[i], field="screenshot_heights")),
                )
            drafts.append(
                Draft(
                    make=_native_maker(obj, f"actions[{i}]", instr[i] if i < len(instr) else None),
                    image=locate_image(file.parent, shots[i]) if shots else None,
                    size=size,
                )
            )
        return Episode(
            episode_id=str(ep_id),
            instruction=goal,
            drafts=drafts,
            params=with_official_split({}, file, str(ep_id)),
        )


def native_action(obj: Any, w: int, h: int, *, field: str = "action", description=None):
    """A canonical Action from AndroidControl's action JSON (absolute pixels of w x h)."""
    kind = require(obj, "action_type", str, field=f"{field}.action_type")
    d = {"description": description}
    if kind in ("click", "long_press"):
        x, y = norm_point(
            number(obj.get("x"), field=f"{field}.x"),
            number(obj.get("y"), field=f"{field}.y"),
            w,
            h,
            field=f"{field}.x",
        )
        t = ActionType.TAP if kind == "click" else ActionType.LONG_PRESS
        return make_action(type=t, x=x, y=y, field=field, **d)
    if kind == "type":
        x, y = norm_point(
            number(obj.get("x"), field=f"{field}.x"),
            number(obj.get("y"), field=f"{field}.y"),
            w,
            h,
            field=f"{field}.x",
        )
        return make_action(
            type=ActionType.TYPE, x=x, y=y, text=require(obj, "text", str, field=f"{field}.text"), **d
        )
    if kind == "input_text":
        return make_action(type=ActionType.TYPE, text=require(obj, "text", str, field=f"{field}.text"), **d)
    if kind == "scroll":
        direction = obj.get("direction")
        if direction not in DIRECTIONS:
            raise SchemaError(f"{direction!r} is not up/down/left/right", field=f"{field}.direction")
        return make_action(type=ActionType.SCROLL, direction=direction, **d)
    if kind == "open_app":
        return make_action(
            type=ActionType.OPEN_APP, text=require(obj, "app_name", str, field=f"{field}.app_name"), **d
        )
    if kind == "navigate_home":
        return make_action(type=ActionType.HOME, **d)
    if kind == "navigate_back":
        return make_action(type=ActionType.BACK, **d)
    if kind == "wait":
        return make_action(type=ActionType.WAIT, **d)
    raise SchemaError(f"unknown action_type {kind!r}", field=f"{field}.action_type")


def _native_maker(obj, field, instruction):
    return lambda w, h: (native_action(obj, w, h, field=field, description=instruction), None, [])


def _uis1_action(c: dict, instruction: str | None):
    kind = require(c, "action", str)
    d = {"description": instruction}

    def point(key: str, w: int, h: int) -> tuple[float, float]:
        px, py = numbers(c.get(key), 2, field=key)
        return norm_point(px, py, w, h, field=key)

    def make(w: int, h: int):
        target = None
        if c.get("bbox") is not None:
            x0, y0, x1, y1 = numbers(c["bbox"], 4, field="bbox")
            target = Element(role="element", bbox=norm_box(x0, y0, x1, y1, w, h))
        if kind in ("click", "long_press"):
            x, y = point("coordinate", w, h)
            t = ActionType.TAP if kind == "click" else ActionType.LONG_PRESS
            return make_action(type=t, x=x, y=y, field="coordinate", **d), target, []
        if kind == "swipe":
            (x, y), (x2, y2) = point("coordinate", w, h), point("coordinate2", w, h)
            return make_action(type=ActionType.SWIPE, x=x, y=y, x2=x2, y2=y2, **d), target, []
        if kind == "type":
            return make_action(type=ActionType.TYPE, text=require(c, "text", str), **d), target, []
        if kind == "open":
            return make_action(type=ActionType.OPEN_APP, text=require(c, "text", str), **d), None, []
        if kind == "wait":
            secs = number(c.get("time", 0), field="time")
            return (
                make_action(type=ActionType.WAIT, duration_ms=round(secs * 1000), field="time", **d),
                None,
                [],
            )
        if kind == "system_button":
            button = require(c, "button", str).lower()
            if button in _KEYS:
                return make_action(type=_KEYS[button], **d), None, []
            if button == "enter":
                return make_action(type=ActionType.KEY, text="enter", **d), None, []
            raise SchemaError(f"unknown button {c['button']!r}", field="button")
        if kind == "terminate":
            status = c.get("status")
            return (
                make_action(type=ActionType.DONE, text=status if isinstance(status, str) else None, **d),
                None,
                [],
            )
        raise SchemaError(f"unknown action {kind!r}", field="action")

    return make
