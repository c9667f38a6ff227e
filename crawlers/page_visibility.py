"""The visibility record of a phone screen's elements, from its page source.

Native Android / iOS page sources cannot be hit-tested live as a page can
(crawlers.visibility): the nearest equivalent is read from the normalised tree.
Subtrees the source marks displayed="false" / visible="false" are gone already
(the parsers skip them). Then, in drawing order (document order: a later
sibling, and a later window of the dump, draws over an earlier one; a child
over its parent), the view that takes a point is the last node whose box holds
it. Probe points (centre and 25% / 75% inner points) off the screen miss.
`modal_covered`: the centre goes to a node of another window (a later root of
the dump or a later child of the root: a dialog, a system overlay) or inside a
dialog/alertdialog/alert node that does not hold the element.

HTML sources (Chromium through Appium) are measured in the page instead, by
STAMP_BOXES_JS (data-tf-vis), which runs crawlers.visibility's probe on each element.
"""

from __future__ import annotations

from schemas.records import Visibility

from .page_nodes import Node

_POINTS = ((0.5, 0.5), (0.25, 0.25), (0.75, 0.25), (0.25, 0.75), (0.75, 0.75))
_MODAL_ROLES = frozenset({"dialog", "alertdialog", "alert"})


def measure_nodes(roots: list[Node], width: float, height: float) -> None:
    """Set `visibility` on every boxed node of the trees (screen: width x height units)."""
    # node, ancestor ids, window: (root index, index of the root's child); XCUITest
    # puts its windows under one application root, UiAutomator2 one root each.
    order: list[tuple[Node, tuple[int, ...], tuple]] = []

    def walk(n: Node, ancestors: tuple[int, ...], window: tuple) -> None:
        order.append((n, ancestors, window))
        for i, c in enumerate(n.children):
            walk(c, ancestors + (id(n),), window if len(window) > 1 else window + (i,))

    for w, r in enumerate(roots):
        walk(r, (), (w,))
    boxed = [(n, anc, w) for n, anc, w in order if n.box is not None]

    def taker(x: float, y: float):
        for n, anc, w in reversed(boxed):
            bx, by, bw, bh = n.box
            if bx <= x < bx + bw and by <= y < by + bh:
                return n, anc, w
        return None

    for n, _anc, w in boxed:
        x, y, bw, bh = n.box
        ix = max(0.0, min(x + bw, width) - max(x, 0.0))
        iy = max(0.0, min(y + bh, height) - max(y, 0.0))
        area = bw * bh
        hits, centre, modal = 0, False, False
        for i, (fx, fy) in enumerate(_POINTS):
            px, py = x + fx * bw, y + fy * bh
            if not (0 <= px < width and 0 <= py < height):
                continue
            got = taker(px, py)
            ok = got is not None and (got[0] is n or id(n) in got[1])
            hits += ok
            if i == 0:
                centre = ok
                if not ok and got is not None:
                    modal = (got[2] != w and len(got[2]) > 1) or _in_foreign_dialog(got, n, boxed)
        n.visibility = Visibility(
            on_screen=ix * iy > 0,
            visible_fraction=min(1.0, ix * iy / area) if area > 0 else 0.0,
            hit_fraction=hits / len(_POINTS),
            centre_hit=centre,
            modal_covered=modal,
        )


def _in_foreign_dialog(got, element: Node, boxed) -> bool:
    """The taker lies in a dialog node that is not the element's ancestor."""
    by_id = {id(n): (n, anc) for n, anc, _ in boxed}
    mine = set(by_id.get(id(element), (None, ()))[1])
    for a in got[1] + (id(got[0]),):
        node = by_id.get(a, (None,))[0]
        if node is not None and node.role in _MODAL_ROLES and a not in mine:
            return True
    return False
