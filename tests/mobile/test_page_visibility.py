"""The visibility record on phones (issue 18), from page sources.

Native Android / iOS: recorded UiAutomator2 / XCUITest dumps (tests/mobile/fixtures)
through crawlers.page_visibility: drawing order decides who takes a probe point.
No phone ran these: the fixtures are dumps recorded from real screens.
Chromium through Appium: STAMP_BOXES_JS hit-tests in the page and stamps data-tf-vis;
run here in real Chromium (Playwright, as Appium's chromedriver would run it).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from crawlers.page_nodes import Node
from crawlers.page_source import STAMP_BOXES_JS, PageSourceError, normalise
from crawlers.page_visibility import measure_nodes

FIXTURES = Path(__file__).parent / "fixtures"


def _elements(name, kind, w, h):
    return normalise(kind, (FIXTURES / name).read_text(encoding="utf-8"), w, h)[1]


def _one(els, role, name):
    (e,) = [e for e in els if e.role == role and e.name == name]
    return e


def test_an_ios_alert_window_covers_the_screen_behind_it():
    els = _elements("ios_settings.xml", "ios", 393, 852)
    assert all(e.visibility is not None for e in els)
    # The password alert's own controls are targets...
    for role, name in (("button", "Join"), ("button", "Cancel"), ("textbox", "Password")):
        assert _one(els, role, name).visibility.is_target, name
    # ...the Wi-Fi list behind it is on screen, fully, but covered by the alert's window.
    behind = _one(els, "switch", "Wi‑Fi").visibility
    assert behind.on_screen and behind.visible_fraction == 1.0
    assert not behind.centre_hit and behind.modal_covered and not behind.is_target
    assert sum(e.visibility.is_target for e in els) == 6
    assert sum(e.visibility.modal_covered for e in els) == 18


def test_a_tab_bar_drawn_later_occludes_what_scrolls_under_it():
    els = _elements("ios_shop_zh.xml", "ios", 393, 852)
    # The last cell's "add to cart" runs under the tab bar; the ones above it do not.
    carts = [e.visibility for e in els if e.role == "button" and e.name == "加入购物车"]
    assert len(carts) >= 2 and carts[0].is_target
    last = carts[-1]
    assert last.on_screen and not last.centre_hit and not last.modal_covered
    assert 28 <= sum(e.visibility.is_target for e in els) < len(els)


def test_android_screens_without_overlays_are_all_targets():
    for name, w, h in (("android_settings.xml", 1080, 2400), ("android_shop_zh.xml", 1440, 3120)):
        els = _elements(name, "android", w, h)
        assert els and all(e.visibility.is_target for e in els), name


def test_off_screen_and_partly_visible_boxes():
    screen = Node(
        "generic",
        box=(0, 0, 100, 200),
        children=[
            Node("button", name="below", box=(0, 250, 50, 20)),
            Node("button", name="half", box=(-25, 10, 50, 20)),
            Node("button", name="inside", box=(10, 50, 50, 20)),
            Node("button", name="under", box=(10, 140, 50, 20)),
        ],
    )
    sheet = Node("generic", box=(0, 100, 100, 100))  # a later window: drawn over the screen
    root = Node("application", box=(0, 0, 100, 200), children=[screen, sheet])
    below, half, inside, under = screen.children
    measure_nodes([root], 100, 200)
    assert not below.visibility.on_screen and below.visibility.hit_fraction == 0
    assert half.visibility.on_screen and half.visibility.visible_fraction == pytest.approx(0.5)
    assert not half.visibility.is_target  # half of it is off screen
    assert inside.visibility.is_target and sheet.visibility.is_target
    assert not under.visibility.centre_hit and under.visibility.modal_covered
    # A dialog inside the same window covers what it does not hold.
    dialog = Node("dialog", box=(0, 0, 100, 100))
    button = Node("button", name="behind", box=(10, 10, 20, 20))
    measure_nodes([Node("generic", box=(0, 0, 100, 200), children=[button, dialog])], 100, 200)
    assert button.visibility.modal_covered and not button.visibility.is_target


_PAGE = """<!doctype html><meta name=viewport content="width=device-width">
<body style="margin:0">
<button id=pay style="position:absolute;left:10px;top:10px;width:120px;height:40px">Pay</button>
<button id=back style="position:absolute;left:10px;top:300px;width:120px;height:40px">Back</button>
<button id=far style="position:absolute;left:10px;top:3000px;width:120px;height:40px">Far</button>
<div style="position:fixed;left:0;top:250px;width:100%;height:200px;background:rgba(0,0,0,.5)">
  <div role=dialog aria-modal=true style="margin:20px;background:#fff">
    <button id=ok style="width:100px;height:40px">OK</button></div></div>
</body>"""


@pytest.mark.slow
def test_the_chromium_stamp_hit_tests_each_element_in_the_page():
    from crawlers.browser import acquire_playwright, launch_chromium, release_playwright

    pw = acquire_playwright()
    try:
        browser = launch_chromium(pw)
        try:
            page = browser.new_page(viewport={"width": 412, "height": 915}, is_mobile=True)
            page.set_content(_PAGE)
            w, h = page.evaluate("() => {" + STAMP_BOXES_JS + "}")
            html = page.content()
        finally:
            browser.close()
    finally:
        release_playwright(pw)
    els = normalise("html", html, w, h)[1]
    pay, back, far, ok = (_one(els, "button", n).visibility for n in ("Pay", "Back", "Far", "OK"))
    assert pay.is_target and pay.hit_fraction == 1.0
    assert ok.is_target  # the dialog's own button
    assert back.on_screen and not back.centre_hit and back.modal_covered
    assert not far.on_screen and far.visible_fraction == 0 and not far.is_target


def test_a_bad_visibility_stamp_names_the_node_and_attribute():
    src = '<html><body><button data-tf-box="0,0,10,10" data-tf-vis="1,2">x</button></body></html>'
    with pytest.raises(PageSourceError, match="data-tf-vis") as err:
        normalise("html", src, 100, 100)
    assert "button" in str(err.value)
