"""The server's wire format: a captured PNG travels as is when it is the observation's
screenshot, anything else is encoded; infos become JSON-safe. No browser."""

from __future__ import annotations

import base64
import io
import json

import numpy as np
from PIL import Image

from trajforge.envs.wire import decode_observation, encode_observation, json_safe


def _png(pixels: np.ndarray, mode: str = "RGB") -> bytes:
    buf = io.BytesIO()
    Image.fromarray(pixels).convert(mode).save(buf, format="PNG")
    return buf.getvalue()


def _obs(pixels: np.ndarray) -> dict:
    return {"screenshot": pixels, "a11y": "- button 'Add'", "instruction": "去做", "url": "http://x/"}


def test_a_captured_png_of_the_screenshots_size_travels_as_is():
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, size=(40, 64, 3), dtype=np.uint8)
    captured = _png(pixels, "RGBA")  # Chromium's PNGs may carry alpha: RGB once decoded
    wire = encode_observation(_obs(pixels), captured=captured)
    assert base64.b64decode(wire["screenshot"]["data"]) == captured
    assert (wire["screenshot"]["width"], wire["screenshot"]["height"]) == (64, 40)
    back = decode_observation(json.loads(json.dumps(wire)))
    assert np.array_equal(back["screenshot"], pixels) and back["instruction"] == "去做"


def test_a_capture_of_another_size_or_format_is_encoded_again():
    pixels = np.full((40, 64, 3), 200, dtype=np.uint8)
    bigger = _png(np.zeros((80, 128, 3), dtype=np.uint8))  # resized to the env's screen
    for wire in (
        encode_observation(_obs(pixels), captured=bigger),
        encode_observation(_obs(pixels), captured=b"\xff\xd8 not a png"),
        encode_observation(_obs(pixels), captured=None),
    ):
        assert np.array_equal(decode_observation(wire)["screenshot"], pixels)
    jpeg = encode_observation(_obs(pixels), "jpeg", captured=_png(pixels))
    assert jpeg["screenshot"]["format"] == "jpeg"
    assert base64.b64decode(jpeg["screenshot"]["data"]).startswith(b"\xff\xd8")


def test_json_safe_keeps_plain_values_and_converts_numpy():
    info = {
        "step": 3,
        "ok": True,
        "name": "Add",
        "score": np.float32(0.5),
        "n": np.int64(7),
        "flag": np.bool_(False),
        "box": np.array([1, 2]),
        "elements": [{"bbox": (1.0, 2.0, 3.0, 4.0), "visibility": None}],
        1: "key made a string",
    }
    safe = json_safe(info)
    assert safe == {
        "step": 3,
        "ok": True,
        "name": "Add",
        "score": 0.5,
        "n": 7,
        "flag": False,
        "box": [1, 2],
        "elements": [{"bbox": [1.0, 2.0, 3.0, 4.0], "visibility": None}],
        "1": "key made a string",
    }
    assert type(safe["n"]) is int and type(safe["flag"]) is bool
    json.dumps(safe)


def test_an_observation_without_pixels_sends_its_png_or_decodes_it_for_jpeg():
    """A served env skips decoding its capture (screenshot None): the PNG is the screenshot,
    and a client asking for JPEG still gets the same picture."""
    ys, xs = np.mgrid[0:30, 0:50]
    pixels = np.stack([xs * 5, ys * 8, xs + ys], axis=-1).astype(np.uint8)  # smooth: JPEG keeps it
    captured = _png(pixels, "RGBA")
    wire = encode_observation(_obs(None), captured=captured)
    assert base64.b64decode(wire["screenshot"]["data"]) == captured
    assert np.array_equal(decode_observation(wire)["screenshot"], pixels)
    jpeg = encode_observation(_obs(None), "jpeg", 95, captured=captured)
    assert jpeg["screenshot"]["format"] == "jpeg" and (
        jpeg["screenshot"]["width"],
        jpeg["screenshot"]["height"],
    ) == (50, 30)
    assert np.abs(decode_observation(jpeg)["screenshot"].astype(int) - pixels).mean() < 3
    try:
        encode_observation(_obs(None), captured=None)
    except ValueError as err:
        assert "needs the PNG" in str(err)
    else:
        raise AssertionError("an observation without pixels or PNG was encoded")
