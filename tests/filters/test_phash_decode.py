"""The fast PNG decode paths of filters.phash against Pillow (what imagehash decodes with)."""

from __future__ import annotations

import io
import struct
import zlib

import numpy as np
import pytest
from PIL import Image, ImageDraw

from filters import phash
from filters.phash import DECODERS, decode_grey, phash_bytes, phash_grey, phash_many


def _screen(seed: int, size=(320, 200)) -> Image.Image:
    """A small screenshot-like RGB image: a bar, cards of varied colour, text."""
    rng = np.random.default_rng(seed)
    img = Image.new("RGB", size, (246, 246, 246))
    d = ImageDraw.Draw(img)
    d.rectangle([0, 0, size[0], 24], fill=tuple(int(v) for v in rng.integers(0, 160, 3)))
    for k in range(4):
        x0, y0 = int(rng.integers(0, size[0] - 90)), int(rng.integers(30, size[1] - 50))
        d.rectangle([x0, y0, x0 + 80, y0 + 40], fill=tuple(int(v) for v in rng.integers(100, 256, 3)))
        d.text((x0 + 4, y0 + 4), f"item {k} {seed}", fill=(20, 20, 20))
    return img


def _png(img: Image.Image, **kw) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="PNG", **kw)
    return buf.getvalue()


def _pillow_grey(data: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(data)) as img:
        return np.asarray(img.convert("L")).astype(np.int16)


SCREENS = [_screen(s) for s in range(4)]


def _kinds() -> dict[str, bytes]:
    rgb = SCREENS[0]
    rgba = np.array(rgb.convert("RGBA"))
    rgba[..., 3] = np.arange(rgba.shape[1]) % 256  # alpha must not leak into the grey
    return {
        "RGB": _png(rgb),
        "RGBA": _png(Image.fromarray(rgba)),
        "L": _png(rgb.convert("L")),
        "RGB interlaced": _adam7_png(np.asarray(rgb)),
        "LA": _png(rgb.convert("LA")),
        "P": _png(rgb.convert("P")),
        "I;16": _png(rgb.convert("I;16")),
    }


def _adam7_png(rgb: np.ndarray) -> bytes:
    """An interlaced (Adam7) 8-bit RGB PNG, written by hand: Pillow cannot write one."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    h, w = rgb.shape[:2]
    raw = b""
    for x0, y0, dx, dy in (
        (0, 0, 8, 8),
        (4, 0, 8, 8),
        (0, 4, 4, 8),
        (2, 0, 4, 4),
        (0, 2, 2, 4),
        (1, 0, 2, 2),
        (0, 1, 1, 2),
    ):
        sub = rgb[y0::dy, x0::dx]
        if sub.size:
            raw += b"".join(b"\0" + row.tobytes() for row in sub)  # filter type 0 per row
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 1)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
    )


def test_fast_png_path_is_available():
    # pyspng and opencv-python-headless are dependencies: without them PNGs go through Pillow
    assert phash.FAST_PNG


@pytest.mark.parametrize("decoder", DECODERS)
def test_decode_grey_matches_pillow_convert_L(decoder):
    for kind, data in _kinds().items():
        fast = phash._fast_png_size(data) is not None
        assert fast == (kind in ("RGB", "RGBA", "L", "RGB interlaced")), kind
        grey = decode_grey(data, decoder)
        assert grey.dtype == np.uint8 and grey.shape == (200, 320), kind
        diff = np.abs(grey.astype(np.int16) - _pillow_grey(data))
        # OpenCV's fixed-point weights are Pillow's but for rounding: +-1 on a few pixels
        assert diff.max() <= 1 and (diff > 0).mean() < 0.01, (kind, diff.max(), (diff > 0).mean())
        if not fast:
            assert diff.max() == 0, kind  # Pillow itself


def test_single_threaded_and_threaded_and_grey_paths_hash_alike():
    blobs = [_png(img) for img in SCREENS]
    singles = [phash_bytes(b) for b in blobs]
    assert [int(h) for h in phash_many(blobs)] == singles
    assert [int(h) for h in phash_many(blobs, threads=2)] == singles  # OpenCV decodes there
    assert [phash_grey(decode_grey(b)) for b in blobs] == singles
    assert len(set(singles)) == len(singles)


def test_broken_png_raises_oserror_on_every_path():
    data = _png(SCREENS[1])
    idat = data.index(b"IDAT")
    flipped = bytearray(data)
    flipped[idat + 4 + 218] ^= 0x01  # libspng alone decodes this bit flip silently; Pillow fails
    for bad in (data[: len(data) // 2], data[:40], bytes(flipped)):
        with pytest.raises(OSError):
            Image.open(io.BytesIO(bad)).load()
        with pytest.raises(OSError):
            phash_bytes(bad)
        for decoder in DECODERS:
            with pytest.raises(OSError):
                decode_grey(bad, decoder)
        with pytest.raises(OSError):
            phash_many([data, bad], threads=2)
    with pytest.raises(OSError, match="CRC mismatch in chunk b'IDAT'"):
        phash_bytes(bytes(flipped))  # caught before decoding, whichever decoder


def test_oversized_png_goes_through_pillows_bomb_check(monkeypatch):
    data = _png(SCREENS[2])
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 320 * 200 // 4)  # the image is 4x the limit
    assert phash._fast_png_size(data) is None
    with pytest.raises(Image.DecompressionBombError):
        phash_bytes(data)


def test_bad_arguments():
    data = _png(SCREENS[3])
    with pytest.raises(ValueError, match="decoder"):
        decode_grey(data, "libpng")
    with pytest.raises(ValueError, match="threads"):
        phash_many([data], threads=0)
