"""What a policy hands `GuiEnv.step`: a unified action dict in screenshot pixels, or a model's text.

`action_from_dict` reads `{"type": "tap", "x": 512, "y": 300}`: the unified
action space (schemas.actions) with its points in pixels of the observation's
screenshot (x, y, x2, y2), normalised here as the schema stores them.

`parse_answer` reads a model's answer with the project's converters, in the
frame and coordinates of its model profile (schemas.model_profiles): the
image the trainer feeds is `profile.frame(w, h)`, so a point in "pixels" is a
pixel of that frame, a "grid1000" point is 0-1000 of the image and a
"grid999" point Open-AutoGLM's 0-999. Every profile reads the reasoning set's
answer, GUI-Libra's `<think>…</think><answer>{json}</answer>`
(schemas.converters.gui_libra); besides it, the native forms the project has
parsers for:

| profile       | also reads                                                      |
|---------------|-----------------------------------------------------------------|
| qwen2.5-vl    | `<tool_call>` mobile_use (schemas.converters.qwen), frame pixels |
| qwen3-vl      | `<tool_call>` mobile_use on the 0-1000 grid                      |
| open-autoglm  | `do(action=...)` / `finish(...)` (schemas.converters.autoglm)   |
| ui-tars       | (GUI-Libra JSON only: UI-TARS's own `click(start_box=...)` has  |
| gui-libra     |  no parser in the project)                                       |

Either raises SchemaError (the field at fault named): the Gym env counts it
as a format failure and executes nothing.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from schemas.actions import Action
from schemas.converters import make_action
from schemas.converters.autoglm import parse_autoglm
from schemas.converters.gui_libra import from_gui_libra
from schemas.converters.qwen import from_qwen25vl
from schemas.errors import SchemaError
from schemas.model_profiles import ModelProfile

_POINT_FIELDS = {"x": 0, "y": 1, "x2": 0, "y2": 1}
_THINK = re.compile(r"<(think|thinking)>(.*?)</\1>", re.DOTALL)
_REFLECTION = re.compile(r"<reflection>(.*?)</reflection>", re.DOTALL)
_AUTOGLM_CALL = re.compile(r"(?:^|<answer>)\s*(?:```[a-z]*\s*)?(?:do|finish)\s*\(", re.MULTILINE)
_TOOL_CALL = re.compile(r"<tool_call>|\"name\"\s*:\s*\"mobile_use\"")


def action_from_dict(value: Mapping[str, Any], width: int, height: int) -> Action:
    """A unified action from a dict whose points are pixels of a width x height screenshot."""
    if isinstance(value, Action):
        return value
    if not isinstance(value, Mapping):
        raise SchemaError(
            f"expected an action dict or a text answer, got {type(value).__name__}", field="action"
        )
    data = dict(value)
    size = (width, height)
    for key, axis in _POINT_FIELDS.items():
        v = data.get(key)
        if v is None:
            continue
        try:
            px = float(v)  # numpy scalars too
        except (TypeError, ValueError):
            raise SchemaError(f"{v!r} is not a number of pixels", field=key) from None
        if not math.isfinite(px) or not 0 <= px <= size[axis]:
            raise SchemaError(f"{v!r} is outside the {width}x{height} screenshot", field=key)
        data[key] = px / size[axis]
    for key in ("duration_ms",):
        if data.get(key) is not None and not isinstance(data[key], int):
            try:
                data[key] = int(data[key])
            except (TypeError, ValueError):
                raise SchemaError(f"{data[key]!r} is not a whole number", field=key) from None
    if data.get("amount") is not None:
        data["amount"] = float(data["amount"])
    return make_action(**data)


def parse_answer(text: str, profile: ModelProfile, width: int, height: int) -> tuple[Action, str | None]:
    """(Action, thought or None) from a model's answer on a width x height screenshot."""
    if not isinstance(text, str):
        raise SchemaError(f"expected the answer text, got {type(text).__name__}", field="answer")
    fw, fh = profile.frame(width, height)
    try:
        if profile.coords == "grid999" and _AUTOGLM_CALL.search(text):
            return parse_autoglm(text)
        if profile.coords in ("pixels", "grid1000") and _TOOL_CALL.search(text):
            # mobile_use points: pixels of the frame, or the 0-1000 grid (a 1000 x 1000 frame).
            frame = (fw, fh) if profile.coords == "pixels" else (1000, 1000)
            return from_qwen25vl(text, *frame), _thought(text)
        return from_gui_libra(text, fw, fh, coords=profile.coords)
    except ValidationError as e:  # an Action the converter built that the schema refuses
        err = e.errors()[0]
        raise SchemaError(err["msg"], field=".".join(str(p) for p in err["loc"]) or "answer") from None


def reflection_of(text: str | None) -> str | None:
    """The non-empty `<reflection>` of an answer or thought, else None."""
    if not text:
        return None
    m = _REFLECTION.search(text)
    return m.group(1).strip() or None if m else None


def _thought(text: str) -> str | None:
    m = _THINK.search(text)
    return m.group(2) if m else None
