"""Observations and infos as JSON, and back: what the server sends and RemoteEnv reads.

The screenshot travels as base64 PNG (lossless: the default) or JPEG (smaller;
the client's choice per session); everything else in an observation is text.
An info is made JSON-safe: numpy values become numbers and lists, anything
else without a JSON form its string.
"""

from __future__ import annotations

import base64
import dataclasses
import io
import struct
from typing import Any, Literal

import numpy as np
from PIL import Image

ImageFormat = Literal["png", "jpeg"]
_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
_PLAIN = (str, int, float, bool)


def encode_observation(
    obs: dict, image_format: ImageFormat = "png", jpeg_quality: int = 85, *, captured: bytes | None = None
) -> dict:
    """The observation as JSON. `captured`: the PNG the environment captured this
    screenshot from; when it is a PNG of the screenshot's size it travels as is (the
    same pixels once decoded to RGB, lossless either way), instead of being encoded
    again (about 16 ms for 1280x800 at compress level 1). A screenshot of None (a
    server's env that does not decode its captures) is that PNG itself."""
    out = {k: v for k, v in obs.items() if k != "screenshot"}
    shot = obs["screenshot"]
    if shot is None:
        if png_size(captured) is None:
            raise ValueError("an observation without pixels needs the PNG it was captured as")
        if image_format == "png":
            width, height = png_size(captured)
            out["screenshot"] = _wire_image("png", width, height, captured)
            return json_safe(out)
        shot = np.asarray(Image.open(io.BytesIO(captured)).convert("RGB"), dtype=np.uint8)
    shot = np.asarray(shot, dtype=np.uint8)
    data = _same_png(captured, shot.shape) if image_format == "png" else None
    if data is None:
        buf = io.BytesIO()
        image = Image.fromarray(shot)
        if image_format == "jpeg":
            image.save(buf, format="JPEG", quality=jpeg_quality)
        else:
            image.save(buf, format="PNG", compress_level=1)  # fast: the wire is loopback or a LAN
        data = buf.getvalue()
    out["screenshot"] = _wire_image(image_format, int(shot.shape[1]), int(shot.shape[0]), data)
    return json_safe(out)


def _wire_image(image_format: str, width: int, height: int, data: bytes) -> dict:
    return {
        "format": image_format,
        "width": width,
        "height": height,
        "data": base64.b64encode(data).decode("ascii"),
    }


def png_size(data: bytes | None) -> tuple[int, int] | None:
    """(width, height) of a PNG from its header; None when `data` is not a PNG."""
    if not data or not data.startswith(_PNG_MAGIC) or len(data) < 24:
        return None
    width, height = struct.unpack(">II", data[16:24])  # IHDR, always the first chunk
    return width, height


def _same_png(captured: bytes | None, shape: tuple) -> bytes | None:
    """`captured` when it is a PNG of `shape`'s width and height (its header says so)."""
    size = png_size(captured)
    return captured if size is not None and (size[1], size[0]) == tuple(shape[:2]) else None


def decode_observation(wire: dict) -> dict:
    """The observation dict again, screenshot as uint8 H×W×3."""
    obs = dict(wire)
    shot = wire["screenshot"]
    image = Image.open(io.BytesIO(base64.b64decode(shot["data"]))).convert("RGB")
    obs["screenshot"] = np.asarray(image, dtype=np.uint8)
    return obs


def json_safe(value: Any) -> Any:
    if value is None or type(value) in _PLAIN:  # most of an info: no further test
        return value
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return json_safe(dataclasses.asdict(value))
    if hasattr(value, "model_dump"):  # pydantic records (Task, Device)
        return json_safe(value.model_dump(mode="json"))
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)
