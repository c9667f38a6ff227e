"""Model profiles: the frame a trainer feeds a screenshot in, and how points are written in it.

A training set is written for one named model profile (DESIGN, data model). The
profile says, for a screenshot of width x height pixels:

- `frame(w, h)`: the (width, height) of the image the model sees: the trainer's
  `smart_resize` (sides multiples of `factor` = patch size x spatial merge, the
  pixel count in [min_pixels, max_pixels]); the set stores the screenshot
  resized to exactly this size, so the trainer's own resize leaves it alone;
- `to_model(x, y, w, h)`: a normalised point as the two integers the answer
  writes, `from_model(value, w, h)`: back to normalised [0, 1];
- `coords`: the answer's coordinate text ("pixels" of the frame, "grid1000":
  0-1000 of the image, "grid999": 0-999), as schemas.converters.gui_libra reads it.

| profile      | factor | min_pixels   | max_pixels        | coords                          |
|--------------|--------|--------------|-------------------|---------------------------------|
| qwen2.5-vl   | 28     | 56*56        | 1280*28*28        | pixels of the frame             |
| qwen3-vl     | 32     | 64*32*32     | 1280*32*32        | 0-1000 of the image (relative)  |
| ui-tars      | 28     | 100*28*28    | 16384*28*28       | pixels of the frame             |
| gui-libra    | 28     | 56*56        | 1280*28*28        | pixels of the frame (3B/7B)     |
| open-autoglm | 28     | 112*112      | 28*28*1280        | 0-999 (value / 1000)            |

Sources: Qwen2.5-VL's processor (transformers `Qwen2VLImageProcessor`, factor
28; 1280 tokens is the cap Qwen's cookbooks and this repo's full training
preset use, `image_max_pixels: 1003520`); Qwen3-VL (patch 16 x merge 2 = 32,
points on a 0-1000 grid); UI-TARS-1.5 (its README's coordinate recipe:
`smart_resize(h, w, 28, 100*28*28, 16384*28*28)`, absolute pixels of the
resized image); GUI-Libra-3B/7B (schemas/converters/gui_libra.py: Qwen2.5-VL
based, absolute pixels of the image the model saw, `<think>` tags; the
Qwen3-based 4B/8B checkpoints use qwen3-vl's frame); Open-AutoGLM
(schemas/converters/autoglm.py: 0-999, value / 1000; GLM-4.1V's patch 14 x
merge 2). The answer itself stays the reasoning set's GUI-Libra JSON for every
profile: the profile decides the image and the coordinates.

`smart_resize` is schemas.converters.qwen.smart_resize (tested against
transformers' own on odd sizes, tests/schemas/test_model_profiles.py).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

from .grids import (
    GRID_999,
    GRID_1000,
    Grid,
    point_from_grid,
    point_from_pixels,
    point_to_grid,
    point_to_pixels,
)

Coords = Literal["pixels", "grid1000", "grid999"]
DEFAULT_PROFILE = "qwen2.5-vl"  # what examples/train/*.yaml and the Dagster training presets train
_GRIDS: dict[str, Grid] = {"grid1000": GRID_1000, "grid999": GRID_999}


@dataclass(frozen=True)
class ModelProfile:
    name: str
    factor: int
    min_pixels: int
    max_pixels: int
    coords: Coords
    think_tag: str = "think"
    model: str = ""  # the models it stands for, in words

    def __post_init__(self):
        if self.coords not in ("pixels", "grid1000", "grid999"):
            raise ValueError(f"profile {self.name}: coords={self.coords!r}")
        if not (0 < self.factor and 0 < self.min_pixels <= self.max_pixels):
            raise ValueError(
                f"profile {self.name}: need factor > 0 and "
                f"0 < min_pixels ({self.min_pixels}) <= max_pixels ({self.max_pixels})"
            )

    def frame(self, width: int, height: int) -> tuple[int, int]:
        """(width, height) of the image the trainer feeds for a width x height screenshot."""
        from .converters.qwen import smart_resize

        h, w = smart_resize(height, width, self.factor, self.min_pixels, self.max_pixels)
        return w, h

    def to_model(self, x: float, y: float, width: int, height: int) -> list[int]:
        """A normalised point of a width x height screenshot as the answer writes it."""
        if self.coords == "pixels":
            return point_to_pixels(x, y, *self.frame(width, height))
        return point_to_grid(x, y, _GRIDS[self.coords])

    def from_model(
        self, value: Any, width: int, height: int, *, field: str = "point_2d"
    ) -> tuple[float, float]:
        """The answer's [a, b] on a width x height screenshot, normalised to [0, 1]."""
        if self.coords == "pixels":
            return point_from_pixels(value, *self.frame(width, height), field=field)
        return point_from_grid(value, _GRIDS[self.coords], field=field)

    def with_pixels(self, *, min_pixels: int | None = None, max_pixels: int | None = None) -> ModelProfile:
        """The same profile with other pixel bounds (e.g. a trainer's smaller cap)."""
        return replace(
            self,
            min_pixels=self.min_pixels if min_pixels is None else min_pixels,
            max_pixels=self.max_pixels if max_pixels is None else max_pixels,
        )

    def describe(self) -> dict[str, Any]:
        """The profile as a manifest records it (and `model_profile(dict)` reads back)."""
        return asdict(self)


PROFILES: dict[str, ModelProfile] = {
    p.name: p
    for p in (
        ModelProfile(
            "qwen2.5-vl",
            28,
            56 * 56,
            1280 * 28 * 28,
            "pixels",
            model="Qwen2.5-VL (3B/7B/72B): absolute pixels after smart_resize",
        ),
        ModelProfile(
            "qwen3-vl",
            32,
            64 * 32 * 32,
            1280 * 32 * 32,
            "grid1000",
            model="Qwen3-VL: 0-1000 relative coordinates, factor 32",
        ),
        ModelProfile(
            "ui-tars",
            28,
            100 * 28 * 28,
            16384 * 28 * 28,
            "pixels",
            model="UI-TARS-1.5: absolute pixels after its smart_resize",
        ),
        ModelProfile(
            "gui-libra",
            28,
            56 * 56,
            1280 * 28 * 28,
            "pixels",
            model="GUI-Libra-3B/7B (Qwen2.5-VL based): absolute pixels of the image seen",
        ),
        ModelProfile(
            "open-autoglm",
            28,
            112 * 112,
            1280 * 28 * 28,
            "grid999",
            model="Open-AutoGLM (AutoGLM-Phone-9B): 0-999, value / 1000",
        ),
    )
}


def model_profile(spec: str | dict | ModelProfile | None) -> ModelProfile:
    """A profile by name (PROFILES), from a manifest's `model_profile` dict, or as given.

    None is DEFAULT_PROFILE. A dict names a known profile and may override its pixel
    bounds (a set written for a smaller cap); unknown names are errors.
    """
    if spec is None:
        return PROFILES[DEFAULT_PROFILE]
    if isinstance(spec, ModelProfile):
        return spec
    if isinstance(spec, dict):
        try:
            return ModelProfile(**spec)
        except TypeError as exc:
            raise ValueError(f"model_profile {spec!r}: {exc}") from None
    key = str(spec).strip().lower().replace("_", "-")
    aliases = {
        "qwen25vl": "qwen2.5-vl",
        "qwen2.5vl": "qwen2.5-vl",
        "qwen3vl": "qwen3-vl",
        "uitars": "ui-tars",
        "guilibra": "gui-libra",
        "autoglm": "open-autoglm",
        "openautoglm": "open-autoglm",
    }
    key = aliases.get(key.replace("-", ""), key)
    if key not in PROFILES:
        raise ValueError(f"unknown model profile {spec!r}; use one of {sorted(PROFILES)}")
    return PROFILES[key]


def manifest_profile(manifest: dict) -> ModelProfile | None:
    """The profile a set's manifest names (None: a set written before profiles, whose
    answers are pixels of the stored screenshot)."""
    spec = manifest.get("model_profile")
    return None if spec is None else model_profile(spec)
