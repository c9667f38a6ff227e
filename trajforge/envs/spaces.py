"""The Gym spaces of a GUI: any text, and the unified action space in screenshot pixels.

`AnyText` is gymnasium's `Text` for what a page shows: any Unicode string up
to `max_length` (an accessibility tree, a Chinese instruction, a URL), where
`Text` only holds the characters of its charset. It samples from printable
ASCII.

`GuiActions` is what `GuiEnv.step` takes: a unified action dict whose points
are pixels of the screenshot (`{"type": "tap", "x": 512, "y": 300}`, every
type of schemas.actions), an `Action`, or a model's text answer (any string up
to `text_max_length`; one that does not parse is a format failure, not an
element outside the space). `sample()` draws a dict among the actions a random
policy can take without leaving the app: tap, double tap, long press, swipe,
scroll, type, key, wait and back.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from typing import Any

import numpy as np
from gymnasium import spaces

from schemas.actions import Action
from schemas.errors import SchemaError

from .answers import action_from_dict

_PRINTABLE = string.ascii_letters + string.digits + string.punctuation + " "
_KEYS = ("Enter", "Tab", "Escape", "ArrowDown", "ArrowUp")
_SAMPLED = ("tap", "tap", "tap", "scroll", "wait", "type", "key", "double_tap", "long_press", "swipe", "back")


class AnyText(spaces.Text):
    """Any str of `min_length` to `max_length` characters (samples are printable ASCII)."""

    def __init__(self, max_length: int, *, min_length: int = 0, seed=None):
        super().__init__(max_length, min_length=min_length, charset=_PRINTABLE, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"AnyText({self.min_length}, {self.max_length})"

    def __eq__(self, other: object, /) -> bool:
        return (
            isinstance(other, AnyText)
            and self.min_length == other.min_length
            and self.max_length == other.max_length
        )


class GuiActions(spaces.Space):
    """Unified actions on a width x height screenshot, or a model's text answer."""

    def __init__(self, width: int, height: int, *, text_max_length: int = 32_768, seed=None):
        if width <= 0 or height <= 0:
            raise ValueError(f"screen size {width}x{height} is not positive")
        self.width, self.height, self.text_max_length = int(width), int(height), int(text_max_length)
        super().__init__(shape=None, dtype=None, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def sample(self, mask: Any = None, probability: Any = None) -> dict[str, Any]:
        """A random action dict (points in pixels) that keeps to the app."""
        if mask is not None or probability is not None:
            raise NotImplementedError("GuiActions.sample takes no mask")
        rng = self.np_random
        kind = str(rng.choice(_SAMPLED))

        def point() -> tuple[int, int]:
            return int(rng.integers(0, self.width)), int(rng.integers(0, self.height))

        if kind in ("tap", "double_tap"):
            x, y = point()
            return {"type": kind, "x": x, "y": y}
        if kind == "long_press":
            x, y = point()
            return {"type": kind, "x": x, "y": y, "duration_ms": 600}
        if kind == "swipe":
            (x, y), (x2, y2) = point(), point()
            return {"type": kind, "x": x, "y": y, "x2": x2, "y2": y2, "duration_ms": 200}
        if kind == "scroll":
            return {"type": kind, "direction": str(rng.choice(["up", "down"]))}
        if kind == "type":
            n = int(rng.integers(1, 9))
            return {"type": kind, "text": "".join(rng.choice(list(string.ascii_lowercase), n))}
        if kind == "key":
            return {"type": kind, "text": str(rng.choice(_KEYS))}
        if kind == "wait":
            return {"type": kind, "duration_ms": int(rng.integers(100, 500))}
        return {"type": kind}

    def contains(self, x: Any) -> bool:
        if isinstance(x, str):
            return len(x) <= self.text_max_length
        if isinstance(x, Action):
            return True
        if isinstance(x, Mapping):
            try:
                action_from_dict(x, self.width, self.height)
            except SchemaError:
                return False
            return True
        return False

    def __repr__(self) -> str:
        return f"GuiActions({self.width}x{self.height} px, or text up to {self.text_max_length} chars)"

    def __eq__(self, other: object, /) -> bool:
        return isinstance(other, GuiActions) and (self.width, self.height, self.text_max_length) == (
            other.width,
            other.height,
            other.text_max_length,
        )


def screenshot_space(width: int, height: int) -> spaces.Box:
    return spaces.Box(0, 255, shape=(height, width, 3), dtype=np.uint8)
