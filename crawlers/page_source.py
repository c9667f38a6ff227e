"""Appium page sources -> the web's accessibility text and `Element`s.

A policy, a recorder or a filter should not care whether a screen came from
Playwright, an Android phone, an iPhone or a browser driven through Appium.
`normalise(kind, source, width, height)` turns each device's page source into
the same text form as the web (`- role "name" [state] [box=x,y,w,h]`, two
spaces per level, read back by `crawlers.a11y.parse_snapshot`) and into
`Element`s whose boxes are normalised to [0, 1] of the screen.

Android (UiAutomator2 XML; boxes in device px from `bounds="[x0,y0][x1,y1]"`),
role from the class's simple name, first match wins:

    SearchAutoComplete              searchbox
    EditText, AutoCompleteTextView  textbox (searchbox when resource-id/hint says search/搜索)
    CheckBox                        checkbox
    Switch, ToggleButton            switch
    RadioGroup / RadioButton        radiogroup / radio
    ToggleGroup, ChipGroup          group
    *Button (Image-, FloatingAction-, Material-)   button
    Spinner                         combobox
    SeekBar, RatingBar, Slider      slider
    ProgressBar                     progressbar
    TabWidget, TabLayout            tablist   (a TabWidget's children and *TabView: tab)
    RecyclerView, ListView, GridView list
    WebView                         document
    ImageView                       img
    TextView                        text      (checkable: checkbox)
    Toolbar, ActionBar              toolbar
    anything else                   generic   (with text: text; with only content-desc: group)
    heading="true" text/generic     heading
    clickable generic/text/img/group -> button
  name: content-desc, else text, else hint (fields: content-desc, hint, then
  text; a field's text that is not its label is its value). States: checked,
  selected, disabled (enabled=false), focused, password, scrollable, id=<resource-id>.
  displayed="false" subtrees are skipped.

iOS (XCUITest XML; boxes in points from x, y, width, height), by type:

    Button, Key, Icon -> button (tab inside a TabBar)   Link -> link
    TextField, SecureTextField [password], TextView -> textbox
    SearchField -> searchbox    Switch, Toggle -> switch ([checked] when value is 1)
    CheckBox -> checkbox        RadioButton -> radio    Slider -> slider
    StaticText -> text          Image -> img            Cell -> listitem
    Tab -> tab   TabBar -> tablist   NavigationBar -> region   Alert -> alert
    Sheet -> dialog   Table, CollectionView -> list   SegmentedControl -> radiogroup
    PickerWheel -> combobox   Progress/ActivityIndicator -> progressbar
    Menu / MenuItem -> menu / menuitem   Toolbar -> toolbar   WebView -> document
    Application -> application   Other, Window, ScrollView, ... -> generic (named: group)
    traits "Header" -> heading
  name: label, else (texts, images, Other) value; fields are named by label or
  placeholderValue and their value is the value. A Cell without a label is named
  by its texts, as VoiceOver reads it. WDA's `name` is the accessibility
  identifier when one is set, so it names a node only as a last resort.
  States: checked, selected, disabled, focused, password, id=<name> (when
  the identifier is not the name).
  visible="false" subtrees are skipped.

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

Shared rules: an actionable node (a button, a clickable row) speaks for its
content, as TalkBack, VoiceOver and browsers read it: it is named by its
non-actionable descendants when it has no label of its own, and only its
actionable descendants stay below it. Unnamed generic/group/text/img nodes
add nothing and are folded away (their children move up). Zero-area nodes are
dropped (their children stay). Elements are the nodes with a box and either
an actionable role or a name; their boxes are clipped to the screen where they
overlap it and kept as they are when wholly off screen (an oracle scrolls to
them).
"""
from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from html.parser import HTMLParser

import yaml

from schemas.records import Element

__all__ = ["PageSourceError", "STAMP_BOXES_JS", "Node", "ACTIONABLE_ROLES", "normalise",
           "parse_android", "parse_ios", "parse_html", "render_tree", "to_elements",
           "normalise_box", "clean_text"]

Box = tuple[float, float, float, float]   # x, y, w, h in the source's units


class PageSourceError(ValueError):
    """A page source that cannot be read; names the node's path and the attribute."""

    def __init__(self, kind: str, message: str, *, path: str | None = None,
                 attribute: str | None = None, value: str | None = None):
        where = f" at node {path}" if path else ""
        attr = f", attribute {attribute}={value!r}" if attribute else ""
        super().__init__(f"{kind} page source{where}{attr}: {message}")
        self.kind, self.path, self.attribute, self.value = kind, path, attribute, value


@dataclass
class Node:
    """One node of the normalised tree."""

    role: str
    name: str = ""
    box: Box | None = None
    states: list[str] = field(default_factory=list)   # "checked", "level=2", "id=..."
    value: str | None = None      # a field's content, or a text-only node's text
    url: str | None = None        # a link's href
    children: list[Node] = field(default_factory=list)


ACTIONABLE_ROLES = frozenset({
    "button", "link", "textbox", "searchbox", "checkbox", "switch", "radio", "combobox",
    "listbox", "slider", "spinbutton", "tab", "menuitem", "menuitemcheckbox",
    "menuitemradio", "option", "treeitem"})

# Roles whose name comes from their content when nothing labels them (ARIA).
_NAMED_FROM_CONTENT = frozenset({
    "button", "link", "checkbox", "switch", "radio", "tab", "menuitem", "menuitemcheckbox",
    "menuitemradio", "option", "treeitem", "heading", "cell", "columnheader", "rowheader",
    "tooltip"})

# Nodes of these roles say nothing when unnamed and stateless: folded away.
_QUIET_ROLES = frozenset({"generic", "group", "text", "img", "none", "presentation"})


# Control characters (and what YAML refuses) carry nothing a reader could use.
_UNPRINTABLE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x84\x86-\x9f\ud800-\udfff\ufffe\uffff]")


def clean_text(s: str | None) -> str:
    """Collapse whitespace (line breaks included: a tree line is one line), drop controls."""
    return " ".join(_UNPRINTABLE.sub("", s).split()) if s else ""


# ---------------------------------------------------------------- shared

def _content_words(node: Node, *, keep: list[Node] | None = None) -> list[str]:
    """Names of `node`'s non-actionable descendants; actionable ones go to `keep`."""
    words: list[str] = []
    for c in node.children:
        if c.role in ACTIONABLE_ROLES:
            if keep is not None:
                keep.append(c)
        elif c.name or c.value:
            words.append(c.name or c.value)
        else:
            words.extend(_content_words(c, keep=keep))
    return words


def _absorb(node: Node) -> None:
    """An actionable node reads as one: named by its content, only controls stay below."""
    kept: list[Node] = []
    words = _content_words(node, keep=kept)
    if not node.name:
        node.name = clean_text(" ".join(words))
    node.children = kept


def _has_area(box: Box | None) -> bool:
    return box is not None and box[2] > 0 and box[3] > 0


def _is_quiet(n: Node) -> bool:
    return (n.role in _QUIET_ROLES and not n.name and n.value is None and n.url is None
            and all(s.startswith("id=") for s in n.states))


def _num(v: float) -> str:
    r = round(float(v), 1)
    return str(int(r)) if r.is_integer() else str(r)


_YAML_PLAIN = re.compile(r"[^\s\"'#\-?:,\[\]{}&*!|>%@`][^\n]*")
_YAML_RESOLVER = yaml.resolver.Resolver()
_YAML_STR = "tag:yaml.org,2002:str"


def _yaml_value(v: str) -> str:
    """A value as YAML reads it back as this string: plain when safe, else JSON-quoted."""
    if (_YAML_PLAIN.fullmatch(v) and ": " not in v and " #" not in v and not v.endswith(":")
            # "12", "true", "~", "=" would come back as numbers, booleans, null, tags
            and _YAML_RESOLVER.resolve(yaml.ScalarNode, v, (True, False)) == _YAML_STR):
        return v
    return json.dumps(v, ensure_ascii=False)


def _yaml_key(key: str) -> str:
    # As Playwright does: a key YAML would misread is single-quoted ('' for ').
    if ": " in key or " #" in key:
        return "'" + key.replace("'", "''") + "'"
    return key


def _render(n: Node, depth: int) -> list[str]:
    if _is_quiet(n):
        return [line for c in n.children for line in _render(c, depth)]
    pad = "  " * depth
    key = n.role
    if n.name:
        key += " " + json.dumps(n.name, ensure_ascii=False)
    for s in n.states:
        key += f" [{s}]"
    if n.box is not None:
        key += " [box=" + ",".join(_num(v) for v in n.box) + "]"
    head = pad + "- " + _yaml_key(key)
    below = []
    if n.url is not None:
        below.append(f"{pad}  - /url: {_yaml_value(n.url)}")
    child_lines = [line for c in n.children for line in _render(c, depth + 1)]
    if n.value is not None and (below or child_lines):
        below.append(f"{pad}  - text: {_yaml_value(n.value)}")
    below += child_lines
    if below:
        return [head + ":"] + below
    if n.value is not None:
        return [head + ": " + _yaml_value(n.value)]
    return [head]


def render_tree(nodes: list[Node]) -> str:
    """The tree text, in the grammar `crawlers.a11y.parse_snapshot` reads."""
    return "\n".join(line for n in nodes for line in _render(n, 0))


def normalise_box(box: Box, width: float, height: float) -> tuple[float, float, float, float]:
    """(x, y, w, h) in source units -> (x0, y0, x1, y1) of the screen, clipped when on it."""
    x, y, w, h = box
    x0, y0, x1, y1 = x / width, y / height, (x + w) / width, (y + h) / height
    if x1 > 0 and y1 > 0 and x0 < 1 and y0 < 1:   # overlaps the screen: clip to it
        x0, y0, x1, y1 = max(x0, 0.0), max(y0, 0.0), min(x1, 1.0), min(y1, 1.0)
    return x0, y0, x1, y1


def to_elements(nodes: list[Node], width: float, height: float) -> list[Element]:
    """Nodes with an area and either an actionable role or a name, in document order."""
    out: list[Element] = []

    def walk(n: Node) -> None:
        label = n.name or n.value or ""
        if _has_area(n.box) and (n.role in ACTIONABLE_ROLES or label):
            out.append(Element(role=n.role, name=label, bbox=normalise_box(n.box, width, height)))
        for c in n.children:
            walk(c)

    for n in nodes:
        walk(n)
    return out


def normalise(kind: str, source: str | bytes, width: float, height: float
              ) -> tuple[str, list[Element]]:
    """(tree text, elements) for an "android" | "ios" | "html" page source.

    width/height: the screen in the source's units (device px for Android,
    points for iOS, CSS px for HTML, i.e. what STAMP_BOXES_JS returns).
    """
    parsers = {"android": parse_android, "ios": parse_ios, "html": parse_html}
    if kind not in parsers:
        raise ValueError(f"unknown page source kind {kind!r}; expected one of {sorted(parsers)}")
    if not (width > 0 and height > 0):
        raise ValueError(f"screen size must be positive, got {width}x{height}")
    nodes = parsers[kind](source)
    return render_tree(nodes), to_elements(nodes, width, height)


# ---------------------------------------------------------------- XML (Android, iOS)

def _xml_root(kind: str, source: str | bytes) -> ET.Element:
    if isinstance(source, str):
        source = source.encode("utf-8")   # bytes: an encoding declaration is then fine
    try:
        return ET.fromstring(source)
    except ET.ParseError as e:
        line, col = e.position
        raise PageSourceError(kind, f"not XML (line {line}, column {col}): {e}") from None


def _child_paths(parent_path: str, children: list[ET.Element]) -> list[str]:
    """XPath-like paths (1-based position among same-tag siblings), as Appium's xpath reads."""
    seen: dict[str, int] = {}
    out = []
    for c in children:
        seen[c.tag] = seen.get(c.tag, 0) + 1
        out.append(f"{parent_path}/{c.tag}[{seen[c.tag]}]")
    return out


def _keep(box: Box | None, node: Node, children: list[Node]) -> list[Node]:
    """The node, or (zero-area: nothing to see or touch) its children in its place."""
    if box is not None and not _has_area(box):
        return children
    return [node]


# ---------------------------------------------------------------- Android

_BOUNDS = re.compile(r"\[(-?\d+),(-?\d+)\]\[(-?\d+),(-?\d+)\]")

_ANDROID_ROLES = [(re.compile(p), role) for p, role in [
    (r"SearchAutoComplete", "searchbox"),
    (r"EditText|AutoCompleteTextView", "textbox"),
    (r"CheckBox", "checkbox"),
    (r"Switch|ToggleButton", "switch"),
    (r"RadioGroup", "radiogroup"),
    (r"RadioButton", "radio"),
    (r"ToggleGroup|ChipGroup", "group"),
    (r"Button", "button"),
    (r"Spinner", "combobox"),
    (r"SeekBar|RatingBar|Slider", "slider"),
    (r"ProgressBar", "progressbar"),
    (r"TabWidget$|TabLayout$", "tablist"),
    (r"(^|\$)Tab(View)?$|TabView$", "tab"),
    (r"RecyclerView|ListView|GridView", "list"),
    (r"WebView", "document"),
    (r"ImageView", "img"),
    (r"TextView", "text"),
    (r"Toolbar|ActionBar", "toolbar"),
]]

_SEARCH_HINT = re.compile(r"search|搜索|搜尋", re.I)


def _android_role(simple: str) -> str:
    for pattern, role in _ANDROID_ROLES:
        if pattern.search(simple):
            return role
    return "generic"


def _android_box(el: ET.Element, path: str) -> Box | None:
    raw = el.get("bounds")
    if raw is None:
        return None
    m = _BOUNDS.fullmatch(raw.strip())
    if not m:
        raise PageSourceError("android", "expected bounds like [x0,y0][x1,y1]",
                              path=path, attribute="bounds", value=raw)
    x0, y0, x1, y1 = (int(g) for g in m.groups())
    if x1 < x0 or y1 < y0:
        raise PageSourceError("android", "bounds end before they start",
                              path=path, attribute="bounds", value=raw)
    return float(x0), float(y0), float(x1 - x0), float(y1 - y0)


def _android_node(el: ET.Element, path: str, in_tabwidget: bool) -> list[Node]:
    a = el.get
    if a("displayed") == "false":
        return []
    cls = a("class") or el.tag
    simple = cls.rsplit(".", 1)[-1]
    kids = list(el)
    children = [n for c, p in zip(kids, _child_paths(path, kids))
                for n in _android_node(c, p, simple.endswith("TabWidget"))]
    box = _android_box(el, path)
    desc, text, hint = clean_text(a("content-desc")), clean_text(a("text")), clean_text(a("hint"))
    rid = clean_text(a("resource-id"))

    role = _android_role(simple)
    if role == "textbox" and _SEARCH_HINT.search(f"{rid} {hint}"):
        role = "searchbox"
    if role in ("generic", "text") and a("heading") == "true":
        role = "heading"
    if in_tabwidget and role in ("generic", "text", "button"):
        role = "tab"
    if role in ("generic", "text") and a("checkable") == "true":
        role = "checkbox"
    if role == "generic" and (text or desc):
        role = "text" if text else "group"
    if a("clickable") == "true" and role in ("generic", "text", "img", "group"):
        role = "button"

    node = Node(role, box=box, children=children)
    if role in ("textbox", "searchbox"):
        # The field's label is its description or hint; its text is what was typed.
        node.name = desc or hint or text
        if text and text not in (node.name, hint) and a("showing-hint") != "true":
            node.value = text
    else:
        node.name = desc or text or hint
    for state, on in (("checked", a("checked") == "true"), ("selected", a("selected") == "true"),
                      ("disabled", a("enabled") == "false"), ("focused", a("focused") == "true"),
                      ("password", a("password") == "true"),
                      ("scrollable", a("scrollable") == "true")):
        if on:
            node.states.append(state)
    if rid:
        node.states.append("id=" + rid.replace("]", ""))
    if role in _NAMED_FROM_CONTENT:
        _absorb(node)
    return _keep(box, node, children)


def parse_android(source: str | bytes) -> list[Node]:
    """UiAutomator2 `<hierarchy>` XML -> normalised nodes (boxes in device px)."""
    root = _xml_root("android", source)
    top = list(root) if root.tag == "hierarchy" else [root]
    base = "/hierarchy" if root.tag == "hierarchy" else ""
    return [n for el, p in zip(top, _child_paths(base, top)) for n in _android_node(el, p, False)]


# ---------------------------------------------------------------- iOS

_IOS_ROLES = {
    "Button": "button", "Key": "button", "Icon": "button", "Link": "link",
    "TextField": "textbox", "SecureTextField": "textbox", "TextView": "textbox",
    "SearchField": "searchbox", "Switch": "switch", "Toggle": "switch",
    "CheckBox": "checkbox", "RadioButton": "radio", "Slider": "slider",
    "StaticText": "text", "Image": "img", "Cell": "listitem", "Tab": "tab",
    "TabBar": "tablist", "NavigationBar": "region", "Alert": "alert", "Sheet": "dialog",
    "Table": "list", "CollectionView": "list", "SegmentedControl": "radiogroup",
    "PickerWheel": "combobox", "ProgressIndicator": "progressbar",
    "ActivityIndicator": "progressbar", "Menu": "menu", "MenuItem": "menuitem",
    "Toolbar": "toolbar", "WebView": "document", "Application": "application",
}
_IOS_FIELDS = ("textbox", "searchbox")
_IOS_VALUED = ("textbox", "searchbox", "slider", "combobox", "progressbar")
_IOS_PLAIN = ("text", "img", "generic", "heading")    # named by what they show


def _ios_box(el: ET.Element, path: str) -> Box | None:
    raw = [el.get(k) for k in ("x", "y", "width", "height")]
    if any(v is None for v in raw):
        return None
    out = []
    for k, v in zip(("x", "y", "width", "height"), raw):
        try:
            out.append(float(v))
        except ValueError:
            raise PageSourceError("ios", "expected a number", path=path,
                                  attribute=k, value=v) from None
    if out[2] < 0 or out[3] < 0:
        raise PageSourceError("ios", "negative size", path=path, attribute="width/height",
                              value=f"{raw[2]}x{raw[3]}")
    return tuple(out)


def _ios_node(el: ET.Element, path: str, parent_type: str) -> list[Node]:
    a = el.get
    if a("visible") == "false":
        return []
    typ = (a("type") or el.tag).removeprefix("XCUIElementType")
    kids = list(el)
    children = [n for c, p in zip(kids, _child_paths(path, kids)) for n in _ios_node(c, p, typ)]
    box = _ios_box(el, path)
    label, ident, value = clean_text(a("label")), clean_text(a("name")), clean_text(a("value"))
    placeholder = clean_text(a("placeholderValue"))
    traits = a("traits") or ""

    role = _IOS_ROLES.get(typ, "generic")
    if role == "button" and parent_type == "TabBar":
        role = "tab"
    if role in ("text", "generic") and "Header" in traits:
        role = "heading"

    # WDA's `name` is the accessibilityIdentifier when one is set (a developer
    # key such as "goods_image"), else the label: it names a node only as a
    # last resort, and goes to [id=...] when it differs from the name.
    node = Node(role, box=box, children=children)
    if role in _IOS_FIELDS:
        node.name = label or placeholder or (ident if ident != value else "")
    elif role in _IOS_VALUED or role in ("switch", "checkbox", "radio"):
        node.name = label or ident
    elif role in _IOS_PLAIN:
        node.name = label or value
    else:
        node.name = label
    if role in _NAMED_FROM_CONTENT:
        _absorb(node)
    elif role == "listitem" and not node.name:
        node.name = clean_text(" ".join(_content_words(node)))   # what VoiceOver reads
    if not node.name and role not in _IOS_PLAIN:
        node.name = ident or value
    if role == "generic" and node.name:
        role = node.role = "group"
    # A field's content, a slider's position, a badge on a button ("3 items").
    if value and value not in (node.name, placeholder) and role not in _IOS_PLAIN \
            and role not in ("switch", "checkbox", "radio", "group"):
        node.value = value
    if role in ("switch", "checkbox", "radio") and value == "1":
        node.states.append("checked")
    if a("selected") == "true" or "Selected" in traits:
        node.states.append("selected")
    if a("enabled") == "false":
        node.states.append("disabled")
    if a("focused") == "true":
        node.states.append("focused")
    if typ == "SecureTextField":
        node.states.append("password")
    if ident and ident not in (node.name, label):
        node.states.append("id=" + ident.replace("]", ""))
    return _keep(box, node, children)


def parse_ios(source: str | bytes) -> list[Node]:
    """XCUITest `<AppiumAUT>` XML -> normalised nodes (boxes in points)."""
    root = _xml_root("ios", source)
    top = list(root) if root.tag == "AppiumAUT" else [root]
    base = "/AppiumAUT" if root.tag == "AppiumAUT" else ""
    return [n for el, p in zip(top, _child_paths(base, top)) for n in _ios_node(el, p, "")]


# ---------------------------------------------------------------- HTML

# Run through `driver.execute_script` (a function body); returns the visible
# viewport's [width, height] in CSS px (innerWidth/innerHeight unless the page
# is pinch-zoomed). Stamps, on every element, what the serialised DOM would
# otherwise not say: its box when it is rendered and visible
# (data-tf-box="x,y,w,h", CSS px from the visible top-left, 0.1 px), the
# live value of fields (data-tf-value; passwords masked), the live checked
# state (data-tf-checked: the `checked` attribute only holds the initial one)
# and focus (data-tf-focus). Stale stamps are removed; unchanged ones are not
# rewritten, so pages watching their DOM see no churn.
STAMP_BOXES_JS = r"""
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
  let box = null, value = null, checked = null;
  if (r.width > 0 && r.height > 0 &&
      el.checkVisibility({visibilityProperty: true, opacityProperty: true})) {
    box = [r.x - ox, r.y - oy, r.width, r.height].map(r1).join(',');
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
  put(el, 'data-tf-value', value);
  put(el, 'data-tf-checked', checked);
  put(el, 'data-tf-focus', el === focus && el !== document.body ? '' : null);
}
return vv ? [vv.width, vv.height] : [window.innerWidth, window.innerHeight];
"""

_VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link",
                   "meta", "param", "source", "track", "wbr"})
_SKIP_TAGS = frozenset({"script", "style", "template", "noscript", "head"})
_FORM_CONTROLS = frozenset({"input", "select", "textarea", "button"})
_INPUT_ROLES = {"search": "searchbox", "checkbox": "checkbox", "radio": "radio",
                "range": "slider", "submit": "button", "button": "button", "reset": "button",
                "image": "button", "file": "button", "hidden": None}
_TAG_ROLES = {"button": "button", "textarea": "textbox", "nav": "navigation", "main": "main",
              "header": "banner", "footer": "contentinfo", "aside": "complementary",
              "article": "article", "ul": "list", "ol": "list", "menu": "list",
              "li": "listitem", "dialog": "dialog", "table": "table", "tr": "row",
              "td": "cell", "th": "columnheader", "p": "paragraph", "option": "option",
              "fieldset": "group", "progress": "progressbar", "meter": "meter",
              "hr": "separator", "figure": "figure", "blockquote": "blockquote",
              "output": "status"}
_NUMBER_LIST = re.compile(r"\s*-?\d+(\.\d+)?\s*(,\s*-?\d+(\.\d+)?\s*){3}")


@dataclass
class _El:
    tag: str
    attrs: dict[str, str]
    parent: _El | None
    children: list = field(default_factory=list)   # _El | str


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
            d.setdefault(k, v or "")      # the first of a duplicated attribute wins
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
        raise PageSourceError("html", "expected data-tf-box like x,y,w,h (numbers)",
                              path=_html_path(el), attribute="data-tf-box", value=raw)
    x, y, w, h = (float(p) for p in raw.split(","))
    if w < 0 or h < 0:
        raise PageSourceError("html", "negative size", path=_html_path(el),
                              attribute="data-tf-box", value=raw)
    return (x, y, w, h) if w > 0 and h > 0 else None


def _dom_text(el: _El, skip: _El | None = None) -> str:
    """Text of a subtree as written (for labels), form controls and hidden parts left out."""
    out = []
    for c in el.children:
        if isinstance(c, str):
            out.append(c)
        elif (c is not skip and c.tag not in _SKIP_TAGS and c.tag not in _FORM_CONTROLS
              and "hidden" not in c.attrs and c.attrs.get("aria-hidden") != "true"):
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
        level = a.get("aria-level") or (el.tag[1] if el.tag[:1] == "h" and len(el.tag) == 2
                                        else "2")
        states.append(f"level={level}")
    if el.tag == "input" and a.get("type", "").lower() in ("checkbox", "radio"):
        checked = a.get("data-tf-checked", "true" if "checked" in a else "false")
    else:
        checked = a.get("aria-checked", "false")
    if checked in ("true", "mixed"):
        states.append("checked" if checked == "true" else "checked=mixed")
    if a.get("aria-selected") == "true":
        states.append("selected")
    if ("disabled" in a and el.tag in _FORM_CONTROLS | {"option", "fieldset"}) \
            or a.get("aria-disabled") == "true":
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
            v = "\u2022" * len(v)   # never put a password into the tree
    else:
        return None
    return clean_text(v) or None


def _html_nodes(el: _El, b: _DomBuilder) -> list[Node]:
    a = el.attrs
    if el.tag in _SKIP_TAGS or "hidden" in a or a.get("aria-hidden") == "true":
        return []
    box = _html_box(el)
    role = _html_role(el)
    if role is None:
        return []
    if el.tag == "svg":   # drawn, not read: an image when named, else nothing
        name = _html_label(el, "img", b) or clean_text(a.get("title"))
        return [Node("img", name=name, box=box)] if box and name else []
    children: list[Node] = []
    if el.tag not in ("textarea", "select"):    # their content is their value
        for c in el.children:
            if isinstance(c, _El):
                children += _html_nodes(c, b)
            elif box is not None and clean_text(c):   # text shows only inside a rendered box
                children.append(Node("text", name=clean_text(c), box=box))
    if box is None:
        return children   # not rendered itself (display: contents, zero size): children move up

    node = Node(role, name=_html_label(el, role, b), box=box, states=_html_states(el, role),
                children=children)
    if role in _NAMED_FROM_CONTENT or (role in ACTIONABLE_ROLES and node.name):
        _absorb(node)
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
    if node.children and all(c.role == "text" and not c.children for c in node.children) \
            and role not in ACTIONABLE_ROLES:
        text = clean_text(" ".join(c.name for c in node.children))
        if _is_quiet(node):
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
