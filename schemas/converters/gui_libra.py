"""GUI-Libra's output format <-> the canonical Action.

GUI-Libra (github.com/GUI-Libra/GUI-Libra, README "Data Format") answers with

    <think>reasoning</think>
    <answer>
    {"action_description": "...", "action_type": "Click", "value": "None", "point_2d": [x, y]}
    </answer>

Qwen3-based checkpoints (GUI-Libra-4B/8B) write `<thinking>` instead of
`<think>` and give `point_2d` on the 0-1000 grid (`coords="grid1000"`); the
Qwen2.5-VL ones (3B/7B) give absolute pixels of the image the model saw
(`coords="pixels"`; pass the resized size, see `qwen.smart_resize`); `coords="grid999"`
is Open-AutoGLM's 0-999 frame (schemas.model_profiles' open-autoglm). Unused
fields are the string "None"; the prompt asks for `point_2d` [-100, -100]
when there is no point. Both, and JSON null or a missing key, read as "absent".

Mapping (canonical -> GUI-Libra; the reverse also accepts the aliases):

| canonical   | action_type   | value                       | point_2d       | aliases read      |
|-------------|---------------|-----------------------------|----------------|-------------------|
| tap         | Click         | "None"                      | point          | Tap               |
| right_click | RightClick    | "None"                      | point          | SecondaryClick    |
| long_press  | LongPress     | "None"                      | point          |                   |
| swipe       | Swipe         | finger direction            | start          |                   |
| scroll      | Scroll        | up/down/left/right          | point or none  |                   |
| type        | Write         | text                        | point or none  | Type, Input       |
| select      | Select        | option                      | point          |                   |
| key         | KeyboardPress | key name (e.g. "enter")     | none           | KeyPress, Press   |
| open_app    | OpenAPP       | app name                    | none           | OpenApp, Open_App |
| back        | NavigateBack  | "None"                      | none           | Back              |
| home        | NavigateHome  | "None"                      | none           | Home              |
| wait        | Wait          | seconds or "None"           | none           |                   |
| answer      | Answer        | answer text                 | none           |                   |
| done        | Terminate     | message or "None"           | none           | Complete, Finish  |
| double_tap  | (none: SchemaError)                                            |
| take_over   | (none: SchemaError)                                            |

RightClick is trajforge's addition (GUI-Libra's own action space has none; its
desktop data would need one): the agent prompt lists it, and it reads and
writes like Click.

`action_description` <-> `description` ("None" when absent; `action_target`
is read when `action_description` is missing). Type names are matched
ignoring case, spaces, "_" and "-". GUI-Libra's own evaluator turns a Swipe
into a scroll the other way (swipe up = scroll down); here it stays a swipe.

Lossy spots, by design:
- A GUI-Libra Swipe carries a start and a direction, not an end. Reading one
  gives a canonical swipe with `direction` set and an end `SWIPE_SPAN` of the
  screen away (clamped); writing uses `direction` if set, else the dominant
  axis of the movement. So the start and direction survive, the length not.
- `duration_ms` of long_press/swipe, `text` of a tap and a scroll's `amount`
  are dropped (no field: a Scroll's value is its direction only).
- A description of exactly "None" reads back as no description.
- For actions whose value is optional (done, wait), the text "None" means
  absent; for those that need one (type, answer, ...), "None" is taken literally.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any, Literal

from ..actions import Action, ActionType
from ..errors import SchemaError
from ..grids import GRID_999, GRID_1000, point_from_grid, point_from_pixels, point_to_grid, point_to_pixels
from .common import (
    direction_from,
    make_action,
    ms_from_seconds,
    seconds_text,
    swipe_direction,
    swipe_end,
    unsupported,
)

Coords = Literal["pixels", "grid1000", "grid999"]  # grid999: Open-AutoGLM's 0-999 frame

TO_NAME = {
    ActionType.TAP: "Click",
    ActionType.RIGHT_CLICK: "RightClick",
    ActionType.LONG_PRESS: "LongPress",
    ActionType.SWIPE: "Swipe",
    ActionType.SCROLL: "Scroll",
    ActionType.TYPE: "Write",
    ActionType.SELECT: "Select",
    ActionType.KEY: "KeyboardPress",
    ActionType.OPEN_APP: "OpenAPP",
    ActionType.BACK: "NavigateBack",
    ActionType.HOME: "NavigateHome",
    ActionType.WAIT: "Wait",
    ActionType.ANSWER: "Answer",
    ActionType.DONE: "Terminate",
}
_ALIASES = {
    "tap": ActionType.TAP,
    "secondaryclick": ActionType.RIGHT_CLICK,
    "type": ActionType.TYPE,
    "input": ActionType.TYPE,
    "keypress": ActionType.KEY,
    "press": ActionType.KEY,
    "back": ActionType.BACK,
    "home": ActionType.HOME,
    "complete": ActionType.DONE,
    "finish": ActionType.DONE,
}
NO_POINT = [-100, -100]
NONE = "None"
_POINT_REQUIRED = {ActionType.TAP, ActionType.RIGHT_CLICK, ActionType.LONG_PRESS, ActionType.SELECT}
_POINT_OPTIONAL = {ActionType.SCROLL, ActionType.TYPE, ActionType.SWIPE}  # swipe: centre if none
_TEXT_VALUE = {
    ActionType.TYPE,
    ActionType.SELECT,
    ActionType.KEY,
    ActionType.OPEN_APP,
    ActionType.ANSWER,
    ActionType.DONE,
}


def _key(name: str) -> str:
    return re.sub(r"[\s_\-]", "", name).lower()


FROM_NAME = {**{_key(n): t for t, n in TO_NAME.items()}, **_ALIASES}


def to_gui_libra(
    action: Action,
    width: int,
    height: int,
    thought: str | None = None,
    *,
    coords: Coords = "pixels",
    think_tag: str = "think",
) -> str:
    """The GUI-Libra response for `action` on a width x height screen."""
    name = TO_NAME.get(action.type)
    if name is None:
        raise unsupported(action, "GUI-Libra")
    value: Any = NONE
    t = action.type
    if t == ActionType.SWIPE:
        value = swipe_direction(action)
    elif t == ActionType.SCROLL:
        value = action.direction
    elif t == ActionType.WAIT:
        value = NONE if action.duration_ms is None else seconds_text(action.duration_ms)
    elif t in _TEXT_VALUE and action.text is not None:
        value = action.text
    point = NO_POINT
    if action.x is not None and t in _POINT_REQUIRED | _POINT_OPTIONAL:
        point = _encode(action.x, action.y, width, height, coords)
    answer = json.dumps(
        {
            "action_description": NONE if action.description is None else action.description,
            "action_type": name,
            "value": value,
            "point_2d": point,
        },
        ensure_ascii=False,
    )
    head = "" if thought is None else f"<{think_tag}>{thought}</{think_tag}>\n"
    return f"{head}<answer>\n{answer}\n</answer>"


def from_gui_libra(
    text: str, width: int, height: int, *, coords: Coords = "pixels"
) -> tuple[Action, str | None]:
    """(Action, thought or None) from a GUI-Libra response."""
    if not isinstance(text, str):
        raise SchemaError(f"expected the response text, got {type(text).__name__}", field="answer")
    thought = _thought(text)
    obj = _answer_object(text)

    raw_type = obj.get("action_type")
    if not isinstance(raw_type, str):
        raise SchemaError(f"missing or not a string: {raw_type!r}", field="action_type")
    t = FROM_NAME.get(_key(raw_type))
    if t is None:
        raise SchemaError(f"unknown action type {raw_type!r}", field="action_type")

    description = obj.get("action_description", obj.get("action_target"))
    description = None if _absent(description) else str(description)
    value = obj.get("value")
    point = _decode(obj.get("point_2d"), width, height, coords)

    kw: dict[str, Any] = {"type": t, "description": description}
    if t in _POINT_REQUIRED and point is None:
        raise SchemaError(f"{raw_type} needs a point", field="point_2d")
    if point is not None and t in _POINT_REQUIRED | _POINT_OPTIONAL:
        kw["x"], kw["y"] = point
    if t == ActionType.SWIPE:
        direction = direction_from(value, field="value")
        x, y = point if point is not None else (0.5, 0.5)
        kw.update(x=x, y=y, direction=direction)
        kw["x2"], kw["y2"] = swipe_end(x, y, direction)
    elif t == ActionType.SCROLL:
        kw["direction"] = direction_from(value, field="value")
    elif t == ActionType.WAIT:
        if not _absent(value):
            kw["duration_ms"] = ms_from_seconds(value, field="value")
    elif t == ActionType.DONE:
        if not _absent(value):
            kw["text"] = str(value)
    elif t in _TEXT_VALUE:
        if value is None:
            raise SchemaError(f"{raw_type} needs a value", field="value")
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            raise SchemaError(f"{value!r} is not text", field="value")
        kw["text"] = str(value)
    return make_action(field="action_type", **kw), thought


def _encode(x: float, y: float, width: int, height: int, coords: Coords) -> list[int]:
    if coords == "grid1000":
        return point_to_grid(x, y, GRID_1000)
    if coords == "grid999":
        return point_to_grid(x, y, GRID_999)
    if coords == "pixels":
        return point_to_pixels(x, y, width, height)
    raise ValueError(f"coords must be 'pixels', 'grid1000' or 'grid999', not {coords!r}")


def _decode(value: Any, width: int, height: int, coords: Coords) -> tuple[float, float] | None:
    if (
        value is None
        or (isinstance(value, str) and value.strip() in ("None", "none", "null", ""))
        or (isinstance(value, (list, tuple)) and list(value) == NO_POINT)
    ):
        return None
    if isinstance(value, str):  # "[540, 1200]" written as a string
        try:
            value = json.loads(value)
        except ValueError:
            raise SchemaError(f"{value!r} is not a point [x, y]", field="point_2d") from None
    if coords == "grid1000":
        return point_from_grid(value, GRID_1000, field="point_2d")
    if coords == "grid999":
        return point_from_grid(value, GRID_999, field="point_2d")
    if coords == "pixels":
        return point_from_pixels(value, width, height, field="point_2d")
    raise ValueError(f"coords must be 'pixels', 'grid1000' or 'grid999', not {coords!r}")


def _absent(value: Any) -> bool:
    return value is None or value == NONE


_THINK = re.compile(r"<(think|thinking)>(.*?)</\1>", re.DOTALL)
_ANSWER = re.compile(r"<answer>(.*?)(?:</answer>|$)", re.DOTALL)


def _thought(text: str) -> str | None:
    m = _THINK.search(text)
    return m.group(2) if m else None


def _answer_object(text: str) -> dict:
    # Look after the reasoning, which may itself mention <answer> or braces.
    think = _THINK.search(text)
    rest = text[think.end() :] if think else text
    m = _ANSWER.search(rest)
    body = m.group(1) if m else rest
    start = body.find("{")
    if start < 0:
        raise SchemaError("no JSON object in the answer", field="answer")
    try:  # JSON, with anything after it ignored
        obj, _ = json.JSONDecoder().raw_decode(body, start)
    except ValueError:
        obj = _python_literal(body[start : body.rfind("}") + 1])
    if not isinstance(obj, dict):
        raise SchemaError(f"the answer is a {type(obj).__name__}, not an object", field="answer")
    return obj


def _python_literal(body: str) -> Any:
    """A dict written with single quotes or None: read as a Python literal, never evaluated."""
    try:
        return ast.literal_eval(body)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        raise SchemaError(f"not a JSON object: {body[:80]!r}", field="answer") from None
