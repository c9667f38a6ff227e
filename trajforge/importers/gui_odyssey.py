"""GUI-Odyssey (github.com/OpenGVLab/GUI-Odyssey) cross-app episodes.

Native: `data/annotations/<episode_id>.json`, one episode per file:
`episode_id`, `device_info` {w, h, product, ...}, `task_info` {instruction,
app [list], category, ...}, `steps` ordered by `step`, each with
`screenshot` (a file name; looked for next to the file and in
`../screenshots/`), `action`, `info`, `ps`, `sam2_bbox`,
`low_level_instruction`.

Quirks handled (introduction.md and the official `format_converter.py`):
- Coordinates are on a **0-1000 grid** of the screen; `sam2_bbox` is
  [x1, y1, x2, y2] on the same grid (or []): it becomes the step's target.
- CLICK / LONG_PRESS `info` is a list of points, `[[x, y], [x, y]]`, of which
  the loader uses the first; CLICK `info` may instead be KEY_HOME, KEY_BACK or
  KEY_APPSELECT (home, back, key "app_switch", schemas.keys' name).
- SCROLL `info` is the finger's start and end point: a canonical swipe.
- Typing: the spec says TYPE, the loader and the released data say **TEXT**;
  both are read (`info` is the text).
- COMPLETE -> done; INCOMPLETE (the loader's IMPOSSIBLE) -> done("impossible")
  and the trajectory's outcome "failure".
- The screen size is `device_info` w x h (the screenshots' size when present).

Also read: OS-Atlas's converted GUI-Odyssey steps (`gui_odyssey_test.jsonl`,
see osatlas.py), which drop the device: they need the screenshots or
`screen_size` (the 0-1000 points themselves need no size).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from schemas.actions import ActionType
from schemas.converters import make_action
from schemas.errors import SchemaError
from schemas.grids import GRID_1000, point_from_grid
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
    numbers,
    read_records,
    require,
)

_KEYS = {
    "KEY_HOME": (ActionType.HOME, None),
    "KEY_BACK": (ActionType.BACK, None),
    "KEY_APPSELECT": (ActionType.KEY, "app_switch"),
}


class GuiOdysseyImporter(Importer):
    name = "gui_odyssey"

    def episodes(self, file: Path, ctx: Context) -> Iterator[Episode | SchemaError]:
        if osatlas.file_is_osatlas(file):
            yield from osatlas.episodes(file, "android")
            return
        for label, rec in read_records(file):
            if isinstance(rec, SchemaError):
                yield bad(rec, file, label)
                continue
            try:
                yield self._episode(file, rec)
            except RECORD_ERRORS as err:
                yield bad(
                    err,
                    file,
                    f"episode {rec.get('episode_id', label)}" if isinstance(rec, dict) else label,
                    rec,
                )

    def _episode(self, file: Path, rec: dict) -> Episode:
        ep_id = require(rec, "episode_id", (str, int))
        task = require(rec, "task_info", dict, field="task_info")
        instruction = require(task, "instruction", str, field="task_info.instruction")
        dev = rec.get("device_info") or {}
        size = None
        if "w" in dev and "h" in dev:
            size = (
                int(number(dev["w"], field="device_info.w")),
                int(number(dev["h"], field="device_info.h")),
            )
        steps = sorted(
            require(rec, "steps", list), key=lambda s: s.get("step", 0) if isinstance(s, dict) else 0
        )
        drafts, failed = [], False
        shots = [file.parent, file.parent.parent / "screenshots"]
        for i, s in enumerate(steps):
            try:
                action = _action(s)
                failed |= s.get("action") == "INCOMPLETE"
                target = _target(s.get("sam2_bbox"))
            except SchemaError as err:
                raise SchemaError(err.reason, field=f"steps[{i}].{err.field}") from None
            image = None
            for root in shots:
                image = image or locate_image(root, s.get("screenshot"))
            drafts.append(Draft(make=(lambda a, t: lambda w, h: (a, t, []))(action, target), image=image))
        apps = task.get("app") or []
        return Episode(
            episode_id=str(ep_id),
            instruction=instruction,
            drafts=drafts,
            app=", ".join(map(str, apps)) if isinstance(apps, list) else str(apps),
            device_size=size,
            device_name=str(dev.get("device_name") or "android"),
            outcome="failure" if failed else "success",
        )


def _action(s: dict):
    kind = require(s, "action", str)
    info = s.get("info")
    d = {"description": s.get("low_level_instruction") or None}
    if kind == "CLICK" and isinstance(info, str):
        if info not in _KEYS:
            raise SchemaError(f"unknown key {info!r}", field="info")
        t, text = _KEYS[info]
        return make_action(type=t, text=text, **d)
    if kind in ("CLICK", "LONG_PRESS"):
        if not isinstance(info, list) or not info:
            raise SchemaError(f"{info!r} is not a list of points", field="info")
        x, y = point_from_grid(info[0], GRID_1000, field="info")
        t = ActionType.TAP if kind == "CLICK" else ActionType.LONG_PRESS
        return make_action(type=t, x=x, y=y, field="info", **d)
    if kind == "SCROLL":
        if not isinstance(info, list) or len(info) < 2:
            raise SchemaError(f"{info!r} is not [start, end]", field="info")
        x, y = point_from_grid(info[0], GRID_1000, field="info")
        x2, y2 = point_from_grid(info[-1], GRID_1000, field="info")
        return make_action(type=ActionType.SWIPE, x=x, y=y, x2=x2, y2=y2, field="info", **d)
    if kind in ("TEXT", "TYPE"):
        if not isinstance(info, str):
            raise SchemaError(f"{info!r} is not text", field="info")
        return make_action(type=ActionType.TYPE, text=info, **d)
    if kind == "COMPLETE":
        return make_action(type=ActionType.DONE, **d)
    if kind == "INCOMPLETE":
        return make_action(type=ActionType.DONE, text="impossible", **d)
    raise SchemaError(f"unknown action {kind!r}", field="action")


def _target(box) -> Element | None:
    if not box:
        return None
    x0, y0, x1, y1 = numbers(box, 4, field="sam2_bbox")
    for v in (x0, y0, x1, y1):
        GRID_1000.decode(v, field="sam2_bbox")
    return Element(role="element", bbox=(x0 / 1000, y0 / 1000, max(x0, x1) / 1000, max(y0, y1) / 1000))
