"""Clickable elements the accessibility tree misses, recorded with role "clickable".

Third-party pages make spans and divs clickable with a JS listener or an
`onclick` and give them no role, so the aria snapshot shows them as bare text
(or as a `generic`, which says nothing about clicking). The observation adds
them to its element list as `Element(role="clickable", name=<their text>)`:

- `LISTENER_MARK_JS`, an init script installed once per browser context
  (`install_listener_marks`), wraps `EventTarget.prototype.addEventListener` and
  remembers (in a WeakSet) the elements that get a click, mousedown, mouseup,
  pointerdown, pointerup, touchstart or touchend listener. Listeners added
  before it ran (none: it runs before the page's scripts) or in a frame other
  than the main one are not seen.
- `SCAN_JS`, one `page.evaluate` per observation, lists the visible elements
  (non-zero box inside the visual viewport, `checkVisibility`, not covered at
  their centre) that are marked, have an `onclick`/`onmousedown`/
  `onpointerdown`/`ontouchstart` handler (attribute or property), or are the
  outermost element of a `cursor: pointer` run. Native controls (links,
  buttons, inputs, elements with an interactive ARIA role) and what is inside
  them are skipped: the tree has them already. Elements covering 90% or more of
  the viewport (delegation roots, page wrappers) are skipped. At most
  `MAX_CLICKABLES` come back, in document order.
- `merge_clickables` keeps one only when the aria elements hold no interactive
  element (INTERACTIVE_ROLES) at about the same box (IoU >= 0.8); a `generic`
  or `paragraph` at that box does not count, since the walk could not tell it
  is clickable. Boxes come from getBoundingClientRect, the frame of the
  aria-snapshot boxes, and go through the same zoom mapping (a11y.to_elements),
  so they match the screenshot on zoomed-out mobile pages too.
- Each row carries the element's visibility record, measured in the same scan
  on the DOM node itself (crawlers.visibility.PROBE_JS).
"""

from __future__ import annotations

from schemas.a11y import AriaNode, to_elements
from schemas.records import Element

from .visibility import PROBE_JS, visibility_from_row

CLICKABLE_ROLE = "clickable"
MAX_CLICKABLES = 50
# Elements scanned per observation at most (a huge DOM stays cheap to observe).
MAX_SCANNED = 20000

# Roles that already say "this can be acted on": a clickable at the same box is a duplicate.
INTERACTIVE_ROLES = frozenset(
    {
        "button",
        "link",
        "checkbox",
        "radio",
        "switch",
        "tab",
        "textbox",
        "searchbox",
        "combobox",
        "listbox",
        "option",
        "menuitem",
        "menuitemcheckbox",
        "menuitemradio",
        "slider",
        "spinbutton",
        "treeitem",
        "gridcell",
        "columnheader",
        "rowheader",
        "scrollbar",
        CLICKABLE_ROLE,
    }
)

_WS = "__tfClickTargets"

LISTENER_MARK_JS = """(() => {
  if (window.%(ws)s) return;
  const marked = new WeakSet();
  Object.defineProperty(window, '%(ws)s', {value: marked, enumerable: false});
  const kinds = new Set(['click', 'mousedown', 'mouseup', 'pointerdown', 'pointerup',
                         'touchstart', 'touchend']);
  const proto = EventTarget.prototype, orig = proto.addEventListener;
  const wrapped = {addEventListener(type, listener, options) {
    try { if (kinds.has(type) && this instanceof Element) marked.add(this); } catch (e) {}
    return orig.call(this, type, listener, options);
  }}.addEventListener;
  Object.defineProperty(wrapped, 'length', {value: orig.length});
  Object.defineProperty(proto, 'addEventListener', {value: wrapped, writable: true,
                                                    configurable: true, enumerable: false});
})();""" % {"ws": _WS}

# Returns [[x, y, w, h, name, visibility row], ...] in CSS px of the layout viewport
# (the aria boxes' frame).
SCAN_JS = """(opts) => {
  const probe = %(probe)s;
  const max = opts.max, maxScanned = opts.maxScanned;
  const marked = window.%(ws)s;
  const vv = window.visualViewport;
  const vx0 = vv ? vv.offsetLeft : 0, vy0 = vv ? vv.offsetTop : 0;
  const vx1 = vx0 + (vv ? vv.width : innerWidth), vy1 = vy0 + (vv ? vv.height : innerHeight);
  const bigArea = 0.9 * (vx1 - vx0) * (vy1 - vy0);
  const NATIVE = 'a[href],button,input,select,textarea,summary,option,label,[contenteditable=""],' +
    '[contenteditable=true],[role=button],[role=link],[role=checkbox],[role=radio],' +
    '[role=switch],[role=tab],[role=menuitem],[role=option],[role=combobox],[role=textbox],' +
    '[role=slider],[role=menuitemcheckbox],[role=menuitemradio],[role=treeitem]';
  const norm = s => (s || '').replace(/\\s+/g, ' ').trim();
  const nameOf = el => {
    let n = norm(el.getAttribute('aria-label')) || norm(el.getAttribute('title'));
    if (!n) n = norm(el.innerText);
    if (!n) { const img = el.querySelector('img[alt],svg title');
              if (img) n = norm(img.getAttribute('alt') || img.textContent); }
    return n.length > 80 ? n.slice(0, 80) : n;
  };
  const out = [];
  let scanned = 0;
  const roots = [document];
  while (roots.length && out.length < max && scanned < maxScanned) {
    const all = roots.shift().querySelectorAll('*');
    for (let i = 0; i < all.length && out.length < max && scanned < maxScanned; i++) {
      const el = all[i];
      scanned++;
      if (el.shadowRoot) roots.push(el.shadowRoot);
      if (el === document.documentElement || el === document.body) continue;
      const r = el.getBoundingClientRect();
      if (r.width <= 0 || r.height <= 0 || r.right <= vx0 || r.bottom <= vy0 ||
          r.left >= vx1 || r.top >= vy1 || r.width * r.height >= bigArea) continue;
      let why = marked && marked.has(el);
      if (!why) why = !!(el.onclick || el.onmousedown || el.onpointerdown || el.ontouchstart);
      if (!why) {
        const cs = getComputedStyle(el);
        if (cs.cursor !== 'pointer') continue;
        const p = el.parentElement;
        if (p && getComputedStyle(p).cursor === 'pointer') continue;  // inside a pointer run
      }
      if (el.closest(NATIVE)) continue;
      if (el.checkVisibility && !el.checkVisibility({checkOpacity: true,
                                                     checkVisibilityCSS: true})) continue;
      const cx = Math.min(Math.max((r.left + r.right) / 2, vx0), vx1 - 1);
      const cy = Math.min(Math.max((r.top + r.bottom) / 2, vy0), vy1 - 1);
      const root = el.getRootNode();
      const hit = (root.elementFromPoint ? root : document).elementFromPoint(cx, cy);
      if (hit && hit !== el && !el.contains(hit) && !hit.contains(el)) continue;  // covered
      out.push([r.left, r.top, r.width, r.height, nameOf(el),
                probe(el, r.left, r.top, r.width, r.height)]);
    }
  }
  return out;
}""" % {"ws": _WS, "probe": PROBE_JS}


def install_listener_marks(context) -> None:
    """Add the listener-marking init script to a browser context, once.

    Call it before the context's first navigation (WebEnv's `_adopt_page` does,
    for the context's first page); pages of the context created later get it too.
    """
    if getattr(context, "_tf_listener_marks", False):
        return
    context.add_init_script(script=LISTENER_MARK_JS)
    context._tf_listener_marks = True


def clickable_elements(
    rows: list, viewport_width: int, viewport_height: int, zoom: tuple[float, float, float] = (1.0, 0.0, 0.0)
) -> list[Element]:
    """SCAN_JS rows -> `clickable` elements, boxes mapped like the aria elements."""
    nodes, seen = [], []
    for row in rows or []:
        try:
            x, y, w, h = (float(v) for v in row[:4])
            name = str(row[4]) if len(row) > 4 and row[4] is not None else ""
        except (TypeError, ValueError):
            continue
        if w <= 0 or h <= 0:  # to_elements leaves these out; keep the rows aligned
            continue
        nodes.append(AriaNode(role=CLICKABLE_ROLE, name=name, box=(x, y, w, h)))
        seen.append(visibility_from_row(row[5]) if len(row) > 5 else None)
    return [
        e.model_copy(update={"visibility": v})
        for e, v in zip(to_elements(nodes, viewport_width, viewport_height, zoom), seen)
    ]


def _iou(a, b) -> float:
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def merge_clickables(
    elements: list[Element], clickables: list[Element], min_iou: float = 0.8
) -> list[Element]:
    """The aria elements, then each clickable no interactive aria element already covers."""
    taken = [e.bbox for e in elements if e.bbox is not None and e.role in INTERACTIVE_ROLES]
    out = list(elements)
    for c in clickables:
        if c.bbox is None or any(_iou(c.bbox, b) >= min_iou for b in taken):
            continue
        out.append(c)
        taken.append(c.bbox)
    return out
