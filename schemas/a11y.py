"""Parse Playwright's AI-mode aria snapshot into nodes and `Element`s.

`page.aria_snapshot(mode="ai", boxes=True)` renders one YAML-ish line per node:

    - button "Go" [ref=e4] [box=8,109,34,21]
    - paragraph [ref=e3] [box=8,75,1264,18]: Price ¥59 hot
    - 'button "a: b" [ref=e2] [box=8,8,38,21]'      (key single-quoted by YAML)
    - paragraph [ref=e5] [box=8,45,1264,18]: "text: with colon"
    - /url: /p?q=1                                  (a property of the parent)

Names are JSON-escaped inside the key; a key that YAML would misread is
wrapped in single quotes ('' for a quote); an inline value that YAML would
misread is double-quoted with JSON escapes. Boxes are CSS pixels relative to
the top-left of the visible viewport (they go negative when the page is
scrolled past an element), so normalising by the viewport size gives the
`Element.bbox` contract directly.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from schemas.records import Element

_LINE = re.compile(r"^(?P<indent> *)- (?P<body>.*)$")
_ROLE = re.compile(r"[A-Za-z][\w-]*")
_NAME = re.compile(r'"((?:[^"\\]|\\.)*)"')
_ATTR = re.compile(r"\[([^\]]*)\]")


@dataclass
class AriaNode:
    """One line of the snapshot that describes a node (properties folded in)."""

    role: str
    name: str = ""  # quoted accessible name, else the inline text
    text: str | None = None  # inline text after the colon, if any
    depth: int = 0
    ref: str | None = None
    box: tuple[float, float, float, float] | None = None  # x, y, w, h in CSS px
    attrs: dict[str, str] = field(default_factory=dict)  # level, checked, cursor, ...
    url: str | None = None  # from a `/url:` child line


def _unquote_single(s: str) -> tuple[str, str]:
    """Read a YAML single-quoted scalar at the start of `s`; return (value, rest)."""
    out, i = [], 1
    while i < len(s):
        if s[i] == "'":
            if i + 1 < len(s) and s[i + 1] == "'":
                out.append("'")
                i += 2
                continue
            return "".join(out), s[i + 1 :]
        out.append(s[i])
        i += 1
    raise ValueError(f"unterminated single-quoted key: {s!r}")


def _value(raw: str) -> str:
    """An inline value: plain, "json-escaped" or 'yaml single-quoted'."""
    raw = raw.strip()
    if len(raw) >= 2 and raw[0] == '"' and raw[-1] == '"':
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            return raw[1:-1]
    if len(raw) >= 2 and raw[0] == "'" and raw[-1] == "'":
        return raw[1:-1].replace("''", "'")
    return raw


def _split_key(body: str) -> tuple[str, str | None]:
    """Split a line body into its key and its inline value (None when absent)."""
    if body.startswith("'"):
        key, rest = _unquote_single(body)
        rest = rest.strip()
        if rest.startswith(":"):
            return key, rest[1:].strip() or None
        return key, None
    # Unquoted key: the value starts at the first ':' outside the name and attrs.
    depth_sq, in_str, esc = 0, False, False
    for i, ch in enumerate(body):
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch == "[":
            depth_sq += 1
        elif ch == "]":
            depth_sq = max(0, depth_sq - 1)
        elif ch == ":" and depth_sq == 0:
            return body[:i], body[i + 1 :].strip() or None
    return body, None


def _parse_box(v: str) -> tuple[float, float, float, float] | None:
    try:
        x, y, w, h = (float(p) for p in v.split(","))
    except ValueError:
        return None
    return x, y, w, h


def parse_line(line: str) -> AriaNode | tuple[str, str] | None:
    """One snapshot line -> AriaNode, ("/prop", value) for a property line, or None."""
    m = _LINE.match(line.rstrip("\r\n"))
    if not m:
        return None
    depth = len(m.group("indent")) // 2
    body = m.group("body")
    if body.startswith("/"):
        prop, _, val = body.partition(":")
        return prop, _value(val)
    key, raw_value = _split_key(body)
    key = key.strip()
    rm = _ROLE.match(key)
    if not rm:
        return None
    node = AriaNode(role=rm.group(0), depth=depth)
    rest = key[rm.end() :].lstrip()
    nm = _NAME.match(rest)
    if nm:
        node.name = json.loads(f'"{nm.group(1)}"')
        rest = rest[nm.end() :]
    for a in _ATTR.findall(rest):
        k, _, v = a.partition("=")
        k = k.strip()
        if k == "box":
            node.box = _parse_box(v)
        elif k == "ref":
            node.ref = v
        else:
            node.attrs[k] = v
    if raw_value is not None:
        node.text = _value(raw_value)
        if not nm:
            node.name = node.text
    return node


# Roles whose accessible name comes from their content (WAI-ARIA "name from: contents").
# Playwright's snapshot leaves such a name off when the content is written below the node
# (a launcher card: `button` over `paragraph: Text File`); the name is taken back from it.
NAME_FROM_CONTENT = frozenset(
    {
        "button", "link", "tab", "menuitem", "menuitemcheckbox", "menuitemradio", "option",
        "checkbox", "radio", "switch", "treeitem", "cell", "gridcell", "columnheader",
        "rowheader", "heading", "tooltip",
    }
)  # fmt: skip


def parse_snapshot(text: str) -> list[AriaNode]:
    """All nodes of a snapshot in document order; `/url:` lines fill their parent's url;
    an unnamed node of a NAME_FROM_CONTENT role is named by its descendants' text."""
    nodes = _parse_nodes(text)
    for i, node in enumerate(nodes):
        if not node.name and node.role in NAME_FROM_CONTENT:
            node.name = _content_name(nodes, i)
    return nodes


def _content_name(nodes: list[AriaNode], i: int) -> str:
    parts = []
    for n in nodes[i + 1 :]:
        if n.depth <= nodes[i].depth:
            break
        if n.text or (n.name and n.role in NAME_FROM_CONTENT):
            parts.append(n.text or n.name)
    return " ".join(p.strip() for p in parts if p and p.strip())


def _parse_nodes(text: str) -> list[AriaNode]:
    nodes: list[AriaNode] = []
    stack: list[AriaNode] = []
    for line in text.splitlines():
        parsed = parse_line(line)
        if parsed is None:
            continue
        if isinstance(parsed, tuple):
            prop, val = parsed
            if prop == "/url" and stack:
                stack[-1].url = val
            continue
        while stack and stack[-1].depth >= parsed.depth:
            stack.pop()
        stack.append(parsed)
        nodes.append(parsed)
    return nodes


def to_elements(
    nodes: list[AriaNode],
    viewport_width: int,
    viewport_height: int,
    zoom: tuple[float, float, float] = (1.0, 0.0, 0.0),
) -> list[Element]:
    """Elements for nodes with a visible box, boxes normalised to the viewport.

    `zoom` is the visual viewport's (scale, offsetLeft, offsetTop): a mobile
    page without a `<meta name=viewport>` is laid out wider than the screen and
    shown zoomed out, so a layout box maps to the screen as (x - off) * scale.
    Nodes with an empty box (w or h == 0: closed <option>s, hidden nodes) are
    left out: they cannot be acted on and would sit misleadingly at (0, 0).
    """
    scale, off_x, off_y = zoom
    sx, sy = scale / viewport_width, scale / viewport_height
    out = []
    for n in nodes:
        if n.box is None:
            continue
        x, y, w, h = n.box
        if w <= 0 or h <= 0:
            continue
        x0, y0 = (x - off_x) * sx, (y - off_y) * sy
        out.append(Element(role=n.role, name=n.name, bbox=(x0, y0, x0 + w * sx, y0 + h * sy)))
    return out


def elements_from_snapshot(
    text: str, viewport_width: int, viewport_height: int, zoom: tuple[float, float, float] = (1.0, 0.0, 0.0)
) -> list[Element]:
    return to_elements(parse_snapshot(text), viewport_width, viewport_height, zoom)
