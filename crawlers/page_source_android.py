"""Android page sources (UiAutomator2 `<hierarchy>` XML) -> normalised nodes.

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
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from .page_nodes import (
    NAMED_FROM_CONTENT,
    Box,
    Node,
    PageSourceError,
    absorb,
    child_paths,
    clean_text,
    keep_node,
    xml_root,
)

_BOUNDS = re.compile(r"\[(-?\d+),(-?\d+)\]\[(-?\d+),(-?\d+)\]")

_ANDROID_ROLES = [
    (re.compile(p), role)
    for p, role in [
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
    ]
]

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
        raise PageSourceError(
            "android", "expected bounds like [x0,y0][x1,y1]", path=path, attribute="bounds", value=raw
        )
    x0, y0, x1, y1 = (int(g) for g in m.groups())
    if x1 < x0 or y1 < y0:
        raise PageSourceError(
            "android", "bounds end before they start", path=path, attribute="bounds", value=raw
        )
    return float(x0), float(y0), float(x1 - x0), float(y1 - y0)


def _android_node(el: ET.Element, path: str, in_tabwidget: bool) -> list[Node]:
    a = el.get
    if a("displayed") == "false":
        return []
    cls = a("class") or el.tag
    simple = cls.rsplit(".", 1)[-1]
    kids = list(el)
    children = [
        n
        for c, p in zip(kids, child_paths(path, kids))
        for n in _android_node(c, p, simple.endswith("TabWidget"))
    ]
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
    for state, on in (
        ("checked", a("checked") == "true"),
        ("selected", a("selected") == "true"),
        ("disabled", a("enabled") == "false"),
        ("focused", a("focused") == "true"),
        ("password", a("password") == "true"),
        ("scrollable", a("scrollable") == "true"),
    ):
        if on:
            node.states.append(state)
    if rid:
        node.states.append("id=" + rid.replace("]", ""))
    if role in NAMED_FROM_CONTENT:
        absorb(node)
    return keep_node(box, node, children)


def parse_android(source: str | bytes) -> list[Node]:
    """UiAutomator2 `<hierarchy>` XML -> normalised nodes (boxes in device px)."""
    root = xml_root("android", source)
    top = list(root) if root.tag == "hierarchy" else [root]
    base = "/hierarchy" if root.tag == "hierarchy" else ""
    return [n for el, p in zip(top, child_paths(base, top)) for n in _android_node(el, p, False)]
