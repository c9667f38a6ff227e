"""Resolution profiles: the image size a target model wants, applied at export.

A profile maps a screenshot's (width, height) to the size it is exported at:

- `native`: as captured, but scaled down (aspect kept) to at most `max_pixels`
  (default 1920*1080), so one 4K phone screenshot cannot blow up a shard;
- `1120`, `448`: a fixed square (1120x1120, 448x448) as fixed-input encoders
  want; the aspect ratio changes, which is fine because every coordinate in a
  sample is normalised to [0, 1] of the image;
- `qwen`: Qwen2.5-VL's `smart_resize` (sides multiples of 28, pixels between
  min_pixels and max_pixels), so the model sees the image unresized and its
  pixel outputs live in the exported frame;
- a model profile's name (schemas.model_profiles: "qwen2.5-vl", "qwen3-vl",
  "ui-tars", "gui-libra", "open-autoglm"): the frame that profile's trainer feeds
  (the same sizes the reasoning set is written at); the manifest's provenance
  names the profile.

Images are resized with Pillow (LANCZOS) and re-encoded in their stored format;
an image already at its target size keeps its bytes. Coordinates and boxes are
normalised, so they stay valid as they are; the sample's width/height (its only
pixel-valued fields) become the new size.
"""

from __future__ import annotations

import io
import math
from dataclasses import asdict, dataclass

from PIL import Image, UnidentifiedImageError

from schemas.converters.qwen import MAX_PIXELS as QWEN_MAX_PIXELS
from schemas.converters.qwen import MIN_PIXELS as QWEN_MIN_PIXELS
from schemas.converters.qwen import smart_resize
from schemas.model_profiles import PROFILES as MODEL_PROFILES
from schemas.model_profiles import ModelProfile, model_profile

NATIVE_MAX_PIXELS = 1920 * 1080
# Re-encoding settings per stored format. Fixed, so an export is reproducible.
_SAVE = {
    "png": ("PNG", {"compress_level": 6}),
    "jpeg": ("JPEG", {"quality": 95, "subsampling": 0}),
    "webp": ("WEBP", {"quality": 95, "method": 4}),
}


def _positive(v: int, field: str) -> int:
    if not isinstance(v, int) or v <= 0:
        raise ValueError(f"resolution: {field}={v!r} must be a positive integer")
    return v


@dataclass(frozen=True)
class Resolution:
    """One profile. Build with `resolution_profile("native")` or the classmethods."""

    name: str
    kind: str  # "native" | "fixed" | "qwen" | "model"
    width: int | None = None  # fixed
    height: int | None = None
    max_pixels: int | None = None  # native, qwen, model
    min_pixels: int | None = None  # qwen, model
    factor: int | None = None  # model
    model_profile: str | None = None  # model: the schemas.model_profiles name

    @classmethod
    def model(cls, spec: str | ModelProfile) -> Resolution:
        """The frame of a model profile (schemas.model_profiles)."""
        p = model_profile(spec)
        return cls(
            p.name,
            "model",
            max_pixels=p.max_pixels,
            min_pixels=p.min_pixels,
            factor=p.factor,
            model_profile=p.name,
        )

    @classmethod
    def native(cls, max_pixels: int = NATIVE_MAX_PIXELS) -> Resolution:
        return cls("native", "native", max_pixels=_positive(max_pixels, "max_pixels"))

    @classmethod
    def fixed(cls, width: int, height: int | None = None) -> Resolution:
        height = width if height is None else height
        name = str(width) if width == height else f"{width}x{height}"
        return cls(name, "fixed", width=_positive(width, "width"), height=_positive(height, "height"))

    @classmethod
    def qwen(cls, min_pixels: int = QWEN_MIN_PIXELS, max_pixels: int = QWEN_MAX_PIXELS) -> Resolution:
        if not 0 < min_pixels <= max_pixels:
            raise ValueError(f"qwen profile: need 0 < min_pixels ({min_pixels}) <= max_pixels ({max_pixels})")
        return cls("qwen", "qwen", min_pixels=min_pixels, max_pixels=max_pixels)

    def target(self, width: int, height: int) -> tuple[int, int]:
        """(width, height) an image of this size is exported at."""
        if width <= 0 or height <= 0:
            raise ValueError(f"image size {width}x{height} is not positive")
        if self.kind == "fixed":
            return self.width, self.height
        if self.kind == "qwen":
            h, w = smart_resize(height, width, min_pixels=self.min_pixels, max_pixels=self.max_pixels)
            return w, h
        if self.kind == "model":
            h, w = smart_resize(height, width, self.factor, self.min_pixels, self.max_pixels)
            return w, h
        if width * height <= self.max_pixels:
            return width, height
        scale = math.sqrt(self.max_pixels / (width * height))
        return max(1, math.floor(width * scale)), max(1, math.floor(height * scale))

    def describe(self) -> dict:
        """The profile as recorded in the manifest (and the export's fingerprint)."""
        return {k: v for k, v in asdict(self).items() if v is not None}


PROFILES = {
    "native": Resolution.native(),
    "1120": Resolution.fixed(1120),
    "448": Resolution.fixed(448),
    "qwen": Resolution.qwen(),
}


def resolution_profile(spec: str | int | Resolution) -> Resolution:
    """A profile by name ("native", "1120", "448", "qwen") or as given."""
    if isinstance(spec, Resolution):
        return spec
    try:
        return PROFILES[str(spec)]
    except KeyError:
        pass
    try:
        return Resolution.model(str(spec))
    except ValueError:
        raise ValueError(
            f"resolution: unknown profile {spec!r}; use one of {sorted(PROFILES)}, "
            f"a model profile ({sorted(MODEL_PROFILES)}) or a Resolution"
        ) from None


def resize_image(data: bytes, image_format: str, size: tuple[int, int], *, source: str = "") -> bytes:
    """The encoded image resized to `size` (LANCZOS), in the same format.

    Returns `data` unchanged when it already has that size, so the `native`
    profile leaves small screenshots byte for byte as stored.
    """
    if image_format not in _SAVE:
        raise ValueError(f"{source}: cannot re-encode image_format {image_format!r}")
    try:
        im = Image.open(io.BytesIO(data))
        if im.size == tuple(size):
            return data
        im.load()
    except UnidentifiedImageError:  # its message holds a BytesIO's address: not reproducible
        raise ValueError(
            f"{source}: cannot decode the screenshot: not a {image_format} image Pillow can read"
        ) from None
    except (OSError, Image.DecompressionBombError) as exc:
        raise ValueError(f"{source}: cannot decode the screenshot: {exc}") from None
    im = _resizable(im, image_format)
    out = im.resize(size, Image.Resampling.LANCZOS)
    buf = io.BytesIO()
    fmt, options = _SAVE[image_format]
    out.save(buf, format=fmt, **options)
    return buf.getvalue()


def _resizable(im: Image.Image, image_format: str) -> Image.Image:
    """A mode LANCZOS can resize and the format can store (palette, 1-bit -> RGB(A))."""
    if image_format == "jpeg":
        return im if im.mode in ("RGB", "L") else im.convert("RGB")
    if im.mode in ("RGB", "RGBA", "L", "LA"):
        return im
    has_alpha = "A" in im.mode or "transparency" in im.info
    return im.convert("RGBA" if has_alpha else "RGB")
