"""WebEnv on real Chromium against static pages served from a local http.server."""

from __future__ import annotations

import io
import os
import signal
import statistics
import time

import pytest
from PIL import Image

from crawlers.web_env import CHROMIUM_ARGS, BrowserCrashed, PageUnresponsive, WebEnv
from schemas.actions import Action
from schemas.records import DeviceProfile

DESKTOP = DeviceProfile(name="desktop", viewport_width=1280, viewport_height=800)
PHONE = DeviceProfile(name="phone", viewport_width=390, viewport_height=844, pixel_ratio=3.0, is_mobile=True)

pytestmark = pytest.mark.slow


def S(env, key):
    return env.page.evaluate(f"S.{key}")


def el(obs, name, role=None):
    found = obs.find(name, role, exact=True)
    assert found, f"no element {role} {name!r} in {[(e.role, e.name) for e in obs.elements]}"
    return found[0]


@pytest.fixture
def desktop(web_env, pages_url):
    """The shared env, reset onto the actions page at 1280x800."""
    obs = web_env.reset(f"{pages_url}/actions.html", DESKTOP)
    assert obs.last_action_error is None
    return web_env, obs


def test_chromium_args_are_the_agreed_quiet_set():
    assert {"--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run"} <= set(CHROMIUM_ARGS)


def test_reset_observes_the_viewport(desktop, pages_url):
    env, obs = desktop
    assert obs.screenshot[:8] == b"\x89PNG\r\n\x1a\n"
    assert (obs.width, obs.height) == (1280, 800)
    assert Image.open(io.BytesIO(obs.screenshot)).size == (1280, 800)  # viewport, not full page
    assert obs.url == f"{pages_url}/actions.html"
    assert env.episode_start_url == obs.url
    tap = el(obs, "Tap me", "button")
    x0, y0, x1, y1 = tap.bbox
    assert 0 < x0 < x1 < 0.2 and 0 < y0 < y1 < 0.1
    assert 'button "Tap me"' in obs.a11y_tree
    # Below the fold: normalised y beyond the screenshot.
    assert el(obs, "Bottom button", "button").bbox[1] > 1


def test_names_survive_chromium_snapshot_quoting(web_env, pages_url):
    obs = web_env.reset(f"{pages_url}/names.html", DESKTOP)
    got = {(e.role, e.name) for e in obs.elements}
    expected = {
        ("button", "a: b"),
        ("button", "it's #1"),
        ("button", 'back\\slash "q"'),
        ("paragraph", "text: with colon"),
        ("paragraph", '"starts quote'),
        ("heading", "[brackets] 标题"),
        ("listitem", "价格 ¥59"),
        ("button", "关闭"),
        ("link", "链接"),
    }
    assert expected <= got, expected - got


def test_tap_and_double_tap(desktop):
    env, obs = desktop
    obs = env.step(Action.tap(*el(obs, "Tap me").centre()))
    assert obs.last_action_error is None
    assert S(env, "clicks") == 1
    env.step(
        Action(type="double_tap", x=el(obs, "Double me").centre()[0], y=el(obs, "Double me").centre()[1])
    )
    assert S(env, "dbl") == 1


def test_long_press_holds_for_its_duration(desktop):
    env, obs = desktop
    x, y = el(obs, "Pad", "region").centre()
    env.step(Action(type="long_press", x=x, y=y))
    assert 750 <= S(env, "press_ms") < 2000  # default 800 ms
    env.step(Action(type="long_press", x=x, y=y, duration_ms=200))
    assert 150 <= S(env, "press_ms") < 700


def test_mouse_swipe_drags_between_the_points(desktop):
    env, obs = desktop
    x0, y0, x1, y1 = el(obs, "Pad", "region").bbox
    # From the pad's left third to its right third: 100 CSS px right, 50 down.
    sx, sy = x0 + (x1 - x0) / 6, y0 + (y1 - y0) / 4
    env.step(Action(type="swipe", x=sx, y=sy, x2=sx + 100 / 1280, y2=sy + 50 / 800))
    dx, dy = S(env, "drag")
    assert abs(dx - 100) <= 2 and abs(dy - 50) <= 2


def test_type_ascii_and_cjk_and_keys(desktop):
    env, obs = desktop
    x, y = el(obs, "Field", "textbox").centre()
    obs = env.step(Action.type_text("hello", x=x, y=y))
    assert obs.last_action_error is None
    env.step(Action.key("backspace"))
    env.step(Action.type_text("你好 ¥59"))
    assert env.page.input_value("#field") == "hell你好 ¥59"
    env.step(Action.key("enter"))
    env.step(Action.key("Tab"))
    keys = S(env, "keys")
    assert keys[:5] == ["h", "e", "l", "l", "o"]
    assert "Backspace" in keys and "Enter" in keys and keys[-1] == "Tab"


def test_select_by_label_or_value_and_error_off_target(desktop):
    env, obs = desktop
    x, y = el(obs, "Size", "combobox").centre()
    obs = env.step(Action(type="select", x=x, y=y, text="Large 大"))
    assert obs.last_action_error is None
    assert env.page.input_value("#size") == "l" and S(env, "changes") == 1
    env.step(Action(type="select", x=x, y=y, text="m"))
    assert env.page.input_value("#size") == "m"
    obs = env.step(Action(type="select", x=x, y=y, text="Huge"))
    assert "no option" in obs.last_action_error and "Medium" in obs.last_action_error
    tx, ty = el(obs, "Tap me").centre()
    obs = env.step(Action(type="select", x=tx, y=ty, text="Small"))
    assert "no <select>" in obs.last_action_error
    assert env.page.input_value("#size") == "m"


def test_scroll_moves_the_view_and_boxes_stay_viewport_relative(desktop):
    env, obs = desktop
    obs = env.step(Action.scroll("down"))
    assert obs.last_action_error is None
    assert env.page.evaluate("scrollY") == pytest.approx(0.6 * 800, abs=2)
    # The top button is now above the screen.
    assert el(obs, "Tap me").bbox[3] < 0
    for _ in range(5):
        if el(obs, "Bottom button").bbox[3] <= 1:
            break
        obs = env.step(Action.scroll("down"))
    bottom = el(obs, "Bottom button")
    assert all(0 <= c <= 1 for c in bottom.bbox), bottom.bbox
    # The box is where the button is on screen: tapping its centre hits it.
    env.step(Action.tap(*bottom.centre()))
    assert S(env, "bottom") == 1
    env.step(Action.scroll("up"))
    assert env.page.evaluate("scrollY") < 2500 - 400


def test_navigation_back_home_and_open_app(desktop, pages_url):
    env, obs = desktop
    start = obs.url
    obs = env.step(Action.tap(*el(obs, "Next page", "link").centre()))
    assert obs.last_action_error is None
    assert obs.url == f"{pages_url}/second.html"
    assert el(obs, "Second page", "heading") and el(obs, "Price ¥59 hot", "paragraph")
    obs = env.step(Action(type="back"))
    assert obs.url == start and obs.last_action_error is None
    obs = env.step(Action(type="back"))
    assert obs.url == start and "first page" in obs.last_action_error
    obs = env.step(Action(type="open_app", text=f"{pages_url}/second.html"))
    assert obs.url.endswith("/second.html") and obs.last_action_error is None
    obs = env.step(Action.key("back"))
    assert obs.url == start
    env.step(Action(type="open_app", text=f"{pages_url}/second.html"))
    obs = env.step(Action(type="home"))
    assert obs.url == start and el(obs, "Tap me")
    obs = env.step(Action(type="open_app", text="Settings"))
    assert "not a URL" in obs.last_action_error and obs.url == start


def test_a_link_that_opens_a_new_tab_is_followed(desktop, pages_url):
    env, obs = desktop
    obs = env.step(Action.tap(*el(obs, "New tab", "link").centre()))
    assert obs.last_action_error is None
    assert obs.url == f"{pages_url}/second.html" and el(obs, "Second page", "heading")
    assert len(env.context.pages) == 2


def test_wait_and_terminal_actions(desktop):
    env, obs = desktop
    t0 = time.perf_counter()
    obs = env.step(Action(type="wait", duration_ms=300))
    assert time.perf_counter() - t0 >= 0.3 and obs.last_action_error is None
    for t in ("answer", "done", "take_over"):
        obs = env.step(Action(type=t, text="x"))
        assert obs.last_action_error is None and obs.url.endswith("/actions.html")
    assert S(env, "clicks") == 0


def test_jpeg_screenshots(web_env, pages_url):
    web_env.image_format = "jpeg"
    try:
        obs = web_env.reset(f"{pages_url}/second.html", DESKTOP)
    finally:
        web_env.image_format = "png"
    assert obs.image_format == "jpeg" and obs.screenshot[:3] == b"\xff\xd8\xff"
    assert (obs.width, obs.height) == (1280, 800)


def test_mobile_profile_css_screenshot_and_touch(web_env, pages_url):
    obs = web_env.reset(f"{pages_url}/actions.html", PHONE)
    assert (obs.width, obs.height) == (390, 844)
    assert Image.open(io.BytesIO(obs.screenshot)).size == (390, 844)
    assert web_env.page.evaluate("devicePixelRatio") == 3
    web_env.step(Action.tap(*el(obs, "Tap me").centre()))
    assert S(web_env, "clicks") == 1
    x, y = el(obs, "Pad", "region").centre()
    web_env.step(Action(type="long_press", x=x, y=y))
    assert S(web_env, "touch") == ["start", "end"]
    assert 750 <= S(web_env, "touch_ms") < 2000
    web_env.step(Action(type="swipe", x=x, y=y, x2=x, y2=y - 0.15, duration_ms=200))
    assert S(web_env, "touch")[-2:] == ["start", "end"]
    assert S(web_env, "touch_moves") >= 5
    # A finger swiping up scrolls the page down, as on a phone.
    assert web_env.page.evaluate("scrollY") > 50


# The slow page answers after 30 s; the step timeout is 1.5 s. The bounds leave
# room for a loaded 2-core machine (a new page alone can take a second there).
HANG_BOUND_S = 10


def test_zoomed_out_mobile_page_boxes_and_taps_match_the_screenshot(web_env, pages_url):
    obs = web_env.reset(f"{pages_url}/wide.html", PHONE)
    assert web_env.page.evaluate("visualViewport.scale") < 0.5  # laid out 1200 px wide
    far = el(obs, "Far button", "button")
    x0, y0, x1, y1 = far.bbox
    assert 0 < x0 < x1 < 1 and 0 < y0 < y1 < 1  # on screen, though at layout x=600
    cx, cy = far.centre()
    img = Image.open(io.BytesIO(obs.screenshot)).convert("RGB")
    # Near the box's left and right edges (the label sits in the middle) the screenshot is red.
    for fx in (0.1, 0.9):
        px = x0 + fx * (x1 - x0)
        assert img.getpixel((int(px * obs.width), int(cy * obs.height))) == (255, 0, 0)
    # Just outside the box it is not.
    assert img.getpixel((int(x1 * obs.width) + 3, int(cy * obs.height))) != (255, 0, 0)
    web_env.step(Action.tap(cx, cy))
    assert S(web_env, "clicks") == 1


def test_page_that_never_loads_does_not_hang(web_env, pages_url):
    web_env.step_timeout_s = 1.5
    try:
        t0 = time.perf_counter()
        obs = web_env.reset(f"{pages_url}/slow?s=30", DESKTOP)
        assert time.perf_counter() - t0 < HANG_BOUND_S
        assert "did not reach domcontentloaded" in obs.last_action_error
        obs = web_env.reset(f"{pages_url}/actions.html", DESKTOP)
        t0 = time.perf_counter()
        obs = web_env.step(Action(type="open_app", text=f"{pages_url}/slow?s=30"))
        assert time.perf_counter() - t0 < HANG_BOUND_S
        assert "/slow" in obs.last_action_error
        # The pending navigation was stopped: the old page is still usable.
        assert obs.url.endswith("/actions.html") and el(obs, "Tap me")
        obs = web_env.step(Action.tap(*el(obs, "Tap me").centre()))
        assert obs.last_action_error is None and S(web_env, "clicks") == 1
        # A link whose target never answers: same, through the settle path.
        web_env.page.evaluate("document.getElementById('next').href = '/slow?s=30'")
        obs = web_env.step(Action.tap(*el(obs, "Next page").centre()))
        assert "/slow" in obs.last_action_error and obs.url.endswith("/actions.html")
        # A sub-resource that never arrives delays `load`, not the step: waiting
        # for `load` would have ended in a timeout error.
        obs = web_env.reset(f"{pages_url}/hang_subresource.html", DESKTOP)
        assert obs.last_action_error is None and el(obs, "Slow image", "heading")
    finally:
        web_env.step_timeout_s = 10.0


def test_tap_observe_latency(desktop, capsys):
    env, obs = desktop
    x, y = el(obs, "Tap me").centre()
    env.step(Action.tap(x, y))  # warm
    times = []
    for _ in range(15):
        t0 = time.perf_counter()
        env.step(Action.tap(x, y))
        times.append((time.perf_counter() - t0) * 1000)
    assert S(env, "clicks") == 16
    with capsys.disabled():
        print(
            f"\n[web_env] tap+observe 1280x800 PNG: median {statistics.median(times):.0f} ms, "
            f"max {max(times):.0f} ms over {len(times)} steps"
        )


def test_request_filter_aborts_and_lists_blocked_requests(pages_url, other_pages_url):
    other = other_pages_url
    port = other.rsplit(":", 1)[1]
    # Anything on the other server's port is refused, http or ws.
    with WebEnv.launch(request_filter=lambda url: f"127.0.0.1:{port}/" not in url) as env:
        obs = env.reset(f"{pages_url}/blocked.html?other={port}", DESKTOP)
        assert obs.last_action_error is None
        env.page.wait_for_function("R !== 'pending' && WS !== 'pending'", timeout=10000)
        assert env.page.evaluate("[R, WS]") == ["failed", "closed"]
        ws_url = "ws://" + other.split("://", 1)[1] + "/socket"
        assert sorted(env.blocked_requests) == sorted([f"{other}/second.html", ws_url])
        # A navigation to a blocked origin fails with an error, not a hang.
        obs = env.step(Action(type="open_app", text=f"{other}/second.html"))
        assert obs.last_action_error and "BLOCKED_BY_CLIENT" in obs.last_action_error.upper()
        assert env.blocked_requests[-1] == f"{other}/second.html"
        # Allowed pages still load.
        obs = env.step(Action(type="open_app", text=f"{pages_url}/second.html"))
        assert obs.last_action_error is None and el(obs, "Second page")
        # Each episode starts with an empty list.
        env.reset(f"{pages_url}/second.html", DESKTOP)
        assert env.blocked_requests == []


def test_killed_browser_raises_browser_crashed_and_restart_recovers(pages_url):
    with WebEnv.launch(step_timeout_s=3.0) as env:
        env.reset(f"{pages_url}/actions.html", DESKTOP)
        pid = env.browser_pid
        assert pid and env.is_alive()
        os.kill(pid, signal.SIGKILL)
        deadline = time.time() + 5
        while env.is_alive() and time.time() < deadline:
            time.sleep(0.05)
        assert not env.is_alive()
        with pytest.raises(BrowserCrashed):
            env.step(Action.tap(0.5, 0.5))
        with pytest.raises(BrowserCrashed):
            env.observe()
        with pytest.raises(BrowserCrashed):
            env.reset(f"{pages_url}/actions.html", DESKTOP)
        env.restart()
        assert env.is_alive() and env.browser_pid != pid
        obs = env.reset(f"{pages_url}/actions.html", DESKTOP)
        env.step(Action.tap(*el(obs, "Tap me").centre()))
        assert S(env, "clicks") == 1


def test_busy_page_raises_page_unresponsive_and_reset_recovers(web_env, pages_url):
    web_env.step_timeout_s = 1.0
    try:
        web_env.reset(f"{pages_url}/actions.html", DESKTOP)
        web_env.page.evaluate("setTimeout(() => { while (true) {} }, 0)")
        t0 = time.perf_counter()
        # Either the click blocks (input dispatch has no timeout) and the watchdog
        # frees it, or the click lands before the loop starts and observing times
        # out: both must end in PageUnresponsive, quickly.
        with pytest.raises(PageUnresponsive, match="renderer was killed|did not answer"):
            web_env.step(Action.tap(0.5, 0.5))
        assert time.perf_counter() - t0 < HANG_BOUND_S
        assert web_env.is_alive()  # only the page's renderer went
        obs = web_env.reset(f"{pages_url}/second.html", DESKTOP)
        assert el(obs, "Second page")
    finally:
        web_env.step_timeout_s = 10.0
