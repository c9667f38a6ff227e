"""pHash: our fast decode against imagehash.phash (the reference), on UI-like images."""

from __future__ import annotations

import io
import random

import imagehash
import numpy as np
import pytest
from PIL import Image, ImageDraw

from filters.phash import (
    from_imagehash,
    hamming,
    hash_pixels,
    phash_bytes,
    phash_image,
    phash_many,
    to_signed,
    to_unsigned,
)


def _ui_image(seed: int, size=(1280, 800)) -> Image.Image:
    """A screenshot-like image: bars, cards, text lines, an icon."""
    rng = random.Random(seed)
    img = Image.new("RGB", size, (rng.randint(225, 255),) * 3)
    d = ImageDraw.Draw(img)
    w, h = size
    d.rectangle([0, 0, w, rng.randint(40, 90)], fill=(rng.randint(0, 80), 40, rng.randint(60, 160)))
    for _ in range(rng.randint(3, 8)):
        x0, y0 = rng.randint(0, w - 200), rng.randint(100, h - 120)
        d.rectangle(
            [x0, y0, x0 + rng.randint(120, 500), y0 + rng.randint(60, 200)],
            fill=tuple(rng.randint(150, 255) for _ in range(3)),
            outline=(90, 90, 90),
        )
        for k in range(rng.randint(1, 4)):
            d.text((x0 + 10, y0 + 10 + 16 * k), f"Item {rng.randint(0, 999)} price {k}", fill=(20, 20, 20))
    d.ellipse([w // 3, h // 2, w // 3 + 120, h // 2 + 120], outline=(40, 40, 40), width=6)
    return img


def _encode(img: Image.Image, fmt: str) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format=fmt, **({"quality": 85} if fmt == "JPEG" else {}))
    return buf.getvalue()


IMAGES = [_ui_image(s) for s in range(8)] + [_ui_image(s, (540, 1200)) for s in range(8, 12)]
MAX_DISTANCE_TO_REFERENCE = 6  # measured: mean ~1, max 6 on sandbox screenshots


def test_exact_resize_path_is_bit_identical_to_imagehash():
    # same 32x32 input -> same DCT, median and bit order as imagehash
    for img in IMAGES:
        small = img.convert("L").resize((32, 32), Image.Resampling.LANCZOS)
        assert phash_image(small) == from_imagehash(imagehash.phash(img))


@pytest.mark.parametrize("fmt", ["PNG", "JPEG"])
def test_fast_decode_is_close_to_imagehash(fmt):
    dists = []
    for img in IMAGES:
        data = _encode(img, fmt)
        ref = from_imagehash(imagehash.phash(Image.open(io.BytesIO(data))))
        dists.append(hamming(phash_bytes(data), ref))
    print(f"{fmt}: Hamming to imagehash.phash {dists}")
    assert max(dists) <= MAX_DISTANCE_TO_REFERENCE
    assert np.mean(dists) <= 2.0


def test_identical_images_identical_hashes_and_batch_matches_single():
    blobs = [_encode(img, "PNG") for img in IMAGES[:4]]
    singles = [phash_bytes(b) for b in blobs]
    assert singles == [phash_bytes(bytes(b)) for b in blobs]
    assert [int(h) for h in phash_many(blobs)] == singles
    assert len(set(singles)) == len(singles)  # different screens, different hashes


def test_signed_round_trip_and_hamming():
    for h in [0, 1, 2**63 - 1, 2**63, 2**64 - 1, 0xDEADBEEFCAFEBABE]:
        s = to_signed(h)
        assert -(2**63) <= s < 2**63 and to_unsigned(s) == h
        assert np.int64(s).view(np.uint64) == np.uint64(h)  # Parquet int64 view
    assert hamming(0, 2**64 - 1) == 64 and hamming(to_signed(2**64 - 1), 0) == 64
    assert hamming(0b1011, 0b0001) == 2


def test_hash_pixels_rejects_wrong_shape():
    with pytest.raises(ValueError, match="32"):
        hash_pixels(np.zeros((2, 16, 16)))
