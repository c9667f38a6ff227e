"""Normalised nodes -> the web's accessibility text and screen-normalised `Element`s.

The text is the grammar `schemas.a11y.parse_snapshot` reads (`- role "name"
[state] [box=x,y,w,h]`, two spaces per level), valid YAML like Playwright's
aria snapshot.
"""

from __future__ import annotations

import json
import re

import yaml

from schemas.records import Element

from .page_nodes import ACTIONABLE_ROLES, Box, Node, has_area, is_quiet


def _num(v: float) -> str:
    r = round(float(v), 1)
    return str(int(r)) if r.is_integer() else str(r)


_YAML_PLAIN = re.compile(r"[^\s\"'#\-?:,\[\]{}&*!|>%@`][^\n]*")
_YAML_RESOLVER = yaml.resolver.Resolver()
_YAML_STR = "tag:yaml.org,2002:str"


def _yaml_value(v: str) -> str:
    """A value as YAML reads it back as this string: plain when safe, else JSON-quoted."""
    if (
        _YAML_PLAIN.fullmatch(v)
        and ": " not in v
        and " #" not in v
        and not v.endswith(":")
        # "12", "true", "~", "=" would come back as numbers, booleans, null, tags
        and _YAML_RESOLVER.resolve(yaml.ScalarNode, v, (True, False)) == _YAML_STR
    ):
        return v
    return json.dumps(v, ensure_ascii=False)


def _yaml_key(key: str) -> str:
    # As Playwright does: a key YAML would misread is single-quoted ('' for ').
    if ": " in key or " #" in key:
        return "'" + key.replace("'", "''") + "'"
    return key


def _render(n: Node, depth: int) -> list[str]:
    if is_quiet(n):
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
    """The tree text, in the grammar `schemas.a11y.parse_snapshot` reads."""
    return "\n".join(line for n in nodes for line in _render(n, 0))


def normalise_box(box: Box, width: float, height: float) -> tuple[float, float, float, float]:
    """(x, y, w, h) in source units -> (x0, y0, x1, y1) of the screen, clipped when on it."""
    x, y, w, h = box
    x0, y0, x1, y1 = x / width, y / height, (x + w) / width, (y + h) / height
    if x1 > 0 and y1 > 0 and x0 < 1 and y0 < 1:  # overlaps the screen: clip to it
        x0, y0, x1, y1 = max(x0, 0.0), max(y0, 0.0), min(x1, 1.0), min(y1, 1.0)
    return x0, y0, x1, y1


def to_elements(nodes: list[Node], width: float, height: float) -> list[Element]:
    """Nodes with an area and either an actionable role or a name, in document order."""
    out: list[Element] = []

    def walk(n: Node) -> None:
        label = n.name or n.value or ""
        if has_area(n.box) and (n.role in ACTIONABLE_ROLES or label):
            out.append(
                Element(
                    role=n.role, name=label, bbox=normalise_box(n.box, width, height), visibility=n.visibility
                )
            )
        for c in n.children:
            walk(c)

    for n in nodes:
        walk(n)
    return out
