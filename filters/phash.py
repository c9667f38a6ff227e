"""Perceptual hashes of screenshots: imagehash.phash's definition, decoded fast.

The hash is the DCT pHash (hash_size 8, highfreq 4): the image in greyscale at
32x32, its 2-D DCT-II, the top-left 8x8 coefficients, each bit "> median".
Bit order is imagehash's: row-major over the 8x8 block, first bit the most
significant, so `phash_bytes(png) == int(str(imagehash.phash(img)), 16)` up to
the few bits that the faster resampling moves (tests measure how many).

Where the time goes (one core, real sandbox screenshots; benchmarks/phash_neardup.py):
decoding, not the DCT (a 8x32 matrix product, microseconds). A 1280x800 PNG
costs imagehash ~16-18 ms: Pillow's PNG decode ~12, convert("L") ~1.7, a
LANCZOS kernel over the full image ~3. So:

- PNG (what crawls store): libspng (`pyspng`) decodes in ~6 ms, half Pillow's
  time (most of what is left is zlib's inflate and the Paeth/Up unfilter, which
  every row needs: PNG has no reduced decode); OpenCV's `cvtColor` makes the
  grey image in 0.7 ms with Pillow's weights (identical but for +-1 on ~0.2 %
  of pixels). Together 2.2-2.5x imagehash on one core: short of 3x, because
  libspng's decode alone is ~2.8x (no maintained wheel pairs a fast inflate
  with a SIMD unfilter). pyspng holds the GIL, so `phash_many(threads=N)`
  decodes with OpenCV's libpng, which releases it (the same RGB, hence the
  same hash) but costs ~1.4x the CPU: it pays only with idle cores (0.6-1.3x
  of one thread on 2 busy ones).
- JPEG: `Image.draft("L", ...)` makes libjpeg decode only the luma channel at
  1/8 scale (a DCT-domain downscale): a 160x100 image comes out of the decoder.
- Every path ends alike: box reductions (`reducing_gap`) then LANCZOS to 32x32,
  instead of a LANCZOS kernel over the whole image.

Parquet stores hashes as int64: `to_signed` / `to_unsigned` convert.
"""

from __future__ import annotations

import io
import struct
import zlib
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from PIL import Image

try:  # the fast PNG path; without these every format goes through Pillow
    import cv2
    import pyspng
except ImportError:  # pragma: no cover - the project depends on both
    cv2 = pyspng = None

HASH_SIZE = 8
HIGHFREQ = 4
IMG_SIZE = HASH_SIZE * HIGHFREQ  # 32

# Final resize before the DCT: box reductions while the image is more than
# REDUCING_GAP times the target, then LANCZOS (imagehash resizes with LANCZOS).
REDUCING_GAP = 2.0
# JPEG draft size: libjpeg picks the largest 1/1..1/8 scale still >= this.
DRAFT_SIZE = (IMG_SIZE * 2, IMG_SIZE * 2)

FAST_PNG = cv2 is not None and pyspng is not None
if cv2 is not None:
    # Parallelise over images (phash_many's threads), not inside one: OpenCV's
    # own pool on a 1 MP cvtColor halved our 2-thread throughput on 2 busy cores.
    cv2.setNumThreads(1)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
DECODERS = ("spng", "opencv")  # spng: fastest on one core; opencv: releases the GIL
_FAST_COLOUR_TYPES = (0, 2, 6)  # PNG IHDR colour types: grey, RGB, RGBA


def _dct_rows(n: int, k: int) -> np.ndarray:
    """The first k rows of the (unnormalised) n-point DCT-II matrix.

    scipy.fftpack.dct's type II has a factor 2 on every coefficient; a common
    factor does not change which coefficients exceed the median, so it is left out.
    """
    i = np.arange(n)
    return np.cos(np.pi * np.arange(k)[:, None] * (2 * i[None, :] + 1) / (2 * n))


_DCT = _dct_rows(IMG_SIZE, HASH_SIZE)  # (8, 32)
_BIT_WEIGHTS = (1 << np.arange(63, -1, -1, dtype=np.uint64)).astype(np.uint64)


# -- decoding to greyscale ----------------------------------------------------------


def _fast_png_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) of a PNG that the fast path decodes, else None.

    8-bit grey, RGB or RGBA PNGs only (screenshots are 8-bit RGB); other
    kinds (16-bit, palette, grey + alpha) and images over Pillow's
    MAX_IMAGE_PIXELS go through Pillow, so its conversion and its
    decompression-bomb check apply to them.
    """
    if not FAST_PNG or len(data) < 33 or not data.startswith(PNG_SIGNATURE) or data[12:16] != b"IHDR":
        return None
    width, height, bit_depth, colour_type = struct.unpack_from(">IIBB", data, 16)
    limit = Image.MAX_IMAGE_PIXELS
    if (
        bit_depth != 8
        or colour_type not in _FAST_COLOUR_TYPES
        or (limit is not None and width * height > limit)
    ):
        return None
    return width, height


def _check_png_crcs(data: bytes) -> None:
    """Raise OSError where a chunk's CRC is wrong or the file ends early.

    pyspng tells libspng to skip CRC and Adler-32 checks, so a bit flipped in
    the image data could decode to a wrong image instead of failing as it does
    in Pillow; checking the CRCs here costs ~0.05 ms for a 200 kB screenshot.
    """
    pos, end = len(PNG_SIGNATURE), len(data)
    while True:
        if pos + 12 > end:
            raise OSError(f"broken PNG: truncated at byte {pos}")
        (length,) = struct.unpack_from(">I", data, pos)
        body_end = pos + 8 + length
        if body_end + 4 > end:
            raise OSError(f"broken PNG: truncated in a chunk at byte {pos}")
        kind = data[pos + 4 : pos + 8]
        (crc,) = struct.unpack_from(">I", data, body_end)
        if zlib.crc32(memoryview(data)[pos + 4 : body_end]) != crc:
            raise OSError(f"broken PNG: CRC mismatch in chunk {kind!r} at byte {pos}")
        if kind == b"IEND":
            return
        pos = body_end + 4


def _png_grey(data: bytes, decoder: str) -> np.ndarray:
    _check_png_crcs(data)
    if decoder == "spng":
        try:
            pixels = pyspng.load(data)
        except RuntimeError as exc:  # truncated or corrupt: an OSError, as Pillow's
            raise OSError(f"broken PNG: {exc}") from None
        if pixels.ndim == 2:
            return pixels
        code = cv2.COLOR_RGB2GRAY if pixels.shape[2] == 3 else cv2.COLOR_RGBA2GRAY
        return cv2.cvtColor(pixels, code)
    if decoder == "opencv":
        flags = cv2.IMREAD_COLOR | cv2.IMREAD_IGNORE_ORIENTATION
        pixels = cv2.imdecode(np.frombuffer(data, np.uint8), flags)
        if pixels is None:
            raise OSError("broken PNG: OpenCV could not decode it")
        return cv2.cvtColor(pixels, cv2.COLOR_BGR2GRAY)
    raise ValueError(f"decoder must be one of {DECODERS}, got {decoder!r}")


def decode_grey(data: bytes, decoder: str = "spng") -> np.ndarray:
    """The full-size greyscale pixels (uint8, height x width) of an encoded image.

    Pillow's `convert("L")` of it (what imagehash hashes), but for +-1 on a few
    pixels of 8-bit PNGs, which libspng (decoder="spng", fastest on one core)
    or OpenCV (decoder="opencv", releases the GIL) decode. Raises OSError on a
    truncated or corrupt image.
    """
    if decoder not in DECODERS:
        raise ValueError(f"decoder must be one of {DECODERS}, got {decoder!r}")
    if _fast_png_size(data) is not None:
        return _png_grey(data, decoder)
    with Image.open(io.BytesIO(data)) as img:
        return np.asarray(img.convert("L"))


def _shrink(grey: Image.Image) -> np.ndarray:
    """32x32 float64 pixels of a greyscale image: box reductions, then LANCZOS."""
    small = grey.resize((IMG_SIZE, IMG_SIZE), Image.Resampling.LANCZOS, reducing_gap=REDUCING_GAP)
    return np.asarray(small, dtype=np.float64)


def _small_grey(img: Image.Image) -> np.ndarray:
    """The 32x32 greyscale pixels (float64) that the DCT runs on."""
    if img.format == "JPEG" and img.mode in ("L", "RGB", "YCbCr", "CMYK"):
        img.draft("L", DRAFT_SIZE)
    if img.mode != "L":
        img = img.convert("L")
    return _shrink(img)


def _small_grey_bytes(data: bytes, decoder: str = "spng") -> np.ndarray:
    if _fast_png_size(data) is not None:
        return _shrink(Image.fromarray(_png_grey(data, decoder)))
    with Image.open(io.BytesIO(data)) as img:
        return _small_grey(img)


# -- hashing ------------------------------------------------------------------------


def hash_pixels(pixels: np.ndarray) -> np.ndarray:
    """pHashes (uint64) of a batch of 32x32 greyscale images, shape (n, 32, 32)."""
    pixels = np.asarray(pixels, dtype=np.float64)
    if pixels.ndim == 2:
        pixels = pixels[None]
    if pixels.shape[1:] != (IMG_SIZE, IMG_SIZE):
        raise ValueError(f"hash_pixels expects (n, {IMG_SIZE}, {IMG_SIZE}) pixels, got {pixels.shape}")
    # D = C X C^T for every image at once: (8,32) @ (n,32,32) @ (32,8).
    low = _DCT @ pixels @ _DCT.T
    flat = low.reshape(len(low), HASH_SIZE * HASH_SIZE)
    bits = flat > np.median(flat, axis=1, keepdims=True)
    return (bits.astype(np.uint64) * _BIT_WEIGHTS).sum(axis=1, dtype=np.uint64)


def phash_image(img: Image.Image) -> int:
    """The 64-bit pHash of a PIL image, as an unsigned int (0 .. 2**64-1)."""
    return int(hash_pixels(_small_grey(img))[0])


def phash_grey(grey: np.ndarray) -> int:
    """The pHash of full-size greyscale pixels (`decode_grey`'s output): lets a
    caller that needs the grey image anyway (blank detection) decode once."""
    return int(hash_pixels(_shrink(Image.fromarray(np.asarray(grey, dtype=np.uint8))))[0])


def phash_bytes(data: bytes) -> int:
    """The 64-bit pHash of an encoded image (PNG, JPEG, WebP, ...)."""
    return int(hash_pixels(_small_grey_bytes(data))[0])


def phash_many(blobs: Iterable[bytes], threads: int = 1) -> np.ndarray:
    """pHashes (uint64 array) of many encoded images; one batched DCT.

    threads > 1 decodes in a thread pool; its PNGs go through OpenCV, which
    releases the GIL (libspng does not), and hash the same as with threads=1.
    The pool takes the whole iterable at once: pass batches, not a stream.
    """
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    if threads == 1:
        grids = [_small_grey_bytes(data) for data in blobs]
    else:
        with ThreadPoolExecutor(threads) as pool:
            grids = list(pool.map(lambda data: _small_grey_bytes(data, "opencv"), blobs))
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
