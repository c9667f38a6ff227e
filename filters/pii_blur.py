"""Scrub one Step: its text fields, and the screenshot boxes that show personal data.

Boxes come from two places:

- `Step.elements` whose name holds personal data: their normalised bbox.
- a11y-tree nodes (schemas/a11y.py) whose name or inline text holds it. A
  node's [box=x,y,w,h] is in CSS px of the viewport; the matching Element
  (same role and name, in document order, as `to_elements` builds them) gives
  its normalised box, so zoomed mobile pages map right; without one the box
  is divided by the screenshot size (the crawler's default css-scale shots).
  When a descendant with a box shows the same value, only the descendant is
  blurred (a row link "Phone 138..." is not blurred whole when its value cell
  has its own box). A node without a box uses its nearest boxed ancestor
  (recorded with box_source "ancestor"); with none, the record has box None
  and note "no_box", and `ScrubResult.unboxed` counts it.

Each box is padded by 2 px, clamped to the image and Gaussian-blurred with a
radius of at least 60% of its height (glyph strokes vanish; measured in the
tests as a >90% drop of edge energy). Text fields that are not drawn on this
screenshot (url, action text, thought...) are recorded with box None and note
"not_on_screen".

What replaces a value in the text is the caller's choice: a trajectory's
`Surrogates` (filters/pii_surrogate.py: a format-preserving stand-in, the same
for the same value in every field of the trajectory; what curation uses for
real data), or, without one, its kind's placeholder (`[EMAIL]`...). With
`keep=True` (data its source declares synthetic) nothing is rewritten or
blurred: the records are still made, each with `"kept": "synthetic"`, for the
audit. A screenshot without a tree and without elements is read by OCR when
an `ocr` engine is given (filters/pii_ocr.py); its boxes are recorded with
field "ocr[i]" (the i-th line read) and box_source "ocr".
"""

from __future__ import annotations

import hashlib
import io
import re
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

from PIL import Image, ImageFilter

from filters.pii import PLACEHOLDERS, PiiMatch, find_pii, scrub_text
from filters.pii_ocr import pii_boxes
from schemas.a11y import AriaNode, parse_snapshot
from schemas.records import Element, Step

Box = tuple[float, float, float, float]
PAD_PX = 2
_SAVE = {"png": ("PNG", {}), "jpeg": ("JPEG", {"quality": 90}), "webp": ("WEBP", {"quality": 90})}


@dataclass
class ScrubResult:
    step: Step
    image: bytes | None
    records: list[dict] = field(default_factory=list)

    @property
    def unboxed(self) -> int:
        """Matches seen in the a11y tree that no box on the screenshot covers."""
        return sum(1 for r in self.records if r.get("note") == "no_box")


# ---------------------------------------------------------------- text fields
class _Placeholders:
    """The replacer without surrogates: each match becomes its kind's placeholder."""

    find = staticmethod(find_pii)
    scrub = staticmethod(scrub_text)

    @staticmethod
    def value(kind: str, text: str) -> str:
        return PLACEHOLDERS[kind]


class _Keep:
    """The replacer for synthetic data: matches are found (and recorded), never replaced."""

    find = staticmethod(find_pii)

    @staticmethod
    def value(kind: str, text: str) -> str:
        return text

    @staticmethod
    def scrub(text):
        return text, find_pii(text or "")


def scrub_url(url: str, replacer=_Placeholders) -> tuple[str, list[PiiMatch]]:
    """Scrub the path segments, query values and fragment of a URL (decoded first)."""
    if not url:
        return url, []
    parts = urlsplit(url)
    found: list[PiiMatch] = []

    def clean(s: str) -> str:
        new, ms = replacer.scrub(s)
        found.extend(ms)
        return new

    path = "/".join(quote(clean(unquote(seg)), safe="@:+,;=!$&'()*~") for seg in parts.path.split("/"))
    query = urlencode([(k, clean(v)) for k, v in parse_qsl(parts.query, keep_blank_values=True)])
    fragment = quote(clean(unquote(parts.fragment)), safe="/?=&@:+,;!$'()*~")
    if not found or replacer is _Keep:
        return url, found  # untouched URLs keep their exact encoding
    return urlunsplit((parts.scheme, parts.netloc, path, query, fragment)), found


_TREE_ATTR = re.compile(r"\[(?:box|ref)=[^\]]*\]")


def scrub_tree(tree: str, replacer=_Placeholders) -> tuple[str, list[PiiMatch]]:
    """Scrub each line of an a11y tree, leaving its [box=...] and [ref=...] untouched."""
    found: list[PiiMatch] = []
    out = []
    for line in tree.split("\n"):
        protected = [(m.start(), m.end()) for m in _TREE_ATTR.finditer(line)]
        ms = [m for m in replacer.find(line) if all(m.end <= a or m.start >= b for a, b in protected)]
        for m in reversed(ms):
            line = line[: m.start] + replacer.value(m.kind, m.text) + line[m.end :]
        found.extend(ms)
        out.append(line)
    return "\n".join(out), found


# ---------------------------------------------------------------- boxes
def _node_boxes(nodes: list[AriaNode], elements: list[Element], width: int, height: int) -> list[Box | None]:
    """The normalised box of each node: its Element's when one matches, else box / size."""
    out: list[Box | None] = []
    ei = 0
    for n in nodes:
        if n.box is None:
            out.append(None)
            continue
        x, y, w, h = n.box
        if w <= 0 or h <= 0:
            out.append(None)
            continue
        box: Box = (x / width, y / height, (x + w) / width, (y + h) / height)
        for j in range(ei, min(ei + 50, len(elements))):
            e = elements[j]
            if e.role == n.role and e.name == n.name and e.bbox is not None:
                box, ei = tuple(e.bbox), j + 1
                break
        out.append(box)
    return out


def _tree_records(
    tree: str, elements: list[Element], width: int, height: int, find=find_pii
) -> tuple[list[dict], int]:
    """Records for the tree's nodes, and how many matches the nodes hold in all."""
    nodes = parse_snapshot(tree)
    seen = 0
    boxes = _node_boxes(nodes, elements, width, height)
    texts = [" ".join(dict.fromkeys(t for t in (n.name, n.text or "") if t)) for n in nodes]
    records = []
    for i, n in enumerate(nodes):
        url_matches, text_matches = find(n.url or ""), find(texts[i])
        seen += len(url_matches) + len(text_matches)
        for m in url_matches:
            records.append(
                {"kind": m.kind, "field": f"a11y_tree[{i}].url", "box": None, "note": "not_on_screen"}
            )
        for m in text_matches:
            if _shown_below(nodes, boxes, texts, i, m.text):
                continue
            box, source = boxes[i], "node"
            if box is None:
                box, source = _ancestor_box(nodes, boxes, i), "ancestor"
            rec = {"kind": m.kind, "field": f"a11y_tree[{i}]", "box": box}
            if box is None:
                rec["note"] = "no_box"
            else:
                rec["box_source"] = source
            records.append(rec)
    return records, seen


def _shown_below(nodes: list[AriaNode], boxes: list, texts: list[str], i: int, value: str) -> bool:
    """Whether a descendant of node i with its own box shows `value`."""
    j = i + 1
    while j < len(nodes) and nodes[j].depth > nodes[i].depth:
        if boxes[j] is not None and value in texts[j]:
            return True
        j += 1
    return False


def _ancestor_box(nodes: list[AriaNode], boxes: list, i: int) -> Box | None:
    depth = nodes[i].depth
    for k in range(i - 1, -1, -1):
        if nodes[k].depth < depth:
            if boxes[k] is not None:
                return boxes[k]
            depth = nodes[k].depth
    return None


def _inside(inner: Box, outer: Box, tol: float = 1e-3) -> bool:
    return (
        inner[0] >= outer[0] - tol
        and inner[1] >= outer[1] - tol
        and inner[2] <= outer[2] + tol
        and inner[3] <= outer[3] + tol
    )


def _pixel_box(box: Box, w: int, h: int) -> tuple[int, int, int, int] | None:
    x0, y0, x1, y1 = box
    px0, py0 = max(int(x0 * w) - PAD_PX, 0), max(int(y0 * h) - PAD_PX, 0)
    px1, py1 = min(int(-(-x1 * w // 1)) + PAD_PX, w), min(int(-(-y1 * h // 1)) + PAD_PX, h)
    if px1 <= px0 or py1 <= py0:
        return None
    return px0, py0, px1, py1


def blur_boxes(image: bytes, boxes: list[Box], image_format: str) -> tuple[bytes, int]:
    """`image` with each normalised box blurred, re-encoded; and how many boxes were on it."""
    img = Image.open(io.BytesIO(image))
    img.load()
    mode = img.mode
    if mode not in ("RGB", "RGBA", "L"):
        img = img.convert("RGBA" if "A" in mode else "RGB")
    w, h = img.size
    drawn = 0
    for box in dict.fromkeys(boxes):
        pb = _pixel_box(box, w, h)
        if pb is None:
            continue
        crop = img.crop(pb)
        radius = max(8.0, 0.6 * (pb[3] - pb[1]))
        # Blur twice: one pass of a huge radius still leaves faint stroke ghosts.
        crop = crop.filter(ImageFilter.GaussianBlur(radius)).filter(ImageFilter.GaussianBlur(radius))
        img.paste(crop, pb[:2])
        drawn += 1
    fmt, kw = _SAVE[image_format]
    if fmt == "JPEG" and img.mode == "RGBA":
        img = img.convert("RGB")
    buf = io.BytesIO()
    img.save(buf, fmt, **kw)
    return buf.getvalue(), drawn


# ---------------------------------------------------------------- the step
def scrub_step(
    step: Step,
    image: bytes | None,
    *,
    surrogates=None,
    keep: bool = False,
    ocr=None,
    ocr_always: bool = False,
) -> ScrubResult:
    """A scrubbed copy of `step`, its blurred screenshot (None if unchanged) and the records.

    `surrogates`: a filters.pii_surrogate.Surrogates (values replaced by their
    surrogates); None: placeholders. `keep`: synthetic data, recorded only.
    `ocr`: a filters.pii_ocr.OcrEngine, read on screenshots without a tree (and
    elements), or on every screenshot with `ocr_always`.
    """
    replacer = _Keep if keep else (surrogates if surrogates is not None else _Placeholders)
    records, seen_in_nodes = _tree_records(
        step.a11y_tree, step.elements, step.width, step.height, find=replacer.find
    )
    tree, line_matches = scrub_tree(step.a11y_tree, replacer)
    # A match on a line the parser does not read as a node: count it, never drop it.
    records.extend(
        {"kind": m.kind, "field": "a11y_tree", "box": None, "note": "no_box"}
        for m in line_matches[seen_in_nodes:]
    )
    tree_boxes = [(r["kind"], r["box"]) for r in records if r.get("box") is not None]

    elements = []
    for i, e in enumerate(step.elements):
        name, ms = replacer.scrub(e.name)
        for m in ms:
            rec = {"kind": m.kind, "field": f"elements[{i}].name", "box": e.bbox}
            if e.bbox is None:
                rec["note"] = "no_box"
            else:
                # A tighter box from the tree (the value's own cell) inside this element.
                inner = [b for k, b in tree_boxes if k == m.kind and _inside(b, e.bbox)]
                rec["box"] = min(inner, key=lambda b: (b[2] - b[0]) * (b[3] - b[1])) if inner else e.bbox
                rec["box_source"] = "tree" if inner else "element"
            records.append(rec)
        elements.append(e.model_copy(update={"name": name}) if ms and not keep else e)

    def text_field(value: str | None, name: str) -> str | None:
        if not value:
            return value
        new, ms = replacer.scrub(value)
        # Not drawn as such on this screenshot; the element showing it has its own record.
        records.extend({"kind": m.kind, "field": name, "box": None, "note": "not_on_screen"} for m in ms)
        return new

    update: dict = {
        "a11y_tree": tree,
        "elements": elements,
        "thought": text_field(step.thought, "thought"),
        "error": text_field(step.error, "error"),
    }
    if step.target is not None:
        update["target"] = step.target.model_copy(
            update={"name": text_field(step.target.name, "target.name")}
        )
    url, ms = scrub_url(step.url, replacer)
    records.extend({"kind": m.kind, "field": "url", "box": None, "note": "not_on_screen"} for m in ms)
    update["url"] = url
    update["action"] = step.action.model_copy(
        update={
            "text": text_field(step.action.text, "action.text"),
            "description": text_field(step.action.description, "action.description"),
        }
    )

    if ocr is not None and image is not None and (ocr_always or needs_ocr(step)):
        records.extend(_ocr_records(ocr, image, replacer.find))
    if keep:  # synthetic: listed for the audit, nothing rewritten, nothing blurred
        for r in records:
            r["kept"] = "synthetic"
        return ScrubResult(step=step, image=None, records=records)

    new_image = None
    if image is not None:
        size = Image.open(io.BytesIO(image)).size
        for r in records:
            if r.get("box") is not None and _pixel_box(r["box"], *size) is None:
                r["note"] = "off_screen"
        boxes = [r["box"] for r in records if r.get("box") is not None and "note" not in r]
        if boxes:
            new_image, _ = blur_boxes(image, boxes, step.image_format)
            update["screenshot"] = hashlib.sha256(new_image).hexdigest()
    return ScrubResult(step=step.model_copy(update=update), image=new_image, records=records)


def needs_ocr(step: Step) -> bool:
    """A screenshot with nothing that says where its text is: no tree, no elements."""
    return not step.a11y_tree.strip() and not step.elements


def _ocr_records(engine, image: bytes, find) -> list[dict]:
    """Records (normalised boxes) for the personal values OCR reads on the screenshot."""
    w, h = Image.open(io.BytesIO(image)).size
    out = []
    for b in pii_boxes(engine.lines(image), find):
        x0, y0, x1, y1 = b["box"]
        out.append(
            {
                "kind": b["kind"],
                "field": f"ocr[{b['line']}]",
                "box": (x0 / w, y0 / h, x1 / w, y1 / h),
                "box_source": "ocr",
            }
        )
    return out
