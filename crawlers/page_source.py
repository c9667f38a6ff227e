"""Appium page sources -> the web's accessibility text and `Element`s.

A policy, a recorder or a filter should not care whether a screen came from
Playwright, an Android phone, an iPhone or a browser driven through Appium.
`normalise(kind, source, width, height)` turns each device's page source into
the same text form as the web (`- role "name" [state] [box=x,y,w,h]`, two
spaces per level, read back by `schemas.a11y.parse_snapshot`) and into
`Element`s whose boxes are normalised to [0, 1] of the screen.

Each device's parser is its own module, with its role table:
`page_source_android` (UiAutomator2 XML), `page_source_ios` (XCUITest XML),
`page_source_html` (a browser's DOM after `STAMP_BOXES_JS`). The tree they
share, and the rules every parser follows, are in `page_nodes`; the text and
`Element`s are made in `page_render`.
"""

from __future__ import annotations

from schemas.records import Element

from .page_nodes import ACTIONABLE_ROLES, Node, PageSourceError, clean_text
from .page_render import normalise_box, render_tree, to_elements
from .page_source_android import parse_android
from .page_source_html import STAMP_BOXES_JS, parse_html
from .page_source_ios import parse_ios
from .page_visibility import measure_nodes

__all__ = [
    "PageSourceError",
    "STAMP_BOXES_JS",
    "Node",
    "ACTIONABLE_ROLES",
    "normalise",
    "parse_android",
    "parse_ios",
    "parse_html",
    "render_tree",
    "to_elements",
    "normalise_box",
    "clean_text",
]


def normalise(kind: str, source: str | bytes, width: float, height: float) -> tuple[str, list[Element]]:
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
    if kind != "html":  # HTML carries the page's own hit tests (data-tf-vis)
        measure_nodes(nodes, width, height)
    return render_tree(nodes), to_elements(nodes, width, height)
