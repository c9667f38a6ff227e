"""HTML page sources (a browser's DOM after `STAMP_BOXES_JS`) -> normalised nodes.

HTML (the browser's page source after `STAMP_BOXES_JS`; boxes in CSS px of
the viewport, from data-tf-box): role from `role=` or the tag (a[href] link,
button, input by type, select combobox, textarea textbox, img img, h1-h6
heading [level=n], nav navigation, main main, header banner, footer
contentinfo, aside complementary, ul/ol list, li listitem, p paragraph, dialog
dialog, table/tr/td/th, named section region, named form form). Name:
aria-labelledby, aria-label, alt / label[for] / wrapping label / button value,
the content for roles named from content, title, placeholder. States:
checked, selected, expanded, pressed, disabled, focused, level. Skipped:
`hidden` and aria-hidden="true" subtrees, script/style/template/noscript/head,
and elements without a box (their children still count). Text that no named
control absorbs becomes `text` lines with their element's box.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

from schemas.records import Visibility

from .page_nodes import (
    ACTIONABLE_ROLES,
    NAMED_FROM_CONTENT,
    Box,
    Node,
    PageSourceError,
    absorb,
    clean_text,
    is_quiet,
)
from .visibility import PROBE_JS, visibility_from_row

# Run through `driver.execute_script` (a function body); returns the visible
# viewport's [width, height] in CSS px (innerWidth/innerHeight unless the page
# is pinch-zoomed). Stamps, on every element, what the serialised DOM would
# otherwise not say: its box when it is rendered and visible
# (data-tf-box="x,y,w,h", CSS px from the visible top-left, 0.1 px), the
# live value of fields (data-tf-value; passwords masked), the live checked
# state (data-tf-checked: the `checked` attribute only holds the initial one)
# and focus (data-tf-focus), and the visibility record of each boxed element
# (data-tf-vis="on_screen,visible_fraction,hit_fraction,centre_hit,modal_covered",
# hit-tested on the node itself by crawlers.visibility.PROBE_JS). Stale stamps are
# removed; unchanged ones are not rewritten, so pages watching their DOM see no churn.
STAMP_BOXES_JS = (
    r"""
const probe = """
    + PROBE_JS
    + r""";
const r1 = v => Math.round(v * 10) / 10;
// Boxes relative to what the screen shows: the visual viewport (the layout
// viewport unless the page is zoomed), so box / size is the screenshot's [0, 1].
const vv = window.visualViewport;
const ox = vv ? vv.offsetLeft : 0, oy = vv ? vv.offsetTop : 0;
const focus = document.activeElement;
const put = (el, name, v) => {
  if (v === null) { if (el.hasAttribute(name)) el.removeAttribute(name); }
  else if (el.getAttribute(name) !== v) el.setAttribute(name, v);
};
for (const el of document.querySelectorAll('*')) {
  const r = el.getBoundingClientRect();
  let box = null, value = null, checked = null, vis = null;
  if (r.width > 0 && r.height > 0 &&
      el.checkVisibility({visibilityProperty: true, opacityProperty: true})) {
    box = [r.x - ox, r.y - oy, r.width, r.height].map(r1).join(',');
    vis = probe(el, r.x, r.y, r.width, r.height).map(v => typeof v === 'boolean' ? +v :
                                                     Math.round(v * 1000) / 1000).join(',');
  }
  if (el.tagName === 'INPUT') {
    if (el.type === 'checkbox' || el.type === 'radio') {
      checked = el.indeterminate ? 'mixed' : String(el.checked);
    } else {
      value = el.type === 'password' ? '\u2022'.repeat(el.value.length) : el.value;
    }
  } else if (el.tagName === 'TEXTAREA') {
    value = el.value;
  } else if (el.tagName === 'SELECT') {
    const o = el.selectedOptions[0];
    value = o ? o.label : '';
  }
  put(el, 'data-tf-box', box);
  put(el, 'data-tf-vis', vis);
  put(el, 'data-tf-value', value);
  put(el, 'data-tf-checked', checked);
  put(el, 'data-tf-focus', el === focus && el !== document.body ? '' : null);
}
return vv ? [vv.width, vv.height] : [window.innerWidth, window.innerHeight];
"""
)

_VOID = frozenset(
    {
        "area",
        "base",
        "br",
        "col",
        "embed",
        "hr",
        "img",
        "input",
        "link",
        "meta",
        "param",
        "source",
        "track",
        "wbr",
    }
)
_SKIP_TAGS = frozenset({"script", "style", "template", "noscript", "head"})
_FORM_CONTROLS = frozenset({"input", "select", "textarea", "button"})
_INPUT_ROLES = {
    "search": "searchbox",
    "checkbox": "checkbox",
    "radio": "radio",
    "range": "slider",
    "submit": "button",
    "button": "button",
    "reset": "button",
    "image": "button",
    "file": "button",
    "hidden": None,
}
_TAG_ROLES = {
    "button": "button",
    "textarea": "textbox",
    "nav": "navigation",
    "main": "main",
    "header": "banner",
    "footer": "contentinfo",
    "aside": "complementary",
    "article": "article",
    "ul": "list",
    "ol": "list",
    "menu": "list",
    "li": "listitem",
    "dialog": "dialog",
    "table": "table",
    "tr": "row",
    "td": "cell",
    "th": "columnheader",
    "p": "paragraph",
    "option": "option",
    "fieldset": "group",
    "progress": "progressbar",
    "meter": "meter",
    "hr": "separator",
    "figure": "figure",
    "blockquote": "blockquote",
    "output": "status",
}
_NUMBER_LIST = re.compile(r"\s*-?\d+(\.\d+)?\s*(,\s*-?\d+(\.\d+)?\s*){3}")


@dataclass
class _El:
    tag: str
    attrs: dict[str, str]
    parent: _El | None
    children: list = field(default_factory=list)  # _El | str


class _DomBuilder(HTMLParser):
    """A forgiving tree builder: void elements, stray end tags, unclosed tags."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = _El("#document", {}, None)
        self.stack = [self.root]
        self.by_id: dict[str, _El] = {}
        self.labels_for: dict[str, _El] = {}

    def handle_starttag(self, tag, attrs):
        d: dict[str, str] = {}
        for k, v in attrs:
            d.setdefault(k, v or "")  # the first of a duplicated attribute wins
        el = _El(tag, d, self.stack[-1])
        self.stack[-1].children.append(el)
        if "id" in d:
            self.by_id.setdefault(d["id"], el)
        if tag == "label" and d.get("for"):
            self.labels_for.setdefault(d["for"], el)
        if tag not in _VOID:
            self.stack.append(el)

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in _VOID:
            self.stack.pop()

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data):
        self.stack[-1].children.append(data)


def _html_path(el: _El) -> str:
    parts = []
    while el.parent is not None:
        same = [c for c in el.parent.children if isinstance(c, _El) and c.tag == el.tag]
        part = f"{el.tag}[{same.index(el) + 1}]"
        if el.attrs.get("id"):
            part += f"(#{el.attrs['id']})"
        parts.append(part)
        el = el.parent
    return "/" + "/".join(reversed(parts))


def _html_box(el: _El) -> Box | None:
    raw = el.attrs.get("data-tf-box")
    if raw is None or not raw.strip():
        return None
    if not _NUMBER_LIST.fullmatch(raw):
        raise PageSourceError(
            "html",
            "expected data-tf-box like x,y,w,h (numbers)",
            path=_html_path(el),
            attribute="data-tf-box",
            value=raw,
        )
    x, y, w, h = (float(p) for p in raw.split(","))
    if w < 0 or h < 0:
        raise PageSourceError(
            "html", "negative size", path=_html_path(el), attribute="data-tf-box", value=raw
        )
    return (x, y, w, h) if w > 0 and h > 0 else None


_VIS = re.compile(r"\s*\d+(\.\d+)?\s*(,\s*\d+(\.\d+)?\s*){4}")


def _html_vis(el: _El) -> Visibility | None:
    """data-tf-vis (STAMP_BOXES_JS) as a Visibility; None on a source stamped without it."""
    raw = el.attrs.get("data-tf-vis")
    if raw is None or not raw.strip():
        return None
    got = visibility_from_row([float(v) for v in raw.split(",")]) if _VIS.fullmatch(raw) else None
    if got is None:
        raise PageSourceError(
            "html",
            "expected data-tf-vis like 1,1,0.8,1,0 (five numbers)",
            path=_html_path(el),
            attribute="data-tf-vis",
            value=raw,
        )
    return got


def _dom_text(el: _El, skip: _El | None = None) -> str:
    """Text of a subtree as written (for labels), form controls and hidden parts left out."""
    out = []
    for c in el.children:
        if isinstance(c, str):
            out.append(c)
        elif (
            c is not skip
            and c.tag not in _SKIP_TAGS
            and c.tag not in _FORM_CONTROLS
            and "hidden" not in c.attrs
            and c.attrs.get("aria-hidden") != "true"
        ):
            out.append(c.attrs.get("alt", "") if c.tag == "img" else _dom_text(c, skip))
    return clean_text(" ".join(out))


def _html_role(el: _El) -> str | None:
    """The element's role; None for elements that are not part of the tree."""
    explicit = el.attrs.get("role", "").split()
    if explicit:
        return "generic" if explicit[0] in ("presentation", "none") else explicit[0].lower()
    t, a = el.tag, el.attrs
    if t in ("a", "area"):
        return "link" if "href" in a else "generic"
    if t == "input":
        return _INPUT_ROLES.get(a.get("type", "text").lower(), "textbox")
    if t == "select":
        size = a.get("size", "1").strip()
        return "listbox" if "multiple" in a or (size.isdigit() and int(size) > 1) else "combobox"
    if t == "img":
        return "generic" if a.get("alt") == "" else "img"
    if len(t) == 2 and t[0] == "h" and t[1] in "123456":
        return "heading"
    if t in ("section", "form"):
        named = a.get("aria-label") or a.get("aria-labelledby") or a.get("title")
        return ("region" if t == "section" else "form") if named else "generic"
    return _TAG_ROLES.get(t, "generic")


def _html_label(el: _El, role: str, b: _DomBuilder) -> str:
    """The name from aria-labelledby, aria-label and native labels (not content/title)."""
    a = el.attrs
    ids = a.get("aria-labelledby", "").split()
    if ids:
        name = clean_text(" ".join(_dom_text(b.by_id[i]) for i in ids if i in b.by_id))
        if name:
            return name
    if clean_text(a.get("aria-label")):
        return clean_text(a["aria-label"])
    if el.tag in ("img", "area") or (el.tag == "input" and a.get("type") == "image"):
        return clean_text(a.get("alt"))
    if el.tag == "input" and a.get("type", "").lower() in ("submit", "reset", "button"):
        default = {"submit": "Submit", "reset": "Reset"}.get(a["type"].lower(), "")
        return clean_text(a.get("value")) or default
    if el.tag in _FORM_CONTROLS - {"button"} or el.tag in ("meter", "progress"):
        label = b.labels_for.get(a.get("id", "")) if a.get("id") else None
        p = el.parent
        while label is None and p is not None:
            label = p if p.tag == "label" else None
            p = p.parent
        if label is not None:
            return _dom_text(label, skip=el)
    if el.tag == "fieldset":
        legend = next((c for c in el.children if isinstance(c, _El) and c.tag == "legend"), None)
        return _dom_text(legend) if legend else ""
    return ""


def _html_states(el: _El, role: str) -> list[str]:
    a, states = el.attrs, []
    if role == "heading":
        level = a.get("aria-level") or (el.tag[1] if el.tag[:1] == "h" and len(el.tag) == 2 else "2")
        states.append(f"level={level}")
    if el.tag == "input" and a.get("type", "").lower() in ("checkbox", "radio"):
        checked = a.get("data-tf-checked", "true" if "checked" in a else "false")
    else:
        checked = a.get("aria-checked", "false")
    if checked in ("true", "mixed"):
        states.append("checked" if checked == "true" else "checked=mixed")
    if a.get("aria-selected") == "true":
        states.append("selected")
    if ("disabled" in a and el.tag in _FORM_CONTROLS | {"option", "fieldset"}) or a.get(
        "aria-disabled"
    ) == "true":
        states.append("disabled")
    if a.get("aria-expanded") == "true":
        states.append("expanded")
    if a.get("aria-pressed") in ("true", "mixed"):
        states.append("pressed" if a["aria-pressed"] == "true" else "pressed=mixed")
    if "data-tf-focus" in a:
        states.append("focused")
    return states


def _html_value(el: _El, role: str) -> str | None:
    a = el.attrs
    if el.tag == "textarea":
        v = a.get("data-tf-value", _dom_text(el))
    elif el.tag == "select":
        v = a.get("data-tf-value")
        if v is None:
            opts = [c for c in el.children if isinstance(c, _El) and c.tag == "option"]
            chosen = next((o for o in opts if "selected" in o.attrs), opts[0] if opts else None)
            v = _dom_text(chosen) if chosen else ""
    elif el.tag == "input" and role in ("textbox", "searchbox", "slider", "spinbutton"):
        v = a.get("data-tf-value", a.get("value", ""))
        if a.get("type", "").lower() == "password" and "data-tf-value" not in a:
            v = "\u2022" * len(v)  # never put a password into the tree
    else:
        return None
    return clean_text(v) or None


def _html_nodes(el: _El, b: _DomBuilder) -> list[Node]:
    a = el.attrs
    if el.tag in _SKIP_TAGS or "hidden" in a or a.get("aria-hidden") == "true":
        return []
    box = _html_box(el)
    vis = _html_vis(el) if box is not None else None
    role = _html_role(el)
    if role is None:
        return []
    if el.tag == "svg":  # drawn, not read: an image when named, else nothing
        name = _html_label(el, "img", b) or clean_text(a.get("title"))
        return [Node("img", name=name, box=box, visibility=vis)] if box and name else []
    children: list[Node] = []
    if el.tag not in ("textarea", "select"):  # their content is their value
        for c in el.children:
            if isinstance(c, _El):
                children += _html_nodes(c, b)
            elif box is not None and clean_text(c):  # text shows only inside a rendered box
                children.append(Node("text", name=clean_text(c), box=box, visibility=vis))
    if box is None:
        return children  # not rendered itself (display: contents, zero size): children move up

    node = Node(
        role,
        name=_html_label(el, role, b),
        box=box,
        states=_html_states(el, role),
        children=children,
        visibility=vis,
    )
    if role in NAMED_FROM_CONTENT or (role in ACTIONABLE_ROLES and node.name):
        absorb(node)
    if not node.name:
        node.name = clean_text(a.get("title"))
    if not node.name and role in ("textbox", "searchbox", "spinbutton"):
        node.name = clean_text(a.get("placeholder"))
    value = _html_value(el, role)
    if value and value != node.name:
        node.value = value
    if role == "link":
        node.url = clean_text(a.get("href"))
    # Text-only content reads as one run, as Playwright prints `paragraph: text`.
    if (
        node.children
        and all(c.role == "text" and not c.children for c in node.children)
        and role not in ACTIONABLE_ROLES
    ):
        text = clean_text(" ".join(c.name for c in node.children))
        if is_quiet(node):
            return [Node("text", name=text, box=box)]
        node.value, node.children = text, []
    return [node]


def parse_html(source: str | bytes) -> list[Node]:
    """A browser's page source (after STAMP_BOXES_JS) -> nodes (boxes in CSS px)."""
    if isinstance(source, bytes):
        source = source.decode("utf-8", errors="replace")
    b = _DomBuilder()
    b.feed(source)
    b.close()
    return [n for c in b.root.children if isinstance(c, _El) for n in _html_nodes(c, b)]
