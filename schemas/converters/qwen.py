"""Qwen2.5-VL `mobile_use` tool calls <-> the canonical Action, and `smart_resize`.

Qwen2.5-VL's mobile agent (its cookbook's `mobile_use` function; the same
arguments appear in the UI-S1 AndroidControl files under
shared/samples/android_control/) calls

    <tool_call>
    {"name": "mobile_use", "arguments": {"action": "click", "coordinate": [x, y]}}
    </tool_call>

with absolute pixels of the image the model saw. Qwen resizes every image with
`smart_resize` first, so a model's pixels live in the resized frame: pass
`smart_resize(h, w)`'s size as width/height here. A dataset that stores pixels
of the original screenshot (UI-S1 does) passes the original size instead.

| canonical        | arguments                                                     |
|------------------|---------------------------------------------------------------|
| tap              | {"action": "click", "coordinate": [x, y]}                     |
| long_press       | {"action": "long_press", "coordinate": [x, y], "time": s?}    |
| swipe            | {"action": "swipe", "coordinate": [x, y], "coordinate2": [x2, y2]} |
| type (no point)  | {"action": "type", "text": "…"}                               |
| key              | {"action": "key", "text": "…"} (adb keyevent names)           |
| key Enter / Menu | {"action": "system_button", "button": "Enter" / "Menu"}       |
| back / home      | {"action": "system_button", "button": "Back" / "Home"}        |
| open_app         | {"action": "open", "text": "…"}                               |
| wait             | {"action": "wait", "time": s?}                                |
| answer           | {"action": "answer", "text": "…"}                             |
| done             | {"action": "terminate", "status": "success" / "failure"}      |
| scroll, double_tap, right_click, select, take_over, type with a point:      |
|   SchemaError                                                              |

Times are seconds (2, 1.5). Reading, `button` is case-insensitive ("back"
works) and coordinates may be floats (UI-S1 stores 540.0, 389.83…). Lossy
spots: `done` keeps the status as its text; a done without text is written as
"success" and any other message is dropped; `{"action": "key", "text":
"Enter"}` reads as key Enter and is written back as the system button;
duration_ms of a swipe and description are dropped.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from ..actions import Action, ActionType
from ..errors import SchemaError
from ..grids import point_from_pixels, point_to_pixels
from ..keys import canonical_or_raw
from .common import make_action, ms_from_seconds, seconds_number, unsupported

# Qwen2.5-VL's defaults (qwen-vl-utils): 4 and 16384 patches of 28 x 28 pixels.
IMAGE_FACTOR = 28
MIN_PIXELS = 4 * 28 * 28
MAX_PIXELS = 16384 * 28 * 28
MAX_RATIO = 200

_BUTTON_KEYS = ("Enter", "Menu")
_STATUSES = ("success", "failure")


def smart_resize(
    height: int,
    width: int,
    factor: int = IMAGE_FACTOR,
    min_pixels: int = MIN_PIXELS,
    max_pixels: int = MAX_PIXELS,
) -> tuple[int, int]:
    """(height, width) that Qwen2.5-VL resizes an image to.

    Both sides become multiples of `factor`, the pixel count lands in
    [min_pixels, max_pixels], and the aspect ratio stays as close as it can:
    round each side to the nearest multiple; if that is too many pixels, scale
    both sides down by the same factor and round down (at least one `factor`);
    if too few, scale up and round up. Rounding is Python's `round` (ties to
    even), as Qwen's code does. This is the frame transformers' Qwen2-VL /
    Qwen2.5-VL / Qwen3-VL image processors resize to (their `smart_resize` is the
    reference in tests/schemas/test_model_profiles.py, sizes down to 1 pixel):
    a side under factor/2 rounds to 0 and the image is scaled up from its
    true size.
    """
    if height <= 0 or width <= 0:
        raise ValueError(f"image size {width}x{height} is not positive")
    if max(height, width) / min(height, width) > MAX_RATIO:
        raise ValueError(f"aspect ratio of {width}x{height} is over {MAX_RATIO}")
    if min_pixels <= 0 or min_pixels > max_pixels:
        raise ValueError(f"need 0 < min_pixels ({min_pixels}) <= max_pixels ({max_pixels})")
    h = round(height / factor) * factor
    w = round(width / factor) * factor
    if h * w > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h = max(factor, math.floor(height / beta / factor) * factor)
        w = max(factor, math.floor(width / beta / factor) * factor)
    elif h * w < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h = math.ceil(height * beta / factor) * factor
        w = math.ceil(width * beta / factor) * factor
    return h, w


def to_qwen25vl(action: Action, width: int, height: int) -> dict[str, Any]:
    """The `mobile_use` arguments for `action`, in pixels of a width x height image."""
    a, t = action, action.type

    def px(x, y):
        return point_to_pixels(x, y, width, height)

    if t == ActionType.TAP:
        return {"action": "click", "coordinate": px(a.x, a.y)}
    if t == ActionType.LONG_PRESS:
        out = {"action": "long_press", "coordinate": px(a.x, a.y)}
        if a.duration_ms is not None:
            out["time"] = seconds_number(a.duration_ms)
        return out
    if t == ActionType.SWIPE:
        return {"action": "swipe", "coordinate": px(a.x, a.y), "coordinate2": px(a.x2, a.y2)}
    if t == ActionType.TYPE:
        if a.x is not None:
            raise unsupported(
                a,
                "Qwen2.5-VL mobile_use",
                "its type writes into the focused "
                "field; split it with split_type_focus() into a tap and a type",
            )
        return {"action": "type", "text": a.text}
    if t == ActionType.KEY:
        # Any spelling of Enter / Menu ("enter", "KEYCODE_ENTER") is the system button.
        button = canonical_or_raw(a.text).capitalize()
        if button in _BUTTON_KEYS:
            return {"action": "system_button", "button": button}
        return {"action": "key", "text": a.text}
    if t == ActionType.BACK:
        return {"action": "system_button", "button": "Back"}
    if t == ActionType.HOME:
        return {"action": "system_button", "button": "Home"}
    if t == ActionType.OPEN_APP:
        return {"action": "open", "text": a.text}
    if t == ActionType.WAIT:
        out = {"action": "wait"}
        if a.duration_ms is not None:
            out["time"] = seconds_number(a.duration_ms)
        return out
    if t == ActionType.ANSWER:
        return {"action": "answer", "text": a.text}
    if t == ActionType.DONE:
        return {"action": "terminate", "status": a.text if a.text in _STATUSES else "success"}
    hint = "rewrite it as a swipe with scroll_to_swipe()" if t == ActionType.SCROLL else ""
    raise unsupported(a, "Qwen2.5-VL mobile_use", hint)


def qwen25vl_tool_call(arguments: dict[str, Any], name: str = "mobile_use") -> str:
    """The `<tool_call>` text a Qwen2.5-VL model writes for these arguments."""
    body = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
    return f"<tool_call>\n{body}\n</tool_call>"


def from_qwen25vl(obj: dict[str, Any] | str, width: int, height: int) -> Action:
    """An Action from `mobile_use` arguments, a {"name", "arguments"} call, or a
    model's `<tool_call>…</tool_call>` text; pixels of a width x height image."""
    args = _arguments(obj)
    name = args.get("action")
    if not isinstance(name, str):
        raise SchemaError(f"missing or not a string: {name!r}", field="action")
    n = name.strip().lower()

    def point(key: str) -> tuple[float, float]:
        if args.get(key) is None:
            raise SchemaError(f"{name} needs {key}", field=key)
        return point_from_pixels(args[key], width, height, field=key)

    def text(key: str = "text") -> str:
        v = args.get(key)
        if not isinstance(v, str):
            raise SchemaError(f"{name} needs a string, got {v!r}", field=key)
        return v

    def duration() -> int | None:
        v = args.get("time")
        return None if v is None else ms_from_seconds(v, field="time")

    if n in ("click", "tap", "left_click"):
        x, y = point("coordinate")
        return make_action(type=ActionType.TAP, x=x, y=y)
    if n == "long_press":
        x, y = point("coordinate")
        return make_action(type=ActionType.LONG_PRESS, x=x, y=y, duration_ms=duration())
    if n == "swipe":
        (x, y), (x2, y2) = point("coordinate"), point("coordinate2")
        return make_action(type=ActionType.SWIPE, x=x, y=y, x2=x2, y2=y2)
    if n == "type":
        return make_action(type=ActionType.TYPE, text=text())
    if n == "key":
        return make_action(type=ActionType.KEY, text=text())
    if n == "system_button":
        button = text("button").strip().lower()
        if button == "back":
            return make_action(type=ActionType.BACK)
        if button == "home":
            return make_action(type=ActionType.HOME)
        if button in ("enter", "menu"):
            return make_action(type=ActionType.KEY, text=button.capitalize())
        raise SchemaError(f"unknown system button {args['button']!r}", field="button")
    if n == "open":
        return make_action(type=ActionType.OPEN_APP, text=text())
    if n == "wait":
        return make_action(type=ActionType.WAIT, duration_ms=duration())
    if n == "answer":
        return make_action(type=ActionType.ANSWER, text=text())
    if n == "terminate":
        status = args.get("status")
        if status is not None and not isinstance(status, str):
            raise SchemaError(f"{status!r} is not a string", field="status")
        return make_action(type=ActionType.DONE, text=status)
    raise SchemaError(f"unknown action {name!r}", field="action")


_TOOL_CALL = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)


def _arguments(obj: Any) -> dict[str, Any]:
    if isinstance(obj, str):
        m = _TOOL_CALL.search(obj)
        body = m.group(1) if m else obj
        start = body.find("{")
        try:
            obj, _ = json.JSONDecoder().raw_decode(body, max(start, 0))
        except ValueError:
            raise SchemaError(f"no JSON object in {body[:80]!r}", field="arguments") from None
    if not isinstance(obj, dict):
        raise SchemaError(f"expected an object, got {type(obj).__name__}", field="arguments")
    if "arguments" in obj:  # {"name": "mobile_use", "arguments": {...}}
        args = obj["arguments"]
        if isinstance(args, str):  # OpenAI-style calls carry the arguments as a JSON string
            try:
                args = json.loads(args)
            except ValueError:
                raise SchemaError(f"not JSON: {args[:80]!r}", field="arguments") from None
        if not isinstance(args, dict):
            raise SchemaError(f"expected an object, got {type(args).__name__}", field="arguments")
        return args
    return obj
