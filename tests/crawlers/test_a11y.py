"""Parsing Playwright's AI-mode aria snapshot (literal strings, no browser)."""

from __future__ import annotations

import pytest

from schemas.a11y import elements_from_snapshot, parse_line, parse_snapshot

SNAPSHOT = """\
- generic [active] [ref=e1] [box=8,8,1264,2143]:
  - heading "Hi 你好" [level=1] [ref=e2] [box=8,8,1264,46]
  - paragraph [ref=e3] [box=8,75,1264,18]: Price ¥59 hot
  - button "Go" [ref=e4] [box=8,109,34,21]
  - textbox "Search" [ref=e5] [box=42,109,177,21]
  - link "Link A" [ref=e6] [cursor=pointer] [box=219,110,45,17]:
    - /url: "#"
  - combobox "Size" [ref=e7] [box=268,110,34,19]:
    - option "S" [selected] [box=0,0,0,0]
  - list [ref=e8] [box=8,146,1264,36]:
    - listitem [ref=e10] [box=48,164,1224,18]:
      - text: two
      - link "x" [ref=e11] [cursor=pointer] [box=76,164,8,17]:
        - /url: /x?q=1
"""


def test_roles_names_and_boxes_normalised_to_viewport():
    els = elements_from_snapshot(SNAPSHOT, 1280, 800)
    by_name = {e.name: e for e in els}
    assert by_name["Hi 你好"].role == "heading"
    assert by_name["Go"].role == "button"
    assert by_name["Go"].bbox == pytest.approx((8 / 1280, 109 / 800, 42 / 1280, 130 / 800))
    assert by_name["Search"].role == "textbox"
    # No quoted name but inline text after the colon: the text is the name.
    assert by_name["Price ¥59 hot"].role == "paragraph"
    # The page-sized generic starts at y=8 and reaches far below the fold.
    root = els[0]
    assert root.role == "generic" and root.name == "" and root.bbox[3] > 2.5


def test_nodes_without_a_visible_box_are_not_elements():
    els = elements_from_snapshot(SNAPSHOT, 1280, 800)
    roles = [e.role for e in els]
    assert "option" not in roles  # box=0,0,0,0: a closed <select>'s option
    assert "text" not in roles  # text nodes carry no box
    assert len(els) == 10


def test_nesting_depth_and_urls_attach_to_their_node():
    nodes = parse_snapshot(SNAPSHOT)
    link_a = next(n for n in nodes if n.name == "Link A")
    x = next(n for n in nodes if n.name == "x")
    assert (link_a.depth, x.depth) == (1, 3)
    assert link_a.url == "#" and x.url == "/x?q=1"
    assert link_a.ref == "e6" and link_a.attrs == {"cursor": "pointer"}
    heading = next(n for n in nodes if n.role == "heading")
    assert heading.attrs["level"] == "1"
    assert next(n for n in nodes if n.role == "option").attrs == {"selected": ""}


def test_escaped_quotes_and_backslashes_in_names():
    n = parse_line(r'  - button "back\\slash \"q\"" [ref=e4] [box=97,8,100,21]')
    assert n.name == 'back\\slash "q"'
    assert n.box == (97, 8, 100, 21)
    n = parse_line('  - heading "Hi \\"q\\" 你好" [level=1] [ref=e2] [box=8,8,1264,46]')
    assert n.name == 'Hi "q" 你好'


def test_yaml_single_quoted_keys():
    # YAML wraps a key holding ': ' or '#' in single quotes, doubling inner quotes.
    n = parse_line("""  - 'button "it''s #1" [ref=e3] [box=46,8,50,21]'""")
    assert (n.role, n.name, n.box) == ("button", "it's #1", (46, 8, 50, 21))
    n = parse_line("""  - 'button "a: b" [ref=e2] [box=8,8,38,21]': x""")
    assert (n.name, n.text) == ("a: b", "x")


def test_double_quoted_inline_values():
    n = parse_line('  - paragraph [ref=e5] [box=8,45,1264,18]: "text: with colon"')
    assert n.name == "text: with colon"
    n = parse_line('  - paragraph [ref=e13] [box=8,306,1264,18]: "\\"starts quote"')
    assert n.name == '"starts quote'
    n = parse_line("""  - paragraph [ref=e6] [box=8,79,1264,18]: "'quoted' start\"""")
    assert n.name == "'quoted' start"


def test_quoted_name_wins_over_inline_text_and_cjk_inline_text():
    n = parse_line('  - button "lead" [ref=e9] [box=185,147,23,21]: x')
    assert (n.name, n.text) == ("lead", "x")
    n = parse_line("    - listitem [ref=e9] [box=48,146,1224,18]: 价格 ¥59 [热卖]")
    assert n.name == "价格 ¥59 [热卖]"
    n = parse_line('  - heading "[brackets] x" [level=2] [ref=e11] [box=8,222,1264,27]')
    assert (n.name, n.attrs["level"]) == ("[brackets] x", "2")


def test_negative_boxes_after_scrolling_stay_negative():
    els = elements_from_snapshot('- button "Top" [ref=e2] [box=8,-400,50,20]', 1000, 800)
    assert els[0].bbox == pytest.approx((0.008, -0.5, 0.058, -0.475))


def test_lines_that_are_not_nodes_are_ignored():
    assert parse_line("") is None
    assert parse_line("garbage") is None
    assert parse_line("  - /url: /x") == ("/url", "/x")
    assert parse_snapshot("not a snapshot\n\n") == []


# A launcher card as Chromium names it (from its content) and Playwright writes it: the
# button's name is left off the line, its text is on the child's.
LAUNCHER = """\
- generic [ref=e2] [box=8,8,784,194]:
  - button [ref=e3] [cursor=pointer] [box=16,16,122,122]:
    - paragraph [ref=e8] [box=17,89,120,18]: Text File
  - generic "Create a new markdown file" [ref=e9] [cursor=pointer] [box=158,16,122,122]:
    - paragraph [ref=e14] [box=159,89,120,18]: Markdown File
  - link [ref=e20] [box=300,16,122,122]:
    - text: Python
    - generic [box=301,89,120,18]: File
"""


def test_a_button_named_by_its_content_gets_that_name():
    nodes = {n.ref: n for n in parse_snapshot(LAUNCHER)}
    assert nodes["e3"].name == "Text File"  # name from content, as Chromium computes it
    assert nodes["e9"].name == "Create a new markdown file"  # a generic is not named by content
    assert nodes["e2"].name == ""
    assert nodes["e20"].name == "Python File"  # every text below it, in order
