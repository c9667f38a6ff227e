"""Where personal data is drawn on a screenshot that has no accessibility tree: OCR.

Imports mostly ship screenshots without a tree, so the a11y boxes of
filters/pii_blur.py have nothing to go on. The engine is RapidOCR's ONNX
build of PaddleOCR's PP-OCRv4 (package `rapidocr-onnxruntime`, which ships
its detection, direction and recognition models, Chinese and English, in the
wheel: nothing is downloaded, it runs offline on the CPU). Each text line it
reads goes through the same detectors as any text (filters/pii.py), plus the
values a trajectory's other fields are known to hold, on the line as read and
on a copy with the spaces OCR drops put back ("3840Lakeview" -> "3840
Lakeview"); an address runs on to the end of its clause (a misread ZIP or
state still goes with it). A match's box is the
part of the line's box its characters take (full-width characters counted
twice as wide as others), widened by one character each side and given the
line's full height.

Only screenshots without a tree and without elements are read (curation's
`CurateConfig.ocr = "no_tree"`); "always" reads every screenshot of real data
as well, "never" none. Recall on values rendered into tree-less screenshots
is measured by benchmarks/pii_ocr.py.
"""

from __future__ import annotations

import io
import re
import threading
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from PIL import Image

from filters.pii import PiiMatch

PixelBox = tuple[float, float, float, float]


@dataclass(frozen=True)
class OcrLine:
    text: str
    box: PixelBox  # x0, y0, x1, y1 in pixels of the screenshot
    score: float


class OcrEngine:
    """RapidOCR (ONNX PP-OCR), loaded on first use; safe to share between threads."""

    name = "rapidocr-onnxruntime/PP-OCRv4"

    def __init__(self, *, use_cls: bool = False, text_score: float = 0.5, threads: int = -1):
        self._kw = {"use_cls": use_cls, "text_score": text_score, "threads": threads}
        self._ocr = None
        self._lock = threading.Lock()

    def _load(self):
        with self._lock:
            if self._ocr is None:
                try:  # onnxruntime and the models load only when a screen is read
                    from rapidocr_onnxruntime import RapidOCR
                except ImportError as err:  # a dependency of the project (pyproject.toml)
                    raise RuntimeError(
                        "OCR needs the package rapidocr-onnxruntime (pip install rapidocr-onnxruntime)"
                    ) from err
                t = self._kw["threads"]
                self._ocr = RapidOCR(
                    text_score=self._kw["text_score"], intra_op_num_threads=t, inter_op_num_threads=t
                )
        return self._ocr

    def lines(self, image: bytes) -> list[OcrLine]:
        """The text lines read on an encoded screenshot, top to bottom."""
        ocr = self._load()
        img = Image.open(io.BytesIO(image))
        arr = np.asarray(img.convert("RGB"))[:, :, ::-1]  # RapidOCR takes BGR arrays
        result, _ = ocr(arr, use_cls=self._kw["use_cls"])
        out = []
        for quad, text, score in result or []:
            xs, ys = [p[0] for p in quad], [p[1] for p in quad]
            out.append(OcrLine(text=str(text), box=(min(xs), min(ys), max(xs), max(ys)), score=float(score)))
        return out


_DEFAULT: OcrEngine | None = None
_DEFAULT_LOCK = threading.Lock()


def default_engine() -> OcrEngine:
    """One engine per process (its models load once)."""
    global _DEFAULT
    with _DEFAULT_LOCK:
        if _DEFAULT is None:
            _DEFAULT = OcrEngine()
        return _DEFAULT


def _width(ch: str) -> float:
    if ch.isspace():
        return 0.5
    return 2.0 if unicodedata.east_asian_width(ch) in ("W", "F") else 1.0


def match_box(line: OcrLine, start: int, end: int) -> PixelBox:
    """The part of the line's box that characters [start, end) of its text take."""
    widths = [_width(c) for c in line.text]
    total = sum(widths) or 1.0
    x0, y0, x1, y1 = line.box
    unit = (x1 - x0) / total
    left = x0 + unit * sum(widths[:start])
    right = x0 + unit * sum(widths[:end])
    pad = unit * 2.0  # one full-width character (or two narrow ones) of slack each side
    return max(x0, left - pad), y0, min(x1, right + pad), y1


# OCR drops narrow spaces ("3840LakeviewTerrace,Georgetown,TX78608"): the
# detectors also read a spaced copy of each line, mapped back to its characters.
_GLUED = re.compile(
    r"(?<=[0-9])(?=[A-Za-z])|(?<=[A-Za-z])(?=[0-9])|(?<=[a-z])(?=[A-Z])"
    r"|(?<=[,:;])(?=\S)"
)
# What may follow an address on its line: the rest of it (", City, ST 12345"),
# which a misread state or ZIP ("W153706") keeps the detectors from taking in.
_ADDRESS_TAIL = re.compile(r"\s*,[^.;。；!?！？]*")


def _spaced(text: str) -> tuple[str, list[int]]:
    """`text` with a space at each glued boundary, and each character's index in `text`."""
    out, index, pos = [], [], 0
    for m in _GLUED.finditer(text):
        out.append(text[pos : m.start()])
        index.extend(range(pos, m.start()))
        out.append(" ")
        index.append(m.start())
        pos = m.start()
    out.append(text[pos:])
    index.extend(range(pos, len(text)))
    return "".join(out), index


def find_on_line(text: str, find: Callable[[str], list[PiiMatch]]) -> list[PiiMatch]:
    """Matches on an OCR line: on the text as read and on its spaced copy, longest first."""
    cands = list(find(text))
    spaced, index = _spaced(text)
    if spaced != text:
        for m in find(spaced):
            a, b = index[m.start], index[m.end - 1] + 1
            cands.append(PiiMatch(m.kind, a, b, text[a:b]))
    chosen: list[PiiMatch] = []
    for c in sorted(cands, key=lambda c: (-(c.end - c.start), c.start)):
        if all(c.end <= k.start or c.start >= k.end for k in chosen):
            if c.kind == "address":
                tail = _ADDRESS_TAIL.match(text, c.end)
                if tail and tail.end() > c.end:
                    c = PiiMatch(c.kind, c.start, tail.end(), text[c.start : tail.end()])
            chosen.append(c)
    return sorted(chosen, key=lambda c: c.start)


def pii_boxes(lines: list[OcrLine], find: Callable[[str], list[PiiMatch]]) -> list[dict]:
    """{kind, line, box (pixels), score} for each personal value read on the lines."""
    out = []
    for i, line in enumerate(lines):
        for m in find_on_line(line.text, find):
            out.append(
                {
                    "kind": m.kind,
                    "line": i,
                    "box": match_box(line, m.start, m.end),
                    "score": round(line.score, 3),
                }
            )
    return out
