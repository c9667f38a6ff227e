"""The visibility record of every element, measured by hit-testing the live page.

For each element the page is asked, at the box's centre and at four inner
points (25% / 75% of the box), what `document.elementFromPoint` returns
(descending into open shadow roots), and whether that is the element itself or
a descendant. The box against the visual viewport gives `on_screen` and
`visible_fraction`; `modal_covered` says the centre hit-tests into a
[role=dialog], [role=alertdialog], [aria-modal=true], <dialog open> or a
position:fixed layer that does not contain the element. Probe points outside
the visual viewport count as misses (a click there lands nowhere).

Identity: the aria snapshot's nodes are not DOM nodes, and the refs it prints
([ref=e12]) live in Playwright's utility world, which page scripts cannot
read; resolving them one by one (`page.locator("aria-ref=e12")`) costs a round
trip per element. Playwright's box is `Math.round` of the element's
getBoundingClientRect at snapshot time, so one walk over the DOM (open shadow
roots included, at most MAX_SCANNED elements) keys every element by its
rounded rect, and each node takes the candidate with that key, preferring one
whose implicit ARIA role matches and, among nested candidates, the innermost
(a hit on the innermost is a hit on every candidate around it; the other way
round it is not). A node no element matches (iframe content: its boxes are in
the frame's own viewport and its DOM is not walked; a DOM changed since the
snapshot) gets hit_fraction 0 and centre_hit False: never a target.

Elements of the clickables scan (crawlers.web_clickables) are DOM nodes
already: the scan calls the same `probe` function in its own round trip.
"""

from __future__ import annotations

import json

from schemas.a11y import AriaNode
from schemas.records import Visibility

# Elements walked per observation at most (as the clickables scan).
MAX_SCANNED = 20000

# probe(el, x, y, w, h) -> [on_screen, visible_fraction, hit_fraction, centre_hit,
# modal_covered]; x, y, w, h in CSS px of the layout viewport (the aria boxes' frame);
# el may be null (unresolved: every probe misses).
PROBE_JS = r"""(() => {
  const vv = window.visualViewport;
  const vx0 = vv ? vv.offsetLeft : 0, vy0 = vv ? vv.offsetTop : 0;
  const vx1 = vx0 + (vv ? vv.width : innerWidth), vy1 = vy0 + (vv ? vv.height : innerHeight);
  const POINTS = [[0.5, 0.5], [0.25, 0.25], [0.75, 0.25], [0.25, 0.75], [0.75, 0.75]];
  const MODAL = '[role=dialog],[role=alertdialog],[aria-modal=true],dialog[open]';
  const up = n => n.parentNode || n.host || null;   // composed: out of a shadow root
  const within = (el, n) => { for (; n; n = up(n)) if (n === el) return true; return false; };
  const deepHit = (x, y) => {
    let h = document.elementFromPoint(x, y);
    while (h && h.shadowRoot) {
      const inner = h.shadowRoot.elementFromPoint(x, y);
      if (!inner || inner === h) break;
      h = inner;
    }
    return h;
  };
  const overlayOf = n => {
    for (; n; n = up(n)) {
      if (n.nodeType !== 1) continue;
      if (n.matches(MODAL) || getComputedStyle(n).position === 'fixed') return n;
    }
    return null;
  };
  return (el, x, y, w, h) => {
    const ix = Math.max(0, Math.min(x + w, vx1) - Math.max(x, vx0));
    const iy = Math.max(0, Math.min(y + h, vy1) - Math.max(y, vy0));
    const area = w * h, frac = area > 0 ? Math.min(1, (ix * iy) / area) : 0;
    let hits = 0, centre = false, modal = false;
    for (let i = 0; i < POINTS.length; i++) {
      const px = x + POINTS[i][0] * w, py = y + POINTS[i][1] * h;
      if (px < vx0 || py < vy0 || px >= vx1 || py >= vy1) continue;
      const hit = deepHit(px, py);
      const ok = !!(el && hit && within(el, hit));
      if (ok) hits++;
      if (i === 0) {
        centre = ok;
        if (!ok && hit) { const o = overlayOf(hit); modal = !!o && !(el && within(o, el)); }
      }
    }
    return [ix * iy > 0, frac, hits / POINTS.length, centre, modal];
  };
})()"""

# The implicit ARIA role of common elements: enough to tell apart the nested
# elements that share one rounded box (a <li> and the <a> filling it).
_ROLE_JS = r"""(el) => {
  const r = el.getAttribute('role');
  if (r) return r.trim().split(/\s+/)[0];
  const t = el.localName;
  if (t === 'a' || t === 'area') return el.hasAttribute('href') ? 'link' : 'generic';
  if (t === 'input') {
    const ty = (el.getAttribute('type') || 'text').toLowerCase();
    return {checkbox: 'checkbox', radio: 'radio', range: 'slider', number: 'spinbutton',
            search: 'searchbox', button: 'button', submit: 'button', reset: 'button',
            image: 'button'}[ty] || 'textbox';
  }
  if (t === 'select') return (el.multiple || el.size > 1) ? 'listbox' : 'combobox';
  if (/^h[1-6]$/.test(t)) return 'heading';
  const M = {button: 'button', textarea: 'textbox', img: 'img', ul: 'list', ol: 'list',
    menu: 'list', li: 'listitem', nav: 'navigation', main: 'main', header: 'banner',
    footer: 'contentinfo', aside: 'complementary', form: 'form', table: 'table', tr: 'row',
    td: 'cell', th: 'columnheader', p: 'paragraph', dialog: 'dialog', option: 'option',
    article: 'article', details: 'group', fieldset: 'group', hr: 'separator',
    progress: 'progressbar', summary: 'button', search: 'search', section: 'region',
    strong: 'strong', em: 'emphasis', code: 'code', blockquote: 'blockquote',
    figure: 'figure', label: 'generic', svg: 'img'};
  return M[t] || 'generic';
}"""

# a = {nodes: JSON of [[x, y, w, h, role], ...], maxScanned} -> JSON of {rows: [probe row
# per node], stats}. JSON strings both ways: Playwright serialises a nested argument or
# result value by value, ~10 ms for 150 elements, against ~0.1 ms for one string.
MEASURE_JS = f"""(a) => {{
  a = {{...a, nodes: JSON.parse(a.nodes)}};
  const probe = {PROBE_JS};
  const roleOf = {_ROLE_JS};
  const key = (x, y, w, h) => x + ',' + y + ',' + w + ',' + h;
  const want = new Map();
  for (const n of a.nodes) want.set(key(n[0], n[1], n[2], n[3]), []);
  let scanned = 0;
  const roots = [document];
  while (roots.length && scanned < a.maxScanned) {{
    const all = roots.shift().querySelectorAll('*');
    for (let i = 0; i < all.length && scanned < a.maxScanned; i++) {{
      const el = all[i];
      scanned++;
      if (el.shadowRoot) roots.push(el.shadowRoot);
      const r = el.getBoundingClientRect();
      const list = want.get(key(Math.round(r.x), Math.round(r.y), Math.round(r.width),
                                Math.round(r.height)));
      if (list) list.push(el);
    }}
  }}
  const up = n => n.parentNode || n.host || null;
  const within = (el, n) => {{ for (; n; n = up(n)) if (n === el) return true; return false; }};
  const used = new Set();
  let unresolved = 0, ambiguous = 0;
  const rows = a.nodes.map(n => {{
    const cands = want.get(key(n[0], n[1], n[2], n[3]));
    let pool = cands.filter(e => !used.has(e));
    const same = pool.filter(e => roleOf(e) === n[4]);
    if (same.length) pool = same;
    const inner = pool.filter(e => !pool.some(o => o !== e && within(e, o)));
    if (inner.length > 1) ambiguous++;
    const el = inner.length ? inner[0] : null;
    if (el) used.add(el); else unresolved++;
    return probe(el, n[0], n[1], n[2], n[3]);
  }});
  return JSON.stringify({{rows, stats: {{scanned, unresolved, ambiguous}}}});
}}"""


def boxed_nodes(nodes: list[AriaNode]) -> list[AriaNode]:
    """The nodes that become Elements (schemas.a11y.to_elements keeps the same ones)."""
    return [n for n in nodes if n.box is not None and n.box[2] > 0 and n.box[3] > 0]


def measure_args(nodes: list[AriaNode]) -> dict:
    return {"nodes": json.dumps([[*n.box, n.role] for n in nodes]), "maxScanned": MAX_SCANNED}


def measure_result(raw) -> tuple[list | None, dict | None]:
    """MEASURE_JS's answer as (rows, stats); (None, None) for anything else."""
    try:
        res = json.loads(raw)
        return res["rows"], res["stats"]
    except (TypeError, ValueError, KeyError):
        return None, None


def visibility_from_row(row) -> Visibility | None:
    """A probe row [on_screen, visible_fraction, hit_fraction, centre_hit, modal_covered]
    as a Visibility; None for a row that is not one (a page that broke a builtin)."""
    try:
        on, frac, hit, centre, modal = row
        return Visibility(
            on_screen=bool(on),
            visible_fraction=min(1.0, max(0.0, float(frac))),
            hit_fraction=min(1.0, max(0.0, float(hit))),
            centre_hit=bool(centre),
            modal_covered=bool(modal),
        )
    except (TypeError, ValueError):
        return None


def with_visibility(elements: list, rows: list | None) -> list:
    """The elements, each with the visibility of its row (rows align one to one);
    unchanged (visibility None: not measured) when the rows do not align."""
    if not rows or len(rows) != len(elements):
        return elements
    return [e.model_copy(update={"visibility": visibility_from_row(r)}) for e, r in zip(elements, rows)]
