"""The normalised page tree shared by every page-source parser (`crawlers.page_source`).

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

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

from schemas.records import Visibility

Box = tuple[float, float, float, float]  # x, y, w, h in the source's units


class PageSourceError(ValueError):
    """A page source that cannot be read; names the node's path and the attribute."""

    def __init__(
        self,
        kind: str,
        message: str,
        *,
        path: str | None = None,
        attribute: str | None = None,
        value: str | None = None,
    ):
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
    states: list[str] = field(default_factory=list)  # "checked", "level=2", "id=..."
    value: str | None = None  # a field's content, or a text-only node's text
    url: str | None = None  # a link's href
    children: list[Node] = field(default_factory=list)
    # Set after parsing (crawlers.page_visibility) or read from the stamp (HTML).
    visibility: Visibility | None = None


ACTIONABLE_ROLES = frozenset(
    {
        "button",
        "link",
        "textbox",
        "searchbox",
        "checkbox",
        "switch",
        "radio",
        "combobox",
        "listbox",
        "slider",
        "spinbutton",
        "tab",
        "menuitem",
        "menuitemcheckbox",
        "menuitemradio",
        "option",
        "treeitem",
    }
)

# Roles whose name comes from their content when nothing labels them (ARIA).
NAMED_FROM_CONTENT = frozenset(
    {
        "button",
        "link",
        "checkbox",
        "switch",
        "radio",
        "tab",
        "menuitem",
        "menuitemcheckbox",
        "menuitemradio",
        "option",
        "treeitem",
        "heading",
        "cell",
        "columnheader",
        "rowheader",
        "tooltip",
    }
)

# Nodes of these roles say nothing when unnamed and stateless: folded away.
_QUIET_ROLES = frozenset({"generic", "group", "text", "img", "none", "presentation"})


# Control characters (and what YAML refuses) carry nothing a reader could use.
_UNPRINTABLE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x84\x86-\x9f\ud800-\udfff\ufffe\uffff]")


def clean_text(s: str | None) -> str:
    """Collapse whitespace (line breaks included: a tree line is one line), drop controls."""
    return " ".join(_UNPRINTABLE.sub("", s).split()) if s else ""


def content_words(node: Node, *, keep: list[Node] | None = None) -> list[str]:
    """Names of `node`'s non-actionable descendants; actionable ones go to `keep`."""
    words: list[str] = []
    for c in node.children:
        if c.role in ACTIONABLE_ROLES:
            if keep is not None:
                keep.append(c)
        elif c.name or c.value:
            words.append(c.name or c.value)
        else:
            words.extend(content_words(c, keep=keep))
    return words


def absorb(node: Node) -> None:
    """An actionable node reads as one: named by its content, only controls stay below."""
    kept: list[Node] = []
    words = content_words(node, keep=kept)
    if not node.name:
        node.name = clean_text(" ".join(words))
    node.children = kept


def has_area(box: Box | None) -> bool:
    return box is not None and box[2] > 0 and box[3] > 0


def is_quiet(n: Node) -> bool:
    return (
        n.role in _QUIET_ROLES
        and not n.name
        and n.value is None
        and n.url is None
        and all(s.startswith("id=") for s in n.states)
    )


# XML (Android, iOS) ------------------------------------------------------------


def xml_root(kind: str, source: str | bytes) -> ET.Element:
    if isinstance(source, str):
        source = source.encode("utf-8")  # bytes: an encoding declaration is then fine
    try:
        return ET.fromstring(source)
    except ET.ParseError as e:
        line, col = e.position
        raise PageSourceError(kind, f"not XML (line {line}, column {col}): {e}") from None


def child_paths(parent_path: str, children: list[ET.Element]) -> list[str]:
    """XPath-like paths (1-based position among same-tag siblings), as Appium's xpath reads."""
    seen: dict[str, int] = {}
    out = []
    for c in children:
        seen[c.tag] = seen.get(c.tag, 0) + 1
        out.append(f"{parent_path}/{c.tag}[{seen[c.tag]}]")
    return out


def keep_node(box: Box | None, node: Node, children: list[Node]) -> list[Node]:
    """The node, or (zero-area: nothing to see or touch) its children in its place."""
    if box is not None and not has_area(box):
        return children
    return [node]
