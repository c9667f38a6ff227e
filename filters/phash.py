"""Perceptual hashes of screenshots: imagehash.phash's definition, decoded fast.

The hash is the DCT pHash (hash_size 8, highfreq 4): the image in greyscale at
32x32, its 2-D DCT-II, the top-left 8x8 coefficients, each bit "> median".
Bit order is imagehash's: row-major over the 8x8 block, first bit the most
significant, so `phash_bytes(png) == int(str(imagehash.phash(img)), 16)` up to
the few bits that the faster resampling moves (tests measure how many).

Where the time goes (1280x800 screenshots, one core): decoding and resizing,
not the DCT (a 8x32 matrix product, microseconds). So:

- JPEG: `Image.draft("L", ...)` makes libjpeg decode only the luma channel at
  1/8 scale (a DCT-domain downscale): a 160x100 image comes out of the decoder.
- PNG (and WebP): there is no reduced decode; we convert to greyscale first and
  let `resize(reducing_gap=...)` box-reduce before the final LANCZOS pass,
  instead of a LANCZOS kernel over the whole image. The decode itself stays.

Parquet stores hashes as int64: `to_signed` / `to_unsigned` convert.
"""
from __future__ import annotations

import io
from typing import Iterable

import numpy as np
from PIL import Image

HASH_SIZE = 8
HIGHFREQ = 4
IMG_SIZE = HASH_SIZE * HIGHFREQ  # 32

# Final resize before the DCT: box reductions while the image is more than
# REDUCING_GAP times the target, then LANCZOS (imagehash resizes with LANCZOS).
REDUCING_GAP = 2.0
# JPEG draft size: libjpeg picks the largest 1/1..1/8 scale still >= this.
DRAFT_SIZE = (IMG_SIZE * 2, IMG_SIZE * 2)


def _dct_rows(n: int, k: int) -> np.ndarray:
    """The first k rows of the (unnormalised) n-point DCT-II matrix.

    scipy.fftpack.dct's type II has a factor 2 on every coefficient; a common
    factor does not change which coefficients exceed the median, so it is left out.
    """
    i = np.arange(n)
    return np.cos(np.pi * np.arange(k)[:, None] * (2 * i[None, :] + 1) / (2 * n))


_DCT = _dct_rows(IMG_SIZE, HASH_SIZE)  # (8, 32)
_BIT_WEIGHTS = (1 << np.arange(63, -1, -1, dtype=np.uint64)).astype(np.uint64)


def _small_grey(img: Image.Image) -> np.ndarray:
    """The 32x32 greyscale pixels (float64) that the DCT runs on."""
    if img.format == "JPEG" and img.mode in ("L", "RGB", "YCbCr", "CMYK"):
        img.draft("L", DRAFT_SIZE)
    if img.mode != "L":
        img = img.convert("L")
    small = img.resize((IMG_SIZE, IMG_SIZE), Image.Resampling.LANCZOS,
                       reducing_gap=REDUCING_GAP)
    return np.asarray(small, dtype=np.float64)


def hash_pixels(pixels: np.ndarray) -> np.ndarray:
    """pHashes (uint64) of a batch of 32x32 greyscale images, shape (n, 32, 32)."""
    pixels = np.asarray(pixels, dtype=np.float64)
    if pixels.ndim == 2:
        pixels = pixels[None]
    if pixels.shape[1:] != (IMG_SIZE, IMG_SIZE):
        raise ValueError(f"hash_pixels expects (n, {IMG_SIZE}, {IMG_SIZE}) pixels, "
                         f"got {pixels.shape}")
    # D = C X C^T for every image at once: (8,32) @ (n,32,32) @ (32,8).
    low = _DCT @ pixels @ _DCT.T
    flat = low.reshape(len(low), HASH_SIZE * HASH_SIZE)
    bits = flat > np.median(flat, axis=1, keepdims=True)
    return (bits.astype(np.uint64) * _BIT_WEIGHTS).sum(axis=1, dtype=np.uint64)


def phash_image(img: Image.Image) -> int:
    """The 64-bit pHash of a PIL image, as an unsigned int (0 .. 2**64-1)."""
    return int(hash_pixels(_small_grey(img))[0])


def phash_bytes(data: bytes) -> int:
    """The 64-bit pHash of an encoded image (PNG, JPEG, WebP, ...)."""
    with Image.open(io.BytesIO(data)) as img:
        return phash_image(img)


def phash_many(blobs: Iterable[bytes]) -> np.ndarray:
    """pHashes (uint64 array) of many encoded images; one batched DCT."""
    grids = []
    for data in blobs:
        with Image.open(io.BytesIO(data)) as img:
            grids.append(_small_grey(img))
    if not grids:
        return np.zeros(0, dtype=np.uint64)
    return hash_pixels(np.stack(grids))


def hamming(a: int, b: int) -> int:
    """Number of differing bits between two 64-bit hashes (signed or unsigned)."""
    return ((a ^ b) & 0xFFFF_FFFF_FFFF_FFFF).bit_count()


def to_signed(h: int) -> int:
    """The int64 view of an unsigned 64-bit hash (how Parquet stores it)."""
    h = int(h) & 0xFFFF_FFFF_FFFF_FFFF
    return h - (1 << 64) if h >= (1 << 63) else h


def to_unsigned(h: int) -> int:
    """The unsigned 64-bit hash from its int64 view (inverse of `to_signed`)."""
    return int(h) & 0xFFFF_FFFF_FFFF_FFFF


def from_imagehash(ih) -> int:
    """An `imagehash.ImageHash` (8x8) as the same unsigned int (the reference)."""
    return int(str(ih), 16)
