"""An action drawn over its screenshot: SVG shapes in the screenshot's pixels.

Pure geometry, no HTML: `shapes(action, target, width, height)` returns plain
dicts that the trajectory template turns into SVG elements. Coordinates in a
sample are normalised to [0, 1]; the SVG's viewBox is the image's pixel size,
so circles stay round whatever the page's zoom.
"""

from __future__ import annotations

from typing import Any

# How far a scroll arrow reaches, as a share of the screen's side.
SCROLL_REACH = 0.3
_SCROLL_DIR = {"up": (0, -1), "down": (0, 1), "left": (-1, 0), "right": (1, 0)}
# Actions drawn as a point; the others get a label at the top.
_POINT_KINDS = {"tap", "right_click", "double_tap", "long_press", "select"}
_MAX_LABEL = 80


def _clip(v: float) -> float:
    return min(max(float(v), 0.0), 1.0)


def _label(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= _MAX_LABEL else text[: _MAX_LABEL - 1] + "…"


def shapes(
    action: dict[str, Any] | None, target: dict[str, Any] | None, width: int, height: int
) -> list[dict[str, Any]]:
    """The shapes for one step, target box first so markers sit on top.

    Kinds: `box` (target element), `circle` (tap point; `ring` for a long
    press), `arrow` (swipe, scroll), `label` (typed text and point-less
    actions). Each carries `action` (the action type) for styling and tests.
    """
    w, h = float(width), float(height)
    # The page shows every screenshot at one width, so sizes follow the width:
    # about 12 px markers and 16 px text on screen whatever the resolution.
    r = w / 40
    font = w / 30
    out: list[dict[str, Any]] = []
    bbox = (target or {}).get("bbox")
    if bbox and len(bbox) == 4:
        x0, y0, x1, y1 = (_clip(c) for c in bbox)
        out.append(
            {
                "kind": "box",
                "action": "target",
                "x": x0 * w,
                "y": y0 * h,
                "w": (x1 - x0) * w,
                "h": (y1 - y0) * h,
                "title": f"{target.get('role', '')} {target.get('name', '')}".strip(),
            }
        )
    if not action:
        return out
    kind = str(action.get("type", ""))
    x, y = action.get("x"), action.get("y")
    has_point = x is not None and y is not None
    px, py = (_clip(x) * w, _clip(y) * h) if has_point else (w / 2, h / 2)

    if kind in _POINT_KINDS and has_point:
        out.append({"kind": "circle", "action": kind, "cx": px, "cy": py, "r": r})
        if kind == "long_press":
            out.append({"kind": "ring", "action": kind, "cx": px, "cy": py, "r": r * 1.9})
        elif kind == "double_tap":
            out.append({"kind": "ring", "action": kind, "cx": px, "cy": py, "r": r * 1.4})
        if kind == "select" and action.get("text"):
            out.append(_text(kind, _label(action["text"]), px, py, r, w, h, font))
    elif kind == "swipe" and has_point and action.get("x2") is not None:
        out.append(
            {
                "kind": "arrow",
                "action": kind,
                "x1": px,
                "y1": py,
                "x2": _clip(action["x2"]) * w,
                "y2": _clip(action["y2"]) * h,
            }
        )
    elif kind == "scroll":
        dx, dy = _SCROLL_DIR.get(str(action.get("direction")), (0, 1))
        reach = SCROLL_REACH * (w if dx else h)
        # Keep the arrow on screen: start it back from the point if it would leave.
        sx = min(max(px, reach if dx < 0 else 0), w - reach if dx > 0 else w)
        sy = min(max(py, reach if dy < 0 else 0), h - reach if dy > 0 else h)
        out.append(
            {
                "kind": "arrow",
                "action": kind,
                "x1": sx,
                "y1": sy,
                "x2": sx + dx * reach,
                "y2": sy + dy * reach,
            }
        )
    elif kind == "type":
        text = _label(f"⌨ {action.get('text', '')}")
        if has_point:
            out.append({"kind": "circle", "action": kind, "cx": px, "cy": py, "r": r * 0.6})
            out.append(_text(kind, text, px, py, r, w, h, font))
        else:
            out.append(_top(kind, text, w, font))
    else:  # key, back, home, wait, answer, open_app, done, take_over...
        word = kind.replace("_", " ")
        text = f"{word}: {action['text']}" if action.get("text") else word
        out.append(_top(kind, _label(text), w, font))
        if has_point:  # a point-less kind that still names a point
            out.append({"kind": "circle", "action": kind, "cx": px, "cy": py, "r": r})
    return out


def _text(
    kind: str, text: str, px: float, py: float, r: float, w: float, h: float, font: float
) -> dict[str, Any]:
    """A label beside a point: below it, or above it near the bottom edge."""
    below = py + r + font * 1.2
    y = below if below < h - font * 0.3 else py - r - font * 0.4
    anchor = "start" if px < w * 0.5 else "end"
    x = max(px - r, 2.0) if anchor == "start" else min(px + r, w - 2.0)
    return {"kind": "label", "action": kind, "x": x, "y": y, "text": text, "anchor": anchor, "font": font}


def _top(kind: str, text: str, w: float, font: float) -> dict[str, Any]:
    return {
        "kind": "label",
        "action": kind,
        "x": 4.0,
        "y": font * 1.3,
        "text": text,
        "anchor": "start",
        "font": font,
    }


def grounding_shapes(samples: list[dict[str, Any]], width: int, height: int) -> list[dict[str, Any]]:
    """A grounding record's targets: per element its box (titled with every expression),
    its point, and its first expression as a label; action "ground" for styling."""
    w, h = float(width), float(height)
    r, font = w / 80, w / 45
    by_box: dict[tuple, list[dict]] = {}
    for s in samples:
        by_box.setdefault(tuple(s.get("box_norm") or ()), []).append(s)
    out: list[dict[str, Any]] = []
    for box, group in by_box.items():
        if len(box) != 4:
            continue
        x0, y0, x1, y1 = (_clip(c) for c in box)
        out.append(
            {
                "kind": "box",
                "action": "target",
                "x": x0 * w,
                "y": y0 * h,
                "w": (x1 - x0) * w,
                "h": (y1 - y0) * h,
                "title": " | ".join(f"{s.get('kind')}: {s.get('expression')}" for s in group),
            }
        )
        px, py = (_clip(c) for c in group[0].get("point_norm", ((x0 + x1) / 2, (y0 + y1) / 2)))
        out.append({"kind": "circle", "action": "ground", "cx": px * w, "cy": py * h, "r": r})
        out.append(_text("ground", _label(group[0].get("expression", "")), px * w, py * h, r, w, h, font))
    return out
