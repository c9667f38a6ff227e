"""The Appium environment for mobile crawls: reset / step / observe, like WebEnv.

One Appium session per `MobileEnv`, on one device (`DeviceSpec`): a phone
emulated in Chromium ("chromium", platform "mobile_web"), an Android phone
(UiAutomator2) or an iPhone (XCUITest). The interface is WebEnv's, so the
runner drives either.

Choices worth knowing:

- Gestures are W3C pointer actions with a touch pointer, so pages see real
  touchstart/touchmove/touchend. Chromedriver jumps a pointer move to its end
  point in one event whatever its duration, so a swipe is cut into several
  short moves (about one per 50 ms) and held still 100 ms before lifting:
  gesture code sees a drag, and a scroll moves the page by the drag distance
  instead of flinging on.
- Coordinates: Chromium takes CSS px of the layout viewport, UiAutomator2
  device px, XCUITest points. Each observation keeps the size of that space;
  normalised action points and element boxes both map through it.
- Screenshots on the Chromium phone come from the DevTools protocol
  (Page.captureScreenshot through Appium's proxy to chromedriver): at device
  pixels it costs what chromedriver's own screenshot does, and it also gives
  JPEG and `screenshot_scale="css"` (one image px per CSS px, 2.5x faster).
  The default, "device", matches what a real phone's screenshot looks like.
- The page source goes through `crawlers.page_source.normalise` (HTML with
  boxes stamped by STAMP_BOXES_JS on Chromium; UiAutomator2/XCUITest XML on
  phones) into the same accessibility text and Elements as web.
- The Chromium phone reaches loopback only (a proxy allowlist in its flags);
  blocked requests fail inside the browser and are not itemised, so
  `blocked_requests` stays empty.
- A failed action never raises: the observation carries `last_action_error`.
  A session or server that is gone (or stops answering within the step
  timeout) raises `SessionLost`, a BrowserCrashed; `restart()` opens a new
  session with the same capabilities.
"""
from __future__ import annotations

import base64
import http.client
import io
import logging
import re
import time
from typing import Any, Callable, TypeVar
from urllib.parse import urljoin, urlparse

import urllib3
from appium import webdriver
from appium.options.common.base import AppiumOptions
from appium.webdriver.client_config import AppiumClientConfig
from PIL import Image
from selenium.common.exceptions import InvalidSessionIdException, WebDriverException
from selenium.webdriver.common.actions import interaction
from selenium.webdriver.common.actions.action_builder import ActionBuilder
from selenium.webdriver.common.actions.pointer_input import PointerInput
from selenium.webdriver.common.keys import Keys

from schemas.actions import Action, ActionType
from schemas.observation import Observation
from schemas.records import DeviceProfile

from . import page_source
from .capabilities import DeviceSpec, build_capabilities
from .web_env import _SELECT_AT_JS, ActionError, BrowserCrashed

__all__ = ["MobileEnv", "SessionLost"]

T = TypeVar("T")
log = logging.getLogger(__name__)


class SessionLost(BrowserCrashed):
    """The Appium session (or its server) is gone; call `restart()` and retry."""


_DEFAULT_LONG_PRESS_MS = 800
_DEFAULT_SWIPE_MS = 300
_DEFAULT_WAIT_MS = 500
_TAP_HOLD_S = 0.05
_DOUBLE_TAP_GAP_S = 0.1
_SWIPE_MOVE_MS = 50            # one pointer move per ~50 ms of swipe
_SWIPE_END_HOLD_S = 0.1        # still before lifting: a drag, not a fling
_SCROLL_FRACTION = 0.5         # a scroll drags half the screen
_PHONE_SETTLE_S = 0.4          # phones: no page to ask, a short fixed pause
_SETTLE_CAP_MS = 2000          # Chromium: longest wait for load + frames
_SESSION_START_S = {"chromium": 60.0, "android": 300.0, "ios": 300.0}
_PROBE_TIMEOUT_S = 5.0

# Resolves with location.href once the document has loaded and painted twice
# (after a scroll: once no scroll event has fired for 60 ms, at most 600 ms).
_SETTLE_JS = """
const done = arguments[arguments.length - 1], cap = arguments[0], scrolled = arguments[1];
const t0 = performance.now();
const finish = () => done(location.href);
const frames = () => requestAnimationFrame(() => requestAnimationFrame(finish));
const quiet = () => {
  let last = performance.now();
  const on = () => { last = performance.now(); };
  document.addEventListener('scroll', on, true);
  const tick = () => requestAnimationFrame(() => {
    const now = performance.now();
    if (now - last > 60 || now - t0 > 600) { document.removeEventListener('scroll', on, true); finish(); }
    else tick();
  });
  tick();
};
const ready = scrolled ? quiet : frames;
setTimeout(finish, cap);
if (document.readyState === 'complete') ready();
else window.addEventListener('load', ready, {once: true});
"""

# The focused element when it takes text, else null (typing would go nowhere).
_FOCUSED_FIELD_JS = """
const e = document.activeElement;
if (!e || e === document.body || e === document.documentElement) return null;
if (e.isContentEditable || e.tagName === 'TEXTAREA') return e;
if (e.tagName === 'INPUT' && !/^(button|submit|reset|checkbox|radio|file|image|range|color)$/i.test(e.type)) return e;
return null;
"""

# Errors from a driver that mean the session (not just the action) is gone.
_LOST_MARKERS = ("invalid session id", "session deleted", "session is either terminated",
                 "chrome not reachable", "disconnected:", "tab crashed", "target crashed",
                 "could not proxy command", "econnrefused", "no such window",
                 "session not created", "instrumentation process is not running",
                 "socket hang up")
_TRANSPORT_ERRORS = (urllib3.exceptions.HTTPError, ConnectionError, TimeoutError,
                     http.client.HTTPException)

# Key names -> W3C keys (Chromium), Android keycodes, iOS keyboard text / buttons.
_W3C_KEYS = {"enter": Keys.ENTER, "return": Keys.ENTER, "search": Keys.ENTER, "go": Keys.ENTER,
             "send": Keys.ENTER, "done": Keys.ENTER, "backspace": Keys.BACKSPACE,
             "del": Keys.BACKSPACE, "delete": Keys.DELETE, "tab": Keys.TAB,
             "esc": Keys.ESCAPE, "escape": Keys.ESCAPE, "space": Keys.SPACE,
             "up": Keys.ARROW_UP, "down": Keys.ARROW_DOWN, "left": Keys.ARROW_LEFT,
             "right": Keys.ARROW_RIGHT, "arrowup": Keys.ARROW_UP, "arrowdown": Keys.ARROW_DOWN,
             "arrowleft": Keys.ARROW_LEFT, "arrowright": Keys.ARROW_RIGHT,
             "pageup": Keys.PAGE_UP, "pagedown": Keys.PAGE_DOWN}
ANDROID_KEYCODES = {"enter": 66, "return": 66, "search": 84, "go": 66, "send": 66, "done": 66,
                    "back": 4, "home": 3, "backspace": 67, "del": 67, "delete": 112,
                    "tab": 61, "space": 62, "esc": 111, "escape": 111, "menu": 82,
                    "up": 19, "down": 20, "left": 21, "right": 22, "app_switch": 187,
                    "recents": 187, "volume_up": 24, "volume_down": 25, "power": 26}
_IOS_TEXT_KEYS = {"enter": "\n", "return": "\n", "search": "\n", "go": "\n", "send": "\n",
                  "done": "\n", "backspace": "\b", "del": "\b", "tab": "\t", "space": " "}
_IOS_BUTTONS = {"home": "home", "volume_up": "volumeUp", "volume_down": "volumeDown"}
_APP_ID_RE = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)+(/[A-Za-z0-9_.$]+)?$")


class MobileEnv:
    """One Appium session on one device, speaking the unified action space."""

    def __init__(self, server_url: str, spec: DeviceSpec, *, chromedriver_port: int,
                 image_format: str = "png", step_timeout_s: float = 15.0,
                 screenshot_scale: str = "device", headless: bool = True,
                 allow_hosts: tuple[str, ...] = (), jpeg_quality: int = 80):
        if image_format not in ("png", "jpeg"):
            raise ValueError(f"image_format={image_format!r}: expected 'png' or 'jpeg'")
        if screenshot_scale not in ("device", "css"):
            raise ValueError(f"screenshot_scale={screenshot_scale!r}: expected 'device' or 'css'")
        if screenshot_scale == "css" and spec.kind != "chromium":
            raise ValueError("screenshot_scale='css' exists only on a Chromium phone")
        if step_timeout_s <= 0:
            raise ValueError(f"step_timeout_s={step_timeout_s} must be positive")
        self.server_url = server_url.rstrip("/")
        self.spec = spec
        self.kind = spec.kind
        self.platform = spec.platform
        self.chromedriver_port = chromedriver_port
        self.image_format = image_format
        self.jpeg_quality = jpeg_quality
        self.screenshot_scale = screenshot_scale
        self.step_timeout_s = step_timeout_s
        self.capabilities = build_capabilities(spec, chromedriver_port=chromedriver_port,
                                               headless=headless, allow_hosts=allow_hosts)
        self.blocked_requests: list[str] = []
        self.episode_start_url: str | None = None
        self.device: DeviceProfile | None = None
        self.driver: webdriver.Remote | None = None
        self._client: AppiumClientConfig | None = None
        self._lost: str | None = None          # why the session is unusable
        self._space: tuple[float, float] | None = None   # action coordinate space (w, h)
        self._emulated: tuple | None = None    # Chromium: the (locale, theme) now emulated
        self._episode_app: str | None = None   # phones: the app the episode runs in
        self._origins: set[str] = set()        # Chromium: origins to clear after an episode
        self._start_index = 0                  # Chromium: the tab's history index at reset
        self._closed = False
        self._open_session()

    # ------------------------------------------------------------------ life cycle
    def _open_session(self) -> None:
        self._client = AppiumClientConfig(self.server_url, timeout=_SESSION_START_S[self.kind],
                                          keep_alive=True)
        opts = AppiumOptions()
        opts.load_capabilities(self.capabilities)
        try:
            driver = webdriver.Remote(self.server_url, options=opts, client_config=self._client)
        except _TRANSPORT_ERRORS as e:
            raise SessionLost(f"no Appium server answers at {self.server_url}: {_short(e)}") from e
        except WebDriverException as e:
            raise SessionLost(f"Appium could not open a {self.kind} session on "
                              f"{self.spec.name!r}: {_short(e)}") from e
        self.driver = driver
        self._lost = None
        self._space = None
        self._emulated = None
        self._client.timeout = self.step_timeout_s + 5
        if self.kind == "chromium":
            # DevTools commands reach chromedriver through Appium's proxy.
            driver.command_executor.add_command(
                "executeCdpCommand", "POST", "/session/$sessionId/goog/cdp/execute")
            self._emulated = (self.spec.profile.locale, "light")
            self._call(lambda: driver.set_page_load_timeout(self.step_timeout_s))
            self._call(lambda: driver.set_script_timeout(self.step_timeout_s))

    @property
    def session_id(self) -> str | None:
        return self.driver.session_id if self.driver is not None else None

    def is_alive(self) -> bool:
        """The session answers a cheap command (the browser or device is there)."""
        if self._closed or self.driver is None or self._lost:
            return False
        try:
            self._call(self._probe, timeout_s=_PROBE_TIMEOUT_S)
        except (SessionLost, ActionError, WebDriverException):
            return False
        return True

    def _probe(self) -> Any:
        return self.driver.current_url if self.kind == "chromium" else self.driver.get_window_size()

    def restart(self) -> None:
        """A new session with the same capabilities (after SessionLost); then `reset`."""
        if self._closed:
            raise RuntimeError("this MobileEnv is closed")
        self._quit_quietly()
        self._drop_episode_state()
        self._open_session()

    def close_episode(self) -> None:
        """Leave nothing of the episode behind: blank page and cleared storage, or the app closed."""
        if self.driver is None or self._lost:
            self._drop_episode_state()
            return
        try:
            if self.kind == "chromium":
                self._call(lambda: self.driver.get("about:blank"))
                self._cdp("Network.clearBrowserCookies")
                for origin in sorted(self._origins):
                    self._cdp("Storage.clearDataForOrigin", origin=origin, storageTypes="all")
            elif self._episode_app:
                self._call(lambda: self.driver.terminate_app(self._app_id(self._episode_app)))
        except (ActionError, BrowserCrashed, WebDriverException):
            pass  # a lost session is found by the next call; restart() handles it
        self._drop_episode_state()

    def close(self) -> None:
        if self._closed:
            return
        self._quit_quietly()
        self._closed = True

    def __enter__(self) -> "MobileEnv":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _quit_quietly(self) -> None:
        driver, self.driver = self.driver, None
        if driver is None:
            return
        if self._client is not None:
            self._client.timeout = 5   # a hung browser must not hold up the restart
        try:
            driver.quit()
        except Exception:
            pass  # the session or the server is gone already

    def _drop_episode_state(self) -> None:
        self.episode_start_url = None
        self._episode_app = None
        self._origins = set()

    # ------------------------------------------------------------------ episode
    def reset(self, url: str, device: DeviceProfile | None = None) -> Observation:
        """Start an episode at `url` (Chromium) or in app `url` (a name of
        spec.apps, a package or bundle id) and observe it.

        `device` (default: the spec's profile) is what the trajectory records;
        its screen must be the device's own. A Chromium phone also takes the
        episode's theme and locale; a phone keeps those of its settings.
        """
        device = device or self.spec.profile
        p = self.spec.profile
        if (device.viewport_width, device.viewport_height, device.pixel_ratio) != \
                (p.viewport_width, p.viewport_height, p.pixel_ratio):
            raise ValueError(
                f"device {device.name!r} is {device.viewport_width}x{device.viewport_height}"
                f"@{device.pixel_ratio}, but {self.spec.name!r} is {p.viewport_width}x"
                f"{p.viewport_height}@{p.pixel_ratio}: a session's screen is fixed; lease "
                f"a device with that profile instead")
        self._require_session()
        self.close_episode()
        self.blocked_requests = []
        error = None
        if self.kind == "chromium":
            self._emulate(device)
            self.episode_start_url = url
            try:
                self._goto(url)
            except ActionError as e:
                error = str(e)
            if error is None:
                # `home` returns to where the episode landed, not through /start again.
                self.episode_start_url = self._call(lambda: self.driver.current_url)
            self._start_index = self._cdp("Page.getNavigationHistory")["currentIndex"]
        else:
            app = self._app_id(url)
            self._episode_app = url
            self.episode_start_url = url
            try:
                self._call(lambda: self.driver.terminate_app(app))
                self._call(lambda: self._launch(app))
                time.sleep(_PHONE_SETTLE_S)
            except ActionError as e:
                error = f"open {app}: {e}"
            # A phone's locale and theme are its settings': record those, not the request.
            device = p
        self.device = device
        return self._observe(error)

    def step(self, action: Action) -> Observation:
        """Carry out `action`, let the screen settle, observe."""
        self._require_session()
        error = None
        try:
            self._call(lambda: self._act(action), timeout_s=self.step_timeout_s + _own_s(action))
            self._settle(action)
        except ActionError as e:
            error = f"{action.type.value}: {e}"
        return self._observe(error)

    def observe(self) -> Observation:
        self._require_session()
        return self._observe(None)

    # ------------------------------------------------------------------ observation
    def _observe(self, error: str | None) -> Observation:
        try:
            return self._read_screen(error)
        except ActionError as e:
            # Without a screenshot there is no step to record: treat it as a lost
            # session, so the runner restarts and retries the episode.
            self._lost = f"the screen could not be read: {e}"
            raise SessionLost(self._lost) from None

    def _read_screen(self, error: str | None) -> Observation:
        if self.kind == "chromium":
            size, source, url = self._call(self._stamped_source)
            width, height = size
            shot = self._chromium_screenshot()
            kind = "html"
        else:
            source = self._call(lambda: self.driver.page_source)
            png = self._call(self.driver.get_screenshot_as_png)
            shot = self._encode(png)
            if self.kind == "android":
                width, height = Image.open(io.BytesIO(png)).size   # bounds are device px
                url = self._call(lambda: f"{self.driver.current_package}/{self.driver.current_activity}")
            else:
                win = self._call(self.driver.get_window_size)      # XCUITest speaks points
                width, height = win["width"], win["height"]
                info = self._call(lambda: self.driver.execute_script("mobile: activeAppInfo"))
                url = (info or {}).get("bundleId", "")
            kind = self.kind
        self._space = (float(width), float(height))
        try:
            tree, elements = page_source.normalise(kind, source, width, height)
        except page_source.PageSourceError as e:
            # The screenshot is still a step; the tree is logged as missing, not invented.
            log.warning("%s: %s; observation kept without an accessibility tree", self.spec.name, e)
            tree, elements = "", []
        img_w, img_h = Image.open(io.BytesIO(shot)).size
        return Observation(screenshot=shot, image_format=self.image_format, width=img_w,
                           height=img_h, url=url, a11y_tree=tree, elements=elements,
                           last_action_error=error)

    def _stamped_source(self) -> tuple[list, str, str]:
        """Boxes stamped, then the HTML and URL read in one round trip."""
        for attempt in range(3):
            try:
                out = self.driver.execute_script(_STAMP_AND_READ_JS)
            except WebDriverException as e:
                # A navigation replaced the document under the script: read the new one.
                if _lost_marker(e) or attempt == 2 or not _is_unloaded(e):
                    raise
                continue
            size, html, url = out
            if _origin(url):
                self._origins.add(_origin(url))
            return size, html, url
        raise AssertionError("unreachable")

    def _chromium_screenshot(self) -> bytes:
        params: dict[str, Any] = {"format": self.image_format}
        if self.image_format == "jpeg":
            params["quality"] = self.jpeg_quality
        if self.screenshot_scale == "css":
            vv = self._call(lambda: self.driver.execute_script(
                "const v = visualViewport; return [v.pageLeft, v.pageTop, v.width, v.height];"))
            x, y, w, h = vv
            params["clip"] = {"x": x, "y": y, "width": w, "height": h,
                              "scale": 1 / self.spec.profile.pixel_ratio}
        data = self._cdp("Page.captureScreenshot", **params)["data"]
        return base64.b64decode(data)

    def _encode(self, png: bytes) -> bytes:
        if self.image_format == "png":
            return png
        out = io.BytesIO()
        Image.open(io.BytesIO(png)).convert("RGB").save(out, "JPEG", quality=self.jpeg_quality)
        return out.getvalue()

    # ------------------------------------------------------------------ settling
    def _settle(self, action: Action) -> None:
        if action.type in (ActionType.ANSWER, ActionType.DONE, ActionType.TAKE_OVER):
            return
        if self.kind != "chromium":
            time.sleep(_PHONE_SETTLE_S)
            return
        scrolled = action.type in (ActionType.SWIPE, ActionType.SCROLL)
        for attempt in range(3):
            try:
                self._call(lambda: self.driver.execute_async_script(
                    _SETTLE_JS, _SETTLE_CAP_MS, scrolled))
                return
            except ActionError as e:
                # The action started a navigation: settle on the new document.
                if attempt == 2 or "unload" not in str(e).lower():
                    raise ActionError(f"the page did not settle: {e}") from None

    # ------------------------------------------------------------------ actions
    def _act(self, a: Action) -> None:
        t = a.type
        if t == ActionType.TAP:
            self._touch(self._taps(self._px(a.x, a.y), 1))
        elif t == ActionType.DOUBLE_TAP:
            self._touch(self._taps(self._px(a.x, a.y), 2))
        elif t == ActionType.LONG_PRESS:
            hold = (a.duration_ms if a.duration_ms is not None else _DEFAULT_LONG_PRESS_MS) / 1000
            self._touch(self._hold(self._px(a.x, a.y), hold))
        elif t == ActionType.SWIPE:
            ms = a.duration_ms if a.duration_ms is not None else _DEFAULT_SWIPE_MS
            self._touch(self._drag(self._px(a.x, a.y), self._px(a.x2, a.y2), ms))
        elif t == ActionType.SCROLL:
            self._scroll(a)
        elif t == ActionType.TYPE:
            if a.x is not None:
                self._touch(self._taps(self._px(a.x, a.y), 1))
            self._type(a.text)
        elif t == ActionType.KEY:
            self._key(a.text.strip())
        elif t == ActionType.BACK:
            self._key("back")
        elif t == ActionType.HOME:
            self._key("home")
        elif t == ActionType.OPEN_APP:
            self._open_app(a.text.strip())
        elif t == ActionType.SELECT:
            if self.kind != "chromium":
                raise ActionError("not available on a phone: tap the control, then the option")
            x, y = self._px(a.x, a.y)
            res = self.driver.execute_script(f"return ({_SELECT_AT_JS})(arguments[0]);", [x, y, a.text])
            if "error" in res:
                raise ActionError(res["error"])
        elif t == ActionType.WAIT:
            time.sleep((a.duration_ms if a.duration_ms is not None else _DEFAULT_WAIT_MS) / 1000)
        # answer / done / take_over do not touch the screen.

    def _px(self, x: float, y: float) -> tuple[int, int]:
        """Normalised screen point -> the driver's coordinates (CSS px, device px or points)."""
        w, h = self._space or self._read_space()
        return (min(max(round(x * w), 0), int(w) - 1), min(max(round(y * h), 0), int(h) - 1))

    def _read_space(self) -> tuple[float, float]:
        if self.kind == "chromium":
            w, h = self.driver.execute_script("return [innerWidth, innerHeight];")
        elif self.kind == "android":
            w, h = Image.open(io.BytesIO(self.driver.get_screenshot_as_png())).size
        else:
            win = self.driver.get_window_size()
            w, h = win["width"], win["height"]
        self._space = (float(w), float(h))
        return self._space

    # A gesture is a list of ("move", x, y, ms) / ("down",) / ("up",) / ("pause", s).
    @staticmethod
    def _taps(p: tuple[int, int], n: int) -> list[tuple]:
        out: list[tuple] = [("move", *p, 0)]
        for i in range(n):
            if i:
                out.append(("pause", _DOUBLE_TAP_GAP_S))
            out += [("down",), ("pause", _TAP_HOLD_S), ("up",)]
        return out

    @staticmethod
    def _hold(p: tuple[int, int], seconds: float) -> list[tuple]:
        return [("move", *p, 0), ("down",), ("pause", seconds), ("up",)]

    @staticmethod
    def _drag(p0: tuple[int, int], p1: tuple[int, int], ms: int) -> list[tuple]:
        n = max(2, min(12, round(ms / _SWIPE_MOVE_MS)))
        (x0, y0), (x1, y1) = p0, p1
        out: list[tuple] = [("move", x0, y0, 0), ("down",)]
        for i in range(1, n + 1):
            out.append(("move", round(x0 + (x1 - x0) * i / n), round(y0 + (y1 - y0) * i / n),
                        max(1, round(ms / n))))
        return out + [("pause", _SWIPE_END_HOLD_S), ("up",)]

    def _touch(self, gesture: list[tuple]) -> None:
        finger = PointerInput(interaction.POINTER_TOUCH, "finger")
        builder = ActionBuilder(self.driver, mouse=finger)
        for g in gesture:
            if g[0] == "move":
                finger.create_pointer_move(duration=g[3], x=g[1], y=g[2])
            elif g[0] == "down":
                finger.create_pointer_down(button=0)
            elif g[0] == "up":
                finger.create_pointer_up(button=0)
            else:
                finger.create_pause(g[1])
        builder.perform()

    def _scroll(self, a: Action) -> None:
        """A swipe the opposite way: "down" drags the content up to show what is below."""
        w, h = self._space or self._read_space()
        x, y = (a.x, a.y) if a.x is not None else (0.5, 0.5)
        dx, dy = {"down": (0, -1), "up": (0, 1), "right": (-1, 0), "left": (1, 0)}[a.direction]
        half = _SCROLL_FRACTION / 2
        # Centre the drag on the point, kept inside the screen's 5%-95% band.
        cx = min(max(x, 0.05 + half * abs(dx)), 0.95 - half * abs(dx))
        cy = min(max(y, 0.05 + half * abs(dy)), 0.95 - half * abs(dy))
        start = self._px(cx - dx * half, cy - dy * half)
        end = self._px(cx + dx * half, cy + dy * half)
        ms = a.duration_ms if a.duration_ms is not None else _DEFAULT_SWIPE_MS
        self._touch(self._drag(start, end, ms))

    def _type(self, text: str) -> None:
        if self.kind == "chromium":
            field = self.driver.execute_script(_FOCUSED_FIELD_JS)
            if field is None:
                raise ActionError("no text field has the focus: tap one first")
            field.send_keys(text)
        else:
            # The focused field; on Android, send_keys replaces the field's text.
            self.driver.switch_to.active_element.send_keys(text)

    def _key(self, name: str) -> None:
        low = name.lower().replace("-", "_")
        if self.kind == "chromium":
            if low == "back":
                self._browser_back()
            elif low == "home":
                self._goto(self.episode_start_url)
            else:
                key = _W3C_KEYS.get(low) or (name if len(name) == 1 else getattr(Keys, name.upper(), None))
                if key is None:
                    raise ActionError(f"unknown key {name!r}")
                builder = ActionBuilder(self.driver)
                builder.key_action.key_down(key).key_up(key)
                builder.perform()
        elif self.kind == "android":
            if low not in ANDROID_KEYCODES:
                raise ActionError(f"unknown Android key {name!r}; known: {sorted(ANDROID_KEYCODES)}")
            self.driver.press_keycode(ANDROID_KEYCODES[low])
        else:
            if low == "back":
                raise ActionError("iOS has no back button: tap the app's own back control "
                                  "or swipe from the left edge")
            if low in _IOS_BUTTONS:
                self.driver.execute_script("mobile: pressButton", {"name": _IOS_BUTTONS[low]})
            elif low in _IOS_TEXT_KEYS:
                self.driver.switch_to.active_element.send_keys(_IOS_TEXT_KEYS[low])
            else:
                raise ActionError(f"unknown iOS key {name!r}; known: "
                                  f"{sorted({*_IOS_BUTTONS, *_IOS_TEXT_KEYS, 'back'})}")

    def _browser_back(self) -> None:
        # Never step back past the episode's first page (the tab's history holds
        # about:blank and the earlier episodes before it).
        index = self._cdp("Page.getNavigationHistory")["currentIndex"]
        if index <= self._start_index:
            raise ActionError("already at the first page of this episode")
        self.driver.back()

    def _goto(self, url: str | None) -> None:
        if not url:
            raise ActionError("no episode start url (reset was not called)")
        try:
            self._call(lambda: self.driver.get(url))
        except ActionError as e:
            raise ActionError(f"navigation to {url} failed: {e}") from None

    def _open_app(self, target: str) -> None:
        if self.kind == "chromium":
            dest = self.spec.apps.get(target, target)
            if dest.startswith("/"):
                dest = urljoin(self.episode_start_url or self.driver.current_url, dest)
            if urlparse(dest).scheme not in ("http", "https", "about", "data"):
                raise ActionError(f"{target!r} is neither a URL, a path, nor an app of "
                                  f"{self.spec.name!r} ({sorted(self.spec.apps)})")
            self._goto(dest)
        else:
            self._launch(self._app_id(target))

    def _launch(self, app: str) -> None:
        if self.kind == "android" and "/" in app:
            self.driver.execute_script("mobile: startActivity", {"intent": app})
        else:
            self.driver.activate_app(app.split("/")[0])

    def _app_id(self, name: str) -> str:
        app = self.spec.apps.get(name, name)
        if not _APP_ID_RE.match(app):
            raise ValueError(f"{name!r} is not an app of device {self.spec.name!r} "
                             f"({sorted(self.spec.apps)}) nor a package / bundle id")
        return app

    # ------------------------------------------------------------------ Chromium emulation
    def _emulate(self, device: DeviceProfile) -> None:
        """Give the tab `device`'s theme and locale for this episode.

        The screen and user agent stay the session's: chromedriver re-applies
        its mobile emulation on every navigation, over any DevTools override.
        Theme (prefers-color-scheme), Intl locale and the Accept-Language
        header are not touched by it and last until changed.
        """
        want = (device.locale, device.theme)
        if want == self._emulated:
            return
        self._cdp("Emulation.setEmulatedMedia",
                  features=[{"name": "prefers-color-scheme", "value": device.theme}])
        self._cdp("Emulation.setLocaleOverride")   # a second override fails: clear first
        self._cdp("Emulation.setLocaleOverride", locale=device.locale)
        self._cdp("Network.setExtraHTTPHeaders", headers={"Accept-Language": device.locale})
        self._emulated = want

    def _cdp(self, cmd: str, **params) -> dict:
        return self._call(lambda: self.driver.execute_cdp_cmd(cmd, params))

    # ------------------------------------------------------------------ failure handling
    def _require_session(self) -> None:
        if self._closed:
            raise RuntimeError("this MobileEnv is closed")
        if self.driver is None or self._lost:
            raise SessionLost(f"the Appium session is gone ({self._lost or 'not open'}); "
                              f"call restart()")

    def _call(self, fn: Callable[[], T], timeout_s: float | None = None) -> T:
        """Run a driver call: a lost session raises SessionLost, any other failure ActionError."""
        self._require_session()
        if timeout_s is not None:
            self._client.timeout = timeout_s + 5
        try:
            return fn()
        except ActionError:
            raise
        except _TRANSPORT_ERRORS as e:
            self._lost = f"Appium at {self.server_url} did not answer: {_short(e)}"
            raise SessionLost(self._lost) from e
        except InvalidSessionIdException as e:
            self._lost = f"the session ended: {_short(e)}"
            raise SessionLost(self._lost) from e
        except WebDriverException as e:
            if _lost_marker(e):
                self._lost = f"the session was lost: {_short(e)}"
                raise SessionLost(self._lost) from e
            raise ActionError(_short(e)) from None
        finally:
            if timeout_s is not None:
                self._client.timeout = self.step_timeout_s + 5


# The stamp runs as a function body; its [innerWidth, innerHeight] comes back with the HTML.
_STAMP_AND_READ_JS = (f"const size = (function () {{ {page_source.STAMP_BOXES_JS} }})();\n"
                      "return [size, document.documentElement.outerHTML, location.href];")


def _own_s(a: Action) -> float:
    """Seconds the action itself takes (holds, waits, swipes), on top of the timeout."""
    defaults = {ActionType.LONG_PRESS: _DEFAULT_LONG_PRESS_MS, ActionType.WAIT: _DEFAULT_WAIT_MS,
                ActionType.SWIPE: _DEFAULT_SWIPE_MS, ActionType.SCROLL: _DEFAULT_SWIPE_MS}
    if a.type not in defaults:
        return 0.0
    return (a.duration_ms if a.duration_ms is not None else defaults[a.type]) / 1000


def _origin(url: str) -> str:
    u = urlparse(url)
    return f"{u.scheme}://{u.netloc}" if u.scheme in ("http", "https") else ""


def _lost_marker(e: Exception) -> bool:
    text = str(e).lower()
    return any(m in text for m in _LOST_MARKERS)


def _is_unloaded(e: Exception) -> bool:
    text = str(e).lower()
    return "unload" in text or "execution context" in text or "navigat" in text


def _short(e: BaseException) -> str:
    """The first line of a driver error without its stack trace."""
    text = getattr(e, "msg", None) or str(e)
    text = text.strip().removeprefix("Message:").strip()
    return text.splitlines()[0] if text else type(e).__name__
