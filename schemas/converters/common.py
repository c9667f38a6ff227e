"""What the three converters (autoglm, gui_libra, qwen) share: building an Action with
errors that name the field, swipe and scroll directions, the two rewrites
(`split_type_focus`, `scroll_to_swipe`) and durations in seconds."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any

from pydantic import ValidationError

from ..actions import Action, ActionType
from ..errors import SchemaError

DIRECTIONS = ("up", "down", "left", "right")
# A scroll moves the view; the finger that does it moves the other way
# (to see what is below, swipe up).
SWIPE_FOR_SCROLL = {"down": "up", "up": "down", "left": "right", "right": "left"}
# How far a swipe travels when a format gives only its direction (fraction of the screen).
SWIPE_SPAN = 0.3
_STEP = {"up": (0.0, -1.0), "down": (0.0, 1.0), "left": (-1.0, 0.0), "right": (1.0, 0.0)}


def make_action(*, field: str | None = None, **kw: Any) -> Action:
    """Build an Action; a contract violation becomes a SchemaError naming `field`."""
    try:
        return Action(**kw)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise SchemaError(err["msg"], field=field or loc or "type") from None


def unsupported(action: Action, fmt: str, hint: str = "") -> SchemaError:
    msg = f"{fmt} cannot express a {action.type.value} action"
    return SchemaError(msg + (f"; {hint}" if hint else ""), field="type")


def swipe_direction(action: Action) -> str:
    """The direction a swipe's finger moves: `direction` if set, else the dominant axis.

    Ties go to the vertical axis (the common case on phones).
    """
    if action.direction is not None:
        return action.direction
    dx, dy = action.x2 - action.x, action.y2 - action.y
    if dx == 0 and dy == 0:
        raise SchemaError("a swipe that does not move has no direction", field="x2")
    if abs(dy) >= abs(dx):
        return "down" if dy > 0 else "up"
    return "right" if dx > 0 else "left"


def swipe_end(x: float, y: float, direction: str, span: float = SWIPE_SPAN) -> tuple[float, float]:
    """Where a swipe of `span` from (x, y) towards `direction` ends, kept on the screen."""
    sx, sy = _STEP[direction]
    return min(max(x + sx * span, 0.0), 1.0), min(max(y + sy * span, 0.0), 1.0)


def split_type_focus(action: Action) -> list[Action]:
    """A `type` with a point as [tap there, type]; any other action as [itself].

    For formats whose type action writes into the focused field only.
    """
    if action.type != ActionType.TYPE or action.x is None:
        return [action]
    tap = Action(type=ActionType.TAP, x=action.x, y=action.y)
    typed = action.model_copy(update={"x": None, "y": None})
    return [tap, typed]


def scroll_to_swipe(action: Action, span: float = SWIPE_SPAN) -> Action:
    """A `scroll` as the finger swipe that does it (from its point or the centre).

    For formats without a scroll action (Open-AutoGLM, Qwen2.5-VL mobile_use).
    """
    if action.type != ActionType.SCROLL:
        return action
    x, y = (0.5, 0.5) if action.x is None else (action.x, action.y)
    finger = SWIPE_FOR_SCROLL[action.direction]
    # Start half a span behind the centre so that the whole swipe stays on screen.
    sx, sy = _STEP[finger]
    x0 = min(max(x - sx * span / 2, 0.0), 1.0)
    y0 = min(max(y - sy * span / 2, 0.0), 1.0)
    x2, y2 = swipe_end(x0, y0, finger, span)
    return Action(
        type=ActionType.SWIPE,
        x=x0,
        y=y0,
        x2=x2,
        y2=y2,
        direction=finger,
        duration_ms=action.duration_ms,
        description=action.description,
    )


def direction_from(value: Any, *, field: str) -> str:
    """'down', ' Down ', 'scroll down' -> 'down'; anything ambiguous is an error."""
    if not isinstance(value, str):
        raise SchemaError(f"{value!r} is not a direction (up/down/left/right)", field=field)
    words = set(re.findall(r"[a-z]+", value.lower())) & set(DIRECTIONS)
    if len(words) != 1:
        raise SchemaError(f"{value!r} is not one direction of up/down/left/right", field=field)
    return words.pop()


def seconds_text(ms: int) -> str:
    """Milliseconds as the shortest exact decimal of seconds: 2000 -> '2', 1500 -> '1.5'."""
    return format((Decimal(ms) / 1000).normalize(), "f")


def seconds_number(ms: int) -> int | float:
    """Milliseconds as a JSON number of seconds: 2000 -> 2, 1500 -> 1.5."""
    return ms // 1000 if ms % 1000 == 0 else ms / 1000


_SECONDS = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*(s|sec|secs|second|seconds)?\s*$")


def ms_from_seconds(value: Any, *, field: str) -> int:
    """2, 1.5, '2', '2 seconds', '1.5s' -> milliseconds."""
    if isinstance(value, bool):
        raise SchemaError(f"{value!r} is not a number of seconds", field=field)
    if isinstance(value, (int, float)):
        text = repr(value)
    elif isinstance(value, str) and (m := _SECONDS.match(value)):
        text = m.group(1)
    else:
        raise SchemaError(f"{value!r} is not a number of seconds", field=field)
    try:
        seconds = Decimal(text)
    except InvalidOperation:
        raise SchemaError(f"{value!r} is not a number of seconds", field=field) from None
    if not seconds.is_finite() or seconds < 0:
        raise SchemaError(f"{value!r} is not a non-negative number of seconds", field=field)
    return int((seconds * 1000).to_integral_value())
