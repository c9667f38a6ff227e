"""AitZ (Android in the Zoo, github.com/IMNearth/CoAT) episodes, with AitW's action encoding.

One JSON file per episode: a list of step objects (`episode_id`, `step_id`,
`instruction`, `image_path`, `result_action_type`, `result_action_text`,
`result_touch_yx`, `result_lift_yx`, `ui_positions`, `ui_text`, `ui_types`,
and the CoAT fields `coat_action_think`, `coat_action_desc`, ...).

Quirks handled:
- `result_touch_yx` / `result_lift_yx` are **[y, x]**, normalised 0-1, y first,
  and (like the `ui_*` lists) stored as JSON strings; "[-1.0, -1.0]" when unused.
- `result_action_type` is AitW's int enum: 3 TYPE, 4 DUAL_POINT, 5 PRESS_BACK,
  6 PRESS_HOME, 7 PRESS_ENTER, 10 STATUS_TASK_COMPLETE, 11 STATUS_TASK_IMPOSSIBLE.
  A DUAL_POINT whose touch and lift are at most 0.04 apart (Euclidean, in
  normalised units, as AitW's `is_tap_action`) is a tap, otherwise a swipe.
- `ui_positions` are [y, x, h, w] in pixels of the (downscaled) screenshot,
  so elements are normalised by the image's size.
- Steps are ordered by `step_id`; records of several episodes in one file are
  grouped by `episode_id`.

Mapping: 3 -> type, tap/swipe, 5 -> back, 6 -> home, 7 -> key "enter",
10 -> done, 11 -> done("impossible") with the trajectory's outcome "failure"
(the goal was not reached; the demonstration says so). `coat_action_think`
becomes the step's thought and `coat_action_desc` the action's description.
The dataset gives no target box, so `target` stays empty.

Screenshots: `image_path` is looked up next to the file (every tail of the
path, see base.locate_image). AitZ ships an image for every step; a step
whose image is not present gets screenshot "" and the size of another image
of the same episode (same device); with none present, the caller's
`screen_size`, else the episode is quarantined.

Not read: AitW's own TFRecords. Their `image/encoded` is raw uint8 pixels
that only `tf.io.decode_raw` reads, and parsing `tf.train.Example` needs
TensorFlow, which trajforge does not depend on: a .tfrecord / .gz file is
reported with that reason (convert it to AitZ-style JSON first).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

from schemas.actions import ActionType
from schemas.converters import make_action
from schemas.errors import SchemaError
from schemas.records import Element
from trajforge.importers.base import (
    RECORD_ERRORS,
    Context,
    Draft,
    Episode,
    Importer,
    bad,
    json_field,
    locate_image,
    numbers,
    read_records,
    require,
)

TAP_DISTANCE = 0.04  # AitW's _SWIPE_DISTANCE_THRESHOLD
_SIMPLE = {5: ActionType.BACK, 6: ActionType.HOME}
TFRECORD_HINT = (
    "AitW TFRecords cannot be read without TensorFlow (one tf.train.Example per "
    "step, image/encoded is raw uint8 pixels for tf.io.decode_raw); trajforge does "
    "not depend on TensorFlow: convert them to AitZ-style JSON episodes first"
)


class AitzImporter(Importer):
    name = "aitz"
    suffixes = (".json", ".jsonl")

    def unreadable(self, path: Path) -> SchemaError | None:
        if ".tfrecord" in path.name or path.suffix in (".gz", ".tfrecord"):
            return SchemaError(TFRECORD_HINT, source=str(path), record="file", field="format")
        return super().unreadable(path)

    def episodes(self, file: Path, ctx: Context) -> Iterator[Episode | SchemaError]:
        groups: dict[str, list[tuple[str, dict]]] = defaultdict(list)
        for label, rec in read_records(file):
            if isinstance(rec, SchemaError):
                yield bad(rec, file, label)
                continue
            try:
                ep = require(rec, "episode_id", (str, int))
                require(rec, "step_id", int)
            except RECORD_ERRORS as err:
                yield bad(err, file, label, rec)
                continue
            groups[str(ep)].append((label, rec))
        for ep_id, recs in groups.items():
            try:
                yield self._episode(file, ep_id, [r for _, r in recs])
            except RECORD_ERRORS as err:
                yield bad(err, file, f"episode {ep_id}", [r for _, r in recs])

    def _episode(self, file: Path, ep_id: str, recs: list[dict]) -> Episode:
        recs = sorted(recs, key=lambda r: r["step_id"])
        ids = [r["step_id"] for r in recs]
        if len(set(ids)) != len(ids):
            raise SchemaError(f"step_id repeats: {ids}", field="step_id")
        drafts = []
        impossible = False
        for r in recs:
            try:
                drafts.append(self._draft(file, r))
            except SchemaError as err:
                raise SchemaError(err.reason, field=f"step {r['step_id']}: {err.field}") from None
            impossible |= r["result_action_type"] == 11
        return Episode(
            episode_id=ep_id,
            instruction=require(recs[0], "instruction", str),
            drafts=drafts,
            platform="android",
            app="",
            outcome="failure" if impossible else "success",
            device_name="android",
        )

    def _draft(self, file: Path, r: dict) -> Draft:
        kind = require(r, "result_action_type", int)
        text = r.get("result_action_text") or ""
        touch = numbers(json_field(r, "result_touch_yx", default=[-1.0, -1.0]), 2, field="result_touch_yx")
        lift = numbers(json_field(r, "result_lift_yx", default=[-1.0, -1.0]), 2, field="result_lift_yx")
        desc = r.get("coat_action_desc") or None
        if kind == 4:
            if min(touch + lift) < 0:
                raise SchemaError(f"DUAL_POINT without a point: {touch}", field="result_touch_yx")
            (ty, tx), (ly, lx) = touch, lift
            if math.dist(touch, lift) <= TAP_DISTANCE:
                action = make_action(
                    type=ActionType.TAP, x=tx, y=ty, description=desc, field="result_touch_yx"
                )
            else:
                action = make_action(
                    type=ActionType.SWIPE, x=tx, y=ty, x2=lx, y2=ly, description=desc, field="result_lift_yx"
                )
        elif kind == 3:
            action = make_action(type=ActionType.TYPE, text=text, description=desc)
        elif kind in _SIMPLE:
            action = make_action(type=_SIMPLE[kind], description=desc)
        elif kind == 7:
            action = make_action(type=ActionType.KEY, text="enter", description=desc)
        elif kind == 10:
            action = make_action(type=ActionType.DONE, description=desc)
        elif kind == 11:
            action = make_action(type=ActionType.DONE, text="impossible", description=desc)
        else:
            raise SchemaError(f"unknown AitW action type {kind}", field="result_action_type")
        positions = json_field(r, "ui_positions", default=[])
        texts = json_field(r, "ui_text", default=[""] * len(positions))
        types = json_field(r, "ui_types", default=["TEXT"] * len(positions))
        if not (isinstance(positions, list) and len(positions) == len(texts) == len(types)):
            raise SchemaError("ui_positions/ui_text/ui_types differ in length", field="ui_text")
        boxes = [numbers(p, 4, field="ui_positions") for p in positions]

        def make(w: int, h: int):
            elements = [_element(b, t, k, w, h) for b, t, k in zip(boxes, texts, types)]
            return action, None, elements

        image = locate_image(file.parent, r.get("image_path"))
        return Draft(make=make, image=image, thought=r.get("coat_action_think") or None)


def _element(box: list[float], text: str, kind: str, w: int, h: int) -> Element:
    y, x, bh, bw = box  # AitW order: y, x, height, width, in pixels of the image
    role = "text" if kind == "TEXT" else "icon"
    name = str(text) if kind == "TEXT" else str(kind).removeprefix("ICON_").lower()
    c = lambda v, d: min(max(v / d, 0.0), 1.0)  # noqa: E731
    return Element(role=role, name=name, bbox=(c(x, w), c(y, h), c(x + bw, w), c(y + bh, h)))
