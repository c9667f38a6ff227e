"""Which elements of a recorded screen may be grounding targets, and how big they are.

A crawled element is a target only when the crawler measured it visible at capture
time (schemas.records.Visibility.is_target: on screen, centre hit-tests to it, no
modal over it, >= 99 % inside the viewport). An imported element was never measured
(visibility None): it is a target only when the dataset itself gave its box
(box_source "dataset"); a crawled element without a measurement is not (an old record
cannot say whether a pop-up covered it). No box is ever guessed: an element without
one, or with a zero-sized one, is dropped and counted.

Every candidate gets a drop reason or None; `size_bucket` sorts the kept ones:
"small" below 1 % of the screen or under 32 px on a side in the model frame
(ScreenSpot-Pro's hard cases are tiny icons), "medium" below 5 %, else "large".
"""

from __future__ import annotations

from dataclasses import dataclass

from schemas.records import Element, Step, Trajectory

# Layout containers and unnamed structure: nothing a person would ask to point at.
STRUCTURAL = frozenset(
    {
        "generic",
        "none",
        "presentation",
        "main",
        "region",
        "document",
        "group",
        "list",
        "navigation",
        "banner",
        "contentinfo",
        "form",
        "table",
        "rowgroup",
        "application",
        "WebArea",
        "RootWebArea",
        "section",
        "dialog",
        "alertdialog",
        "window",  # a desktop app's top-level window: the whole screen
        "paragraph",
        "complementary",
        "toolbar",
        "tablist",
        "menu",
        "menubar",
        "listbox",
        "grid",
        "tree",
        "separator",
        "LineBreak",
    }
)
SMALL_AREA, MEDIUM_AREA, SMALL_SIDE_PX = 0.01, 0.05, 32
DROP_REASONS = (
    "no_name",
    "structural",
    "no_bbox",
    "zero_size",
    "not_measured",
    "off_screen",
    "clipped",
    "occluded",
    "modal_covered",
)


@dataclass(frozen=True)
class Candidate:
    element: Element
    box_source: str  # "visibility" (measured at capture) or "dataset" (import)
    drop: str | None  # a DROP_REASONS entry, or None for a target


def judge(element: Element, imported: bool) -> Candidate:
    """The element's verdict (see the module docstring); order of reasons is fixed."""
    source = "dataset" if imported else "visibility"
    if not element.name.strip():
        return Candidate(element, source, "no_name")  # no expression could name it
    if element.role in STRUCTURAL:
        return Candidate(element, source, "structural")
    if element.bbox is None:
        return Candidate(element, source, "no_bbox")
    x0, y0, x1, y1 = element.bbox
    if x1 <= x0 or y1 <= y0:
        return Candidate(element, source, "zero_size")
    v = element.visibility
    if v is None:
        return Candidate(element, source, None if imported else "not_measured")
    if v.is_target:
        return Candidate(element, "visibility", None)
    if not v.on_screen:
        reason = "off_screen"
    elif v.modal_covered:
        reason = "modal_covered"
    elif not v.centre_hit:
        reason = "occluded"
    else:
        reason = "clipped"
    return Candidate(element, "visibility", reason)


def candidates(traj: Trajectory, step: Step) -> list[Candidate]:
    """Every element of the step's screen (its target too when the list lacks it) judged."""
    imported = traj.source == "import"
    elements = list(step.elements)
    if step.target is not None and step.target.bbox is not None and step.target not in elements:
        elements.append(step.target)  # imports often give the acted-on box only
    out, seen = [], set()
    for e in elements:
        key = (e.role, e.name, e.bbox)
        if key in seen:  # the same element listed twice (tree and target)
            continue
        seen.add(key)
        out.append(judge(e, imported))
    return out


def size_bucket(bbox, frame: tuple[int, int]) -> str:
    x0, y0, x1, y1 = bbox
    area = (x1 - x0) * (y1 - y0)
    side = min((x1 - x0) * frame[0], (y1 - y0) * frame[1])
    if area < SMALL_AREA or side < SMALL_SIDE_PX:
        return "small"
    return "medium" if area < MEDIUM_AREA else "large"


def element_key(signature: str, element: Element) -> tuple:
    """The same element on near-duplicate screens: screen signature, role, name, box to 0.01."""
    return (signature, element.role, element.name, tuple(round(c, 2) for c in element.bbox))
