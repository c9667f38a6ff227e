"""The unified action space shared by web, Android and iOS.

Coordinates are normalised to [0, 1] of the screenshot; the screenshot's pixel
size travels beside them on the step. A desktop click and a mobile tap are the
same `tap`; platform adapters translate.
"""

from __future__ import annotations

import math
from enum import Enum
from typing import Literal

from pydantic import BaseModel, ConfigDict, field_validator, model_validator


class ActionType(str, Enum):  # noqa: UP042 (StrEnum would change format() of members)
    TAP = "tap"
    DOUBLE_TAP = "double_tap"
    LONG_PRESS = "long_press"
    SWIPE = "swipe"
    SCROLL = "scroll"
    TYPE = "type"
    KEY = "key"
    OPEN_APP = "open_app"
    BACK = "back"
    HOME = "home"
    WAIT = "wait"
    SELECT = "select"
    ANSWER = "answer"
    TAKE_OVER = "take_over"
    DONE = "done"
    RIGHT_CLICK = "right_click"  # added last: earlier types keep their positions


ACTION_TYPES = [t.value for t in ActionType]
# Actions that act at a point on the screen.
POINT_ACTIONS = {
    ActionType.TAP,
    ActionType.RIGHT_CLICK,
    ActionType.DOUBLE_TAP,
    ActionType.LONG_PRESS,
    ActionType.SWIPE,
    ActionType.SELECT,
}
# Actions whose `text` is required.
TEXT_ACTIONS = {ActionType.TYPE, ActionType.KEY, ActionType.OPEN_APP, ActionType.SELECT, ActionType.ANSWER}
# Actions expected to change the screen (used by no-op detection).
SCREEN_CHANGING = {
    ActionType.TAP,
    ActionType.RIGHT_CLICK,
    ActionType.DOUBLE_TAP,
    ActionType.LONG_PRESS,
    ActionType.SWIPE,
    ActionType.SCROLL,
    ActionType.TYPE,
    ActionType.KEY,
    ActionType.OPEN_APP,
    ActionType.BACK,
    ActionType.HOME,
    ActionType.SELECT,
}

Direction = Literal["up", "down", "left", "right"]
# A scroll's `amount` is in wheel notches (pyautogui's `scroll(clicks)`); a web
# driver moves SCROLL_NOTCH_PX CSS px per notch (Chromium's wheel tick).
SCROLL_NOTCH_PX = 100


class Action(BaseModel):
    """One action. Which fields are required depends on `type`.

    - tap / double_tap / long_press: x, y (long_press may give duration_ms)
    - right_click: x, y; a mouse click with the secondary button (desktop and
      web; not a long press, and touch screens cannot do it)
    - swipe: x, y (start), x2, y2 (end), optional duration_ms
    - scroll: direction, optional x, y (where the wheel or finger is), optional
      amount: how far, in wheel notches (> 0; the direction gives the sign; a
      notch is SCROLL_NOTCH_PX CSS px on the web). Without it the driver
      scrolls its default (a fraction of the screen).
    - type: text (typed into the focused field; x, y optional to focus first)
    - key: text, a key or chord such as "enter", "ctrl+shift+t", "back", "home";
      schemas.keys gives the canonical spelling (lower case, modifiers
      ctrl+alt+shift+meta first) and the drivers accept its aliases ("Enter")
    - open_app: text, an app name, package or URL
    - select: x, y of the control and text, the option chosen
    - answer: text, the answer to an information task
    - wait: optional duration_ms
    - back, home, take_over (text: why), done (text: optional final message)
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: ActionType
    x: float | None = None
    y: float | None = None
    x2: float | None = None
    y2: float | None = None
    direction: Direction | None = None
    text: str | None = None
    duration_ms: int | None = None
    description: str | None = None
    amount: float | None = None  # scroll only: wheel notches (see SCROLL_NOTCH_PX)

    @field_validator("x", "y", "x2", "y2")
    @classmethod
    def _normalised(cls, v: float | None, info) -> float | None:
        # A field validator, so errors name the field (action.x), not the action.
        if v is not None and (not math.isfinite(v) or v < 0.0 or v > 1.0):
            raise ValueError(f"{info.field_name}={v!r} is not a normalised coordinate in [0, 1]")
        return v

    @field_validator("amount")
    @classmethod
    def _positive_amount(cls, v: float | None) -> float | None:
        if v is not None and (not math.isfinite(v) or v <= 0):
            raise ValueError(
                f"amount={v!r} is not a positive number of wheel notches (the direction gives the sign)"
            )
        return v

    @field_validator("duration_ms")
    @classmethod
    def _non_negative(cls, v: int | None) -> int | None:
        if v is not None and v < 0:
            raise ValueError(f"duration_ms={v} is negative")
        if v is not None and v > 2**63 - 1:  # an int64 column in Parquet
            raise ValueError(f"duration_ms={v} is too large")
        return v

    @model_validator(mode="after")
    def _check(self) -> Action:
        if (self.x is None) != (self.y is None):
            raise ValueError("x and y must be given together")
        if (self.x2 is None) != (self.y2 is None):
            raise ValueError("x2 and y2 must be given together")
        if self.type in POINT_ACTIONS and self.x is None:
            raise ValueError(f"{self.type.value} needs a point (x, y)")
        if self.type == ActionType.SWIPE and self.x2 is None:
            raise ValueError("swipe needs an end point (x2, y2)")
        if self.type == ActionType.SCROLL and self.direction is None:
            raise ValueError("scroll needs a direction")
        if self.amount is not None and self.type != ActionType.SCROLL:
            raise ValueError(f"amount is for scroll only, not {self.type.value}")
        if self.type in TEXT_ACTIONS and self.text is None:
            raise ValueError(f"{self.type.value} needs text")
        return self

    # Convenience constructors keep call sites short and readable.
    @classmethod
    def tap(cls, x: float, y: float, **kw) -> Action:
        return cls(type=ActionType.TAP, x=x, y=y, **kw)

    @classmethod
    def right_click(cls, x: float, y: float, **kw) -> Action:
        return cls(type=ActionType.RIGHT_CLICK, x=x, y=y, **kw)

    @classmethod
    def type_text(cls, text: str, x: float | None = None, y: float | None = None, **kw) -> Action:
        return cls(type=ActionType.TYPE, text=text, x=x, y=y, **kw)

    @classmethod
    def scroll(
        cls,
        direction: Direction,
        x: float | None = None,
        y: float | None = None,
        amount: float | None = None,
        **kw,
    ) -> Action:
        return cls(type=ActionType.SCROLL, direction=direction, x=x, y=y, amount=amount, **kw)

    @classmethod
    def key(cls, name: str, **kw) -> Action:
        return cls(type=ActionType.KEY, text=name, **kw)

    def point_px(self, width: int, height: int) -> tuple[int, int] | None:
        """The action point in pixels of a width x height screen."""
        if self.x is None:
            return None
        return to_pixels(self.x, self.y, width, height)

    def brief(self) -> str:
        """A short plain-language rendering for logs and prompt histories."""
        t = self.type.value
        if self.type == ActionType.SWIPE:
            return f"swipe ({self.x:.3f},{self.y:.3f})->({self.x2:.3f},{self.y2:.3f})"
        parts = [t]
        if self.x is not None:
            parts.append(f"({self.x:.3f},{self.y:.3f})")
        if self.direction:
            parts.append(self.direction)
        if self.amount is not None:
            parts.append(f"{self.amount:g} notches")
        if self.text is not None:
            parts.append(repr(self.text))
        return " ".join(parts)


def to_pixels(x: float, y: float, width: int, height: int) -> tuple[int, int]:
    """Normalised point to integer pixels, clamped to the screen."""
    if width <= 0 or height <= 0:  # else the clamp below yields -1
        raise ValueError(f"screen size {width}x{height} is not positive")
    px = min(max(round(x * width), 0), width - 1)
    py = min(max(round(y * height), 0), height - 1)
    return px, py


def from_pixels(px: float, py: float, width: int, height: int) -> tuple[float, float]:
    """Pixel point to normalised [0, 1]; `to_pixels` inverts it for integer pixels."""
    if width <= 0 or height <= 0:
        raise ValueError(f"screen size {width}x{height} is not positive")
    if not (math.isfinite(px) and math.isfinite(py)):  # NaN would slip through the clamp
        raise ValueError(f"pixel point ({px}, {py}) is not finite")
    return min(max(px / width, 0.0), 1.0), min(max(py / height, 0.0), 1.0)
