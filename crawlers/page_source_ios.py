"""iOS page sources (XCUITest `<AppiumAUT>` XML) -> normalised nodes.

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
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from .page_nodes import (
    NAMED_FROM_CONTENT,
    Box,
    Node,
    PageSourceError,
    absorb,
    child_paths,
    clean_text,
    content_words,
    keep_node,
    xml_root,
)

_IOS_ROLES = {
    "Button": "button",
    "Key": "button",
    "Icon": "button",
    "Link": "link",
    "TextField": "textbox",
    "SecureTextField": "textbox",
    "TextView": "textbox",
    "SearchField": "searchbox",
    "Switch": "switch",
    "Toggle": "switch",
    "CheckBox": "checkbox",
    "RadioButton": "radio",
    "Slider": "slider",
    "StaticText": "text",
    "Image": "img",
    "Cell": "listitem",
    "Tab": "tab",
    "TabBar": "tablist",
    "NavigationBar": "region",
    "Alert": "alert",
    "Sheet": "dialog",
    "Table": "list",
    "CollectionView": "list",
    "SegmentedControl": "radiogroup",
    "PickerWheel": "combobox",
    "ProgressIndicator": "progressbar",
    "ActivityIndicator": "progressbar",
    "Menu": "menu",
    "MenuItem": "menuitem",
    "Toolbar": "toolbar",
    "WebView": "document",
    "Application": "application",
}
_IOS_FIELDS = ("textbox", "searchbox")
_IOS_VALUED = ("textbox", "searchbox", "slider", "combobox", "progressbar")
_IOS_PLAIN = ("text", "img", "generic", "heading")  # named by what they show


def _ios_box(el: ET.Element, path: str) -> Box | None:
    raw = [el.get(k) for k in ("x", "y", "width", "height")]
    if any(v is None for v in raw):
        return None
    out = []
    for k, v in zip(("x", "y", "width", "height"), raw):
        try:
            out.append(float(v))
        except ValueError:
            raise PageSourceError("ios", "expected a number", path=path, attribute=k, value=v) from None
    if out[2] < 0 or out[3] < 0:
        raise PageSourceError(
            "ios", "negative size", path=path, attribute="width/height", value=f"{raw[2]}x{raw[3]}"
        )
    return tuple(out)


def _ios_node(el: ET.Element, path: str, parent_type: str) -> list[Node]:
    a = el.get
    if a("visible") == "false":
        return []
    typ = (a("type") or el.tag).removeprefix("XCUIElementType")
    kids = list(el)
    children = [n for c, p in zip(kids, child_paths(path, kids)) for n in _ios_node(c, p, typ)]
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
    if role in NAMED_FROM_CONTENT:
        absorb(node)
    elif role == "listitem" and not node.name:
        node.name = clean_text(" ".join(content_words(node)))  # what VoiceOver reads
    if not node.name and role not in _IOS_PLAIN:
        node.name = ident or value
    if role == "generic" and node.name:
        role = node.role = "group"
    # A field's content, a slider's position, a badge on a button ("3 items").
    if (
        value
        and value not in (node.name, placeholder)
        and role not in _IOS_PLAIN
        and role not in ("switch", "checkbox", "radio", "group")
    ):
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
    return keep_node(box, node, children)


def parse_ios(source: str | bytes) -> list[Node]:
    """XCUITest `<AppiumAUT>` XML -> normalised nodes (boxes in points)."""
    root = xml_root("ios", source)
    top = list(root) if root.tag == "AppiumAUT" else [root]
    base = "/AppiumAUT" if root.tag == "AppiumAUT" else ""
    return [n for el, p in zip(top, child_paths(base, top)) for n in _ios_node(el, p, "")]
