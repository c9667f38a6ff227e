"""Integer coordinate frames that model formats use, in one place.

The canonical action stores points normalised to [0, 1]. Model formats want
integers on some frame instead:

- `GRID_1000`: 0..1000 inclusive, value / 1000 (Qwen3-VL, GUI-Libra-4B/8B,
  OS-Atlas, GUI-Odyssey).
- `GRID_999`: 0..999, value / 1000 (Open-AutoGLM: its prompt says (999, 999)
  is the bottom-right corner and its handler maps a value v to v/1000*dim).
- pixels of a width x height image (Qwen2.5-VL, GUI-Libra-3B/7B, AndroidControl):
  `point_to_pixels` / `point_from_pixels`.

Encoding rounds to the nearest integer and clamps to the frame, so a decoded
point is within half a unit of the original (one unit at the far edge).
Decoding checks the value and names the format's field when it is bad.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .actions import to_pixels
from .errors import SchemaError


@dataclass(frozen=True)
class Grid:
    name: str
    divisor: int  # normalised = value / divisor
    max_value: int  # the largest value the format allows

    def encode(self, v: float) -> int:
        return min(max(round(v * self.divisor), 0), self.max_value)

    def decode(self, value: Any, *, field: str) -> float:
        g = _number(value, field=field)
        if not 0 <= g <= self.max_value:
            raise SchemaError(f"{value!r} is outside the {self.name} range 0..{self.max_value}", field=field)
        return g / self.divisor


GRID_1000 = Grid("grid1000", 1000, 1000)
GRID_999 = Grid("grid999", 1000, 999)


def _number(value: Any, *, field: str) -> float:
    # bool is an int subclass; a model writing `true` for a coordinate is an error.
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SchemaError(f"{value!r} is not a number", field=field)
    if not math.isfinite(value):
        raise SchemaError(f"{value!r} is not a finite number", field=field)
    return value


def pair(value: Any, *, field: str) -> tuple[float, float]:
    """A two-number list/tuple such as [x, y], checked."""
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise SchemaError(f"{value!r} is not a pair [x, y]", field=field)
    return _number(value[0], field=field), _number(value[1], field=field)


def point_to_grid(x: float, y: float, grid: Grid) -> list[int]:
    return [grid.encode(x), grid.encode(y)]


def point_from_grid(value: Any, grid: Grid, *, field: str) -> tuple[float, float]:
    gx, gy = pair(value, field=field)
    return grid.decode(gx, field=field), grid.decode(gy, field=field)


def point_to_pixels(x: float, y: float, width: int, height: int) -> list[int]:
    return list(to_pixels(x, y, width, height))


def point_from_pixels(value: Any, width: int, height: int, *, field: str) -> tuple[float, float]:
    """[px, py] (ints or floats) of a width x height image to normalised [0, 1].

    A point on the far edge (px == width) is accepted; anything outside is an
    error rather than a silent clamp, so a wrong frame size is noticed.
    """
    if width <= 0 or height <= 0:
        raise ValueError(f"screen size {width}x{height} is not positive")
    px, py = pair(value, field=field)
    if not (0 <= px <= width and 0 <= py <= height):
        raise SchemaError(f"{list(value)!r} lies outside the {width}x{height} image", field=field)
    return px / width, py / height
