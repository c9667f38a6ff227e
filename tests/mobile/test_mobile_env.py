"""MobileEnv on real Appium + chromedriver + Chromium phones (touch events, not mouse).

The touch page (pages/touch.html) records every touch/click event with its
time and CSS px position in `window.events`; tests read it back through the
session and assert the gesture's shape. The Android/iOS command translation
is checked at the end against a recording driver: no phone is attached here.
"""

from __future__ import annotations

import io
import os
import socket
import threading
import time
import urllib.request
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest
from PIL import Image

from crawlers.appium_server import free_port
from crawlers.capabilities import DeviceSpec, chromium_device
from crawlers.mobile_env import MobileEnv, SessionLost
from crawlers.randomise import MOBILE_PROFILES
from crawlers.web_env import BrowserCrashed
from schemas.actions import Action, ActionType

from .conftest import PAGES

W, H = 412, 915  # pixel_8 CSS viewport


def _events(env) -> list[dict]:
    """The page's recorded events since the last call."""
    return env.driver.execute_script("const e = window.events; window.events = []; return e;")


def _touch_page(env, pages_url):
    obs = env.reset(f"{pages_url}/touch.html")
    assert obs.last_action_error is None
    _events(env)
    return obs


# ---------------------------------------------------------------------- gestures
def test_reset_observes_the_phone_screen(mobile_env, pages_url):
    obs = _touch_page(mobile_env, pages_url)
    p = MOBILE_PROFILES["pixel_8"]
    assert mobile_env.platform == "mobile_web"
    # Device pixels, read from the PNG itself: 412x915 CSS px at 2.625.
    assert (obs.width, obs.height) == (round(W * p.pixel_ratio), round(H * p.pixel_ratio))
    assert Image.open(io.BytesIO(obs.screenshot)).format == "PNG"
    assert obs.url == f"{pages_url}/touch.html"
    pad = obs.find("Touch pad", role="region")[0]
    assert pad.bbox == pytest.approx((0, 0, 1, 300 / H), abs=1e-3)
    assert obs.find("Go", role="button") and obs.find("Second page", role="link")
    assert '- button "Go"' in obs.a11y_tree
    ua = mobile_env.driver.execute_script("return navigator.userAgent")
    assert "Android" in ua and "Mobile" in ua


def test_tap_is_a_touch_at_the_point(mobile_env, pages_url):
    _touch_page(mobile_env, pages_url)
    obs = mobile_env.step(Action.tap(0.25, 0.1))
    assert obs.last_action_error is None
    ev = _events(mobile_env)
    assert [e["type"] for e in ev] == ["touchstart", "touchend", "click"]
    assert (ev[0]["x"], ev[0]["y"]) == (round(0.25 * W), round(0.1 * H))


def test_double_tap_is_two_quick_touches(mobile_env, pages_url):
    _touch_page(mobile_env, pages_url)
    mobile_env.step(Action(type=ActionType.DOUBLE_TAP, x=0.5, y=0.2))
    ev = _events(mobile_env)
    starts = [e for e in ev if e["type"] == "touchstart"]
    assert len(starts) == 2 and [e["type"] for e in ev].count("click") == 2
    assert "dblclick" in [e["type"] for e in ev]
    assert starts[1]["t"] - starts[0]["t"] < 400


@pytest.mark.parametrize("duration_ms", [None, 600])
def test_long_press_holds_still_for_its_duration(mobile_env, pages_url, duration_ms):
    _touch_page(mobile_env, pages_url)
    obs = mobile_env.step(Action(type=ActionType.LONG_PRESS, x=0.5, y=0.15, duration_ms=duration_ms))
    assert obs.last_action_error is None
    ev = _events(mobile_env)
    types = [e["type"] for e in ev]
    assert types[:2] == ["touchstart", "touchend"] and "touchmove" not in types
    held = ev[1]["t"] - ev[0]["t"]
    want = duration_ms or 800
    assert want - 20 <= held <= want + 300, held


def test_swipe_moves_in_steps_from_start_to_end(mobile_env, pages_url):
    _touch_page(mobile_env, pages_url)
    mobile_env.step(Action(type=ActionType.SWIPE, x=0.8, y=0.15, x2=0.2, y2=0.15, duration_ms=300))
    ev = _events(mobile_env)
    assert ev[0]["type"] == "touchstart" and ev[-1]["type"] == "touchend"
    moves = [e for e in ev if e["type"] == "touchmove"]
    xs = [m["x"] for m in moves]
    assert len(moves) >= 4 and xs == sorted(xs, reverse=True)  # leftwards, step by step
    assert ev[0]["x"] == round(0.8 * W) and moves[-1]["x"] == round(0.2 * W)
    assert {e["y"] for e in ev} == {round(0.15 * H)}
    assert 250 <= moves[-1]["t"] - ev[0]["t"] <= 900
    assert mobile_env.driver.execute_script("return scrollY") == 0  # touch-action: none


def test_scroll_down_reveals_below_and_up_returns(mobile_env, pages_url):
    _touch_page(mobile_env, pages_url)
    obs = mobile_env.step(Action.scroll("down"))
    assert obs.last_action_error is None
    y = mobile_env.driver.execute_script("return scrollY")
    # Half the screen is dragged; the browser keeps back its touch slop (~15 px).
    assert 0.5 * H - 40 <= y <= 0.5 * H + 5, y
    # Boxes are of the viewport: the pad moved up by the scrolled distance.
    pad = obs.find("Touch pad", role="region")[0]
    assert pad.bbox[1] == pytest.approx(-y / H, abs=2 / H)
    mobile_env.step(Action.scroll("up"))
    assert mobile_env.driver.execute_script("return scrollY") == 0


def test_type_chinese_then_enter_submits(mobile_env, pages_url):
    obs = _touch_page(mobile_env, pages_url)
    box = obs.find("Query", role="textbox")[0]
    text = "手机壳 防摔 case 😀"
    obs = mobile_env.step(Action.type_text(text, *box.centre()))
    assert obs.last_action_error is None
    assert mobile_env.driver.execute_script("return document.getElementById('q').value") == text
    assert text in obs.a11y_tree  # the field's live value reaches the tree
    obs = mobile_env.step(Action.key("Enter"))
    assert obs.last_action_error is None
    assert mobile_env.driver.execute_script("return window.submitted") == [text]


def test_type_without_a_focused_field_is_an_error(mobile_env, pages_url):
    _touch_page(mobile_env, pages_url)
    obs = mobile_env.step(Action.type_text("hello"))
    assert obs.last_action_error == "type: no text field has the focus: tap one first"
    obs = mobile_env.step(Action.key("NoSuchKey"))
    assert obs.last_action_error == "key: unknown key 'NoSuchKey'"


def test_select_picks_an_option_by_its_label(mobile_env, pages_url):
    obs = _touch_page(mobile_env, pages_url)
    box = obs.find("Size", role="combobox")[0]
    obs = mobile_env.step(Action(type=ActionType.SELECT, x=box.centre()[0], y=box.centre()[1], text="Large"))
    assert obs.last_action_error is None
    assert mobile_env.driver.execute_script("return document.getElementById('size').value") == "Large"
    obs = mobile_env.step(Action(type=ActionType.SELECT, x=box.centre()[0], y=box.centre()[1], text="Huge"))
    assert obs.last_action_error.startswith('select: no option "Huge" in the <select>')


def test_back_home_and_open_app(mobile_env, pages_url):
    obs = _touch_page(mobile_env, pages_url)
    obs = mobile_env.step(Action.tap(*obs.find("Second page", role="link")[0].centre()))
    assert obs.url == f"{pages_url}/second.html" and obs.find("Second page", role="heading")
    obs = mobile_env.step(Action.key("back"))
    assert obs.last_action_error is None and obs.url == f"{pages_url}/touch.html"
    obs = mobile_env.step(Action(type=ActionType.BACK))
    assert obs.last_action_error == "back: already at the first page of this episode"
    obs = mobile_env.step(Action(type=ActionType.OPEN_APP, text="/second.html"))
    assert obs.last_action_error is None and obs.url == f"{pages_url}/second.html"
    obs = mobile_env.step(Action(type=ActionType.HOME))
    assert obs.url == f"{pages_url}/touch.html"
    obs = mobile_env.step(Action(type=ActionType.OPEN_APP, text="Calculator"))
    assert "neither a URL, a path, nor an app" in obs.last_action_error


# ---------------------------------------------------------------------- alignment
_CELLS = (0, 14, 23)  # two corners and one off-centre cell


def _assert_boxes_line_up(env, pages_url):
    """Each cell's box centre is on that cell's colour in the screenshot, and a tap there hits it."""
    obs = env.reset(f"{pages_url}/grid.html")
    img = Image.open(io.BytesIO(obs.screenshot)).convert("RGB")
    assert img.size == (obs.width, obs.height)
    for i in _CELLS:
        cell = obs.find(f"Cell {i}", role="button", exact=True)[0]
        cx, cy = cell.centre()
        want = (40 + (i % 4) * 60, 30 + (i // 4) * 40, 200 - (i % 3) * 70)
        got = img.getpixel((int(cx * obs.width), int(cy * obs.height)))
        # The label text is drawn at the centre: sample just above it.
        above = img.getpixel(
            (int(cx * obs.width), int((cell.bbox[1] + 0.15 * (cell.bbox[3] - cell.bbox[1])) * obs.height))
        )
        # JPEG shifts colours a little; another cell's colour is far off.
        assert min(_diff(want, got), _diff(want, above)) <= 12, (i, want, got, above)
        env.step(Action.tap(cx, cy))
    assert env.driver.execute_script("return window.hits") == [f"Cell {i}" for i in _CELLS]


def _diff(a, b) -> int:
    return max(abs(x - y) for x, y in zip(a, b))


@pytest.mark.parametrize("profile", sorted(MOBILE_PROFILES))
def test_element_boxes_line_up_with_screenshot_and_taps(profile, mobile_env, appium_url, pages_url):
    if profile == "pixel_8":
        _assert_boxes_line_up(mobile_env, pages_url)
        return
    p = MOBILE_PROFILES[profile]
    # The iPhone also covers CSS-scale JPEG screenshots (one image px per CSS px).
    css = profile == "iphone_15"
    with MobileEnv(
        appium_url,
        chromium_device(profile),
        chromedriver_port=free_port(),
        screenshot_scale="css" if css else "device",
        image_format="jpeg" if css else "png",
    ) as env:
        _assert_boxes_line_up(env, pages_url)
        obs = env.observe()
        scale = 1 if css else p.pixel_ratio
        assert (obs.width, obs.height) == (round(p.viewport_width * scale), round(p.viewport_height * scale))
        assert Image.open(io.BytesIO(obs.screenshot)).format == ("JPEG" if css else "PNG")
        ua = env.driver.execute_script("return navigator.userAgent")
        assert ("iPhone" in ua) == (profile == "iphone_15")


def test_episode_theme_and_locale_follow_the_device(mobile_env, pages_url):
    themed = MOBILE_PROFILES["pixel_8"].model_copy(update={"locale": "zh-CN", "theme": "dark"})
    obs = mobile_env.reset(f"{pages_url}/second.html", device=themed)
    assert obs.last_action_error is None and mobile_env.device == themed
    read = (
        "return [Intl.DateTimeFormat().resolvedOptions().locale,"
        " matchMedia('(prefers-color-scheme: dark)').matches]"
    )
    assert mobile_env.driver.execute_script(read) == ["zh-CN", True]
    mobile_env.reset(f"{pages_url}/second.html")  # back to the profile's own
    assert mobile_env.driver.execute_script(read) == ["en-US", False]
    # The screen is the session's: another size is a different device.
    with pytest.raises(ValueError, match="a session's screen is fixed"):
        mobile_env.reset(f"{pages_url}/second.html", device=MOBILE_PROFILES["cn_android_large"])


# ---------------------------------------------------------------------- network and sandbox
def _lan_ip() -> str | None:
    """This host's non-loopback address (reachable without any proxy), if it has one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # no packet is sent for UDP connect
            ip = s.getsockname()[0]
        except OSError:
            return None
    return None if ip.startswith("127.") else ip


def test_only_loopback_is_reachable(mobile_env, pages_url, sandbox_server):
    from sandbox.apps import MOBILE_APPS
    from sandbox.server import start_url

    ip = _lan_ip()
    if ip is None:
        pytest.skip("no non-loopback address to test the allowlist against")

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *a):
            pass

    outside = ThreadingHTTPServer((ip, 0), partial(Quiet, directory=str(PAGES)))
    threading.Thread(target=outside.serve_forever, daemon=True).start()
    try:
        target = f"http://{ip}:{outside.server_port}/second.html"
        with urllib.request.urlopen(target, timeout=5) as r:  # reachable from this host
            assert r.status == 200
        # A page on loopback fetches it: the browser's request fails.
        obs = mobile_env.reset(f"{pages_url}/fetch.html?url={target}")
        for _ in range(20):
            status = mobile_env.driver.execute_script("return document.getElementById('out').textContent")
            if status != "pending":
                break
            time.sleep(0.1)
        assert status == "blocked"
        # The same page fetching a loopback URL succeeds (the page's logic works).
        mobile_env.reset(
            f"{pages_url}/fetch.html?url=http://localhost:{pages_url.rsplit(':', 1)[1]}/second.html"
        )
        for _ in range(20):
            status = mobile_env.driver.execute_script("return document.getElementById('out').textContent")
            if status != "pending":
                break
            time.sleep(0.1)
        assert status == "fetched"
        # Navigating there is an error in the observation, not an exception.
        obs = mobile_env.reset(target)
        assert "ERR_PROXY_CONNECTION_FAILED" in (obs.last_action_error or "")
    finally:
        outside.shutdown()
        outside.server_close()
    # The sandbox (on 127.0.0.1) works: a mobile app opens through /start.
    app = sorted(MOBILE_APPS)[0]
    obs = mobile_env.reset(start_url(sandbox_server.url, sid="mobile-env-net", app=app, lang="zh", seed=3))
    assert obs.last_action_error is None and obs.url == f"{sandbox_server.url}/{app}/"
    assert obs.elements and mobile_env.episode_start_url == obs.url


# ---------------------------------------------------------------------- session loss
def _chromedrivers_on(port: int) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    cmd = f.read().decode("utf-8", "replace")
            except OSError:
                continue
            if "chromedriver" in cmd and f"--port={port}\0" in cmd:
                pids.append(int(entry))
    return pids


def test_lost_session_raises_then_restart_recovers(mobile_env, pages_url):
    _touch_page(mobile_env, pages_url)
    # 1. The session ends behind the env's back (what newCommandTimeout does).
    mobile_env.driver.quit()
    assert not mobile_env.is_alive()
    with pytest.raises(SessionLost, match="session"):
        mobile_env.step(Action.tap(0.5, 0.5))
    mobile_env.restart()
    obs = _touch_page(mobile_env, pages_url)
    assert obs.find("Go", role="button")
    # 2. The browser side dies: the session's chromedriver is killed.
    pids = _chromedrivers_on(mobile_env.chromedriver_port)
    if not pids:
        pytest.skip("the session's chromedriver is not on this host (external Appium)")
    for pid in pids:
        os.kill(pid, 9)
    with pytest.raises(BrowserCrashed) as info:  # SessionLost is a BrowserCrashed
        mobile_env.step(Action.tap(0.5, 0.5))
    assert isinstance(info.value, SessionLost)
    mobile_env.restart()
    _touch_page(mobile_env, pages_url)
    obs = mobile_env.step(Action.tap(0.25, 0.1))
    assert obs.last_action_error is None
    assert [e["type"] for e in _events(mobile_env)] == ["touchstart", "touchend", "click"]


# ---------------------------------------------------------------------- phones (no device)
class _RecordingDriver:
    """Stands in for an Appium driver of a phone: records commands, serves a fixed screen."""

    def __init__(self, kind: str, png: bytes, source: str):
        self.kind, self.png, self.page_source, self.calls = kind, png, source, []
        self.session_id = "fake"
        self.switch_to = type("SwitchTo", (), {})()
        field = type("Field", (), {"send_keys": lambda _s, text: self.calls.append(("send_keys", text))})()
        self.switch_to.active_element = field
        self.current_package, self.current_activity = "com.android.settings", ".Settings"

    def get_screenshot_as_png(self):
        return self.png

    def get_window_size(self):
        return {"width": 393, "height": 852}

    def execute(self, command, params=None):  # W3C actions arrive here
        self.calls.append(("actions", params["actions"][0]["actions"]))
        return {"value": None}

    def execute_script(self, script, *args):
        if script == "mobile: activeAppInfo":  # read by every iOS observation
            return {"bundleId": "com.apple.Preferences"}
        self.calls.append(("script", script, *args))

    def press_keycode(self, code):
        self.calls.append(("keycode", code))

    def activate_app(self, app):
        self.calls.append(("activate", app))

    def terminate_app(self, app):
        self.calls.append(("terminate", app))

    def quit(self):
        pass


_ANDROID_XML = (
    '<?xml version="1.0"?><hierarchy><node class="android.widget.Button" '
    'text="OK" clickable="true" enabled="true" bounds="[540,1200][1080,1350]"/></hierarchy>'
)
_IOS_XML = (
    '<?xml version="1.0"?><AppiumAUT><XCUIElementTypeApplication name="Settings" x="0" y="0" '
    'width="393" height="852" visible="true"><XCUIElementTypeButton name="OK" label="OK" '
    'x="196" y="400" width="197" height="50" visible="true" enabled="true"/>'
    "</XCUIElementTypeApplication></AppiumAUT>"
)


def _phone_env(monkeypatch, kind: str) -> tuple[MobileEnv, _RecordingDriver]:
    size, xml = ((1080, 2400), _ANDROID_XML) if kind == "android" else ((1179, 2556), _IOS_XML)
    buf = io.BytesIO()
    Image.new("RGB", size, "white").save(buf, "PNG")
    driver = _RecordingDriver(kind, buf.getvalue(), xml)

    def fake_open(self):
        self.driver, self._lost, self._space = driver, None, None
        self._client = type("ClientConfig", (), {"timeout": 20})()

    monkeypatch.setattr(MobileEnv, "_open_session", fake_open)
    monkeypatch.setattr("crawlers.mobile_env._PHONE_SETTLE_S", 0)
    profile = MOBILE_PROFILES["pixel_8" if kind == "android" else "iphone_15"]
    spec = DeviceSpec(
        name=f"lab_{kind}",
        kind=kind,
        profile=profile,
        capabilities={"appium:udid": "U1"},
        apps={"settings": "com.android.settings" if kind == "android" else "com.apple.Preferences"},
    )
    return MobileEnv("http://farm:4723", spec, chromedriver_port=1), driver


def _tap_point(calls) -> tuple[int, int]:
    move = next(c for c in calls if c[0] == "actions")[1][0]
    return move["x"], move["y"]


def test_android_commands_use_device_pixels_and_keycodes(monkeypatch):
    env, driver = _phone_env(monkeypatch, "android")
    assert env.platform == "android"
    obs = env.reset("settings")
    assert driver.calls[:2] == [("terminate", "com.android.settings"), ("activate", "com.android.settings")]
    assert obs.url == "com.android.settings/.Settings" and (obs.width, obs.height) == (1080, 2400)
    ok = obs.find("OK", role="button")[0]
    assert ok.bbox == pytest.approx((0.5, 0.5, 1.0, 1350 / 2400))
    driver.calls.clear()
    env.step(Action.tap(*ok.centre()))
    assert _tap_point(driver.calls) == (810, 1275)  # device px, the bounds' units
    for key, code in (("Enter", 66), ("back", 4), ("home", 3)):
        driver.calls.clear()
        assert env.step(Action.key(key)).last_action_error is None
        assert driver.calls == [("keycode", code)]
    driver.calls.clear()
    env.step(Action(type=ActionType.BACK))
    env.step(Action(type=ActionType.HOME))
    assert driver.calls == [("keycode", 4), ("keycode", 3)]
    driver.calls.clear()
    env.step(Action.type_text("你好"))
    assert driver.calls == [("send_keys", "你好")]
    driver.calls.clear()
    env.step(Action(type=ActionType.OPEN_APP, text="com.example.app/.Main"))
    assert driver.calls == [("script", "mobile: startActivity", {"intent": "com.example.app/.Main"})]
    assert "unknown Android key" in env.step(Action.key("F13")).last_action_error
    with pytest.raises(ValueError, match="a session's screen is fixed"):
        env.reset("settings", device=MOBILE_PROFILES["cn_android_large"])


def test_ios_commands_use_points_and_buttons(monkeypatch):
    env, driver = _phone_env(monkeypatch, "ios")
    obs = env.reset("settings")
    assert obs.url == "com.apple.Preferences" and (obs.width, obs.height) == (1179, 2556)
    ok = obs.find("OK", role="button")[0]
    driver.calls.clear()
    env.step(Action.tap(*ok.centre()))
    assert _tap_point(driver.calls) == (294, 425)  # points, not pixels
    driver.calls.clear()
    env.step(Action.key("Enter"))
    env.step(Action(type=ActionType.HOME))
    assert driver.calls == [("send_keys", "\n"), ("script", "mobile: pressButton", {"name": "home"})]
    obs = env.step(Action(type=ActionType.BACK))
    assert obs.last_action_error.startswith("back: iOS has no back button")
    obs = env.step(Action(type=ActionType.SELECT, x=0.5, y=0.5, text="x"))
    assert "not available on a phone" in obs.last_action_error
