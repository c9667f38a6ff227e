"""The Playwright environment every web crawl uses: reset / step / observe.

One headless Chromium per `WebEnv`; one BrowserContext per episode (so
cookies, storage and the device profile never leak between episodes).

Choices worth knowing:

- Screenshots are of the viewport, taken with `scale="css"` by default, so
  the image is viewport_width x viewport_height CSS pixels whatever the
  device pixel ratio. Mobile emulation at dpr 3 renders 3x faster this way
  (about 20 shots/s instead of 6-7) and the screenshot, the a11y boxes and the
  action coordinates share one pixel grid. The page still renders at the
  profile's dpr (media queries, srcset); pass `screenshot_scale="device"` to
  keep full-resolution images instead.
- Aria-snapshot boxes are relative to the visible viewport (they go negative
  once the page scrolls past a node), so `Element.bbox` is box / viewport size.
  A mobile page without `<meta name=viewport>` is laid out wider than the
  screen and shown zoomed out; boxes and action points then go through the
  visual viewport's scale and offset, so they still match the screenshot.
- A failed action never raises: the observation comes back with
  `last_action_error`. Only a dead browser (or a page that no longer answers
  within the step timeout) raises `BrowserCrashed`; `restart()` recovers.
- `scroll` directions name where the view moves: "down" reveals what is below.
- When a page opens a new tab, the env follows the newest tab.
- JS dialogs (alert/confirm/prompt) are dismissed, Playwright's default.
- The sync API is bound to the thread that launched the env.
"""
from __future__ import annotations

import io
import time
from contextlib import contextmanager
from typing import Callable
from urllib.parse import urlparse

from PIL import Image
from playwright.sync_api import Browser, BrowserContext, CDPSession, Page, Playwright, Request
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from schemas.actions import Action, ActionType
from schemas.observation import Observation
from schemas.records import DeviceProfile

from .a11y import elements_from_snapshot
from .allowlist import filter_route
from .browser import (CHROMIUM_ARGS, DEFAULT_EXECUTABLE, Watchdog, acquire_playwright,
                      browser_pid, launch_chromium, process_running, release_playwright,
                      replace_playwright)

__all__ = ["WebEnv", "CHROMIUM_ARGS", "ActionError", "BrowserCrashed", "PageUnresponsive"]


class ActionError(Exception):
    """An action could not be carried out; reported as `last_action_error`."""


class BrowserCrashed(RuntimeError):
    """The browser process is gone (or unusable); call `restart()` and retry."""


class PageUnresponsive(BrowserCrashed):
    """The page stopped answering within the step timeout (e.g. a JS busy loop)."""


# The visual viewport's zoom: a mobile page without <meta name=viewport> is laid
# out wider than the screen and shown zoomed out.
_ZOOM_JS = """() => { const v = window.visualViewport;
  return v ? [v.scale, v.offsetLeft, v.offsetTop] : [1, 0, 0]; }"""

# Two animation frames: the page has applied the action's effects and painted.
_QUIET_JS = "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))"

# Resolves once no scroll event (on any element) has fired for 60 ms, or after
# 600 ms: wheel and fling scrolling finish asynchronously after the input.
_SCROLL_SETTLE_JS = """() => new Promise(res => {
  const t0 = performance.now(); let last = t0;
  const on = () => { last = performance.now(); };
  document.addEventListener('scroll', on, true);
  const tick = () => requestAnimationFrame(() => {
    const now = performance.now();
    if (now - last > 60 || now - t0 > 600) {
      document.removeEventListener('scroll', on, true); res(true);
    } else tick();
  });
  tick();
})"""

# The <select> under a point (a <label> leads to its control) and the value of
# the option whose label, text or value equals the wanted text.
_SELECT_AT_JS = """([x, y, want]) => {
  let el = document.elementFromPoint(x, y);
  if (!el) return {error: 'no element at the point'};
  if (el.tagName === 'LABEL' && el.control) el = el.control;
  const sel = el.closest('select') || (el.tagName === 'LABEL' ? null : el.querySelector && el.querySelector('select'));
  if (!sel) return {error: 'no <select> at the point (found <' + el.tagName.toLowerCase() + '>)'};
  const norm = s => (s || '').replace(/\\s+/g, ' ').trim();
  const w = norm(want);
  const opts = Array.from(sel.options);
  let opt = opts.find(o => norm(o.label) === w || norm(o.text) === w || o.value === want);
  if (!opt) opt = opts.find(o => norm(o.label).toLowerCase() === w.toLowerCase());
  if (!opt) return {error: 'no option ' + JSON.stringify(want) + ' in the <select>; options: ' +
                   JSON.stringify(opts.map(o => norm(o.label)))};
  if (sel.disabled || opt.disabled) return {error: 'the <select> or option is disabled'};
  sel.focus();
  sel.value = opt.value;
  sel.dispatchEvent(new Event('input', {bubbles: true}));
  sel.dispatchEvent(new Event('change', {bubbles: true}));
  return {value: opt.value};
}"""

# Key names from other action spaces -> Playwright's names.
_KEY_NAMES = {
    "enter": "Enter", "return": "Enter", "search": "Enter", "go": "Enter",
    "keycode_enter": "Enter", "backspace": "Backspace", "del": "Backspace",
    "keycode_del": "Backspace", "delete": "Delete", "tab": "Tab", "esc": "Escape",
    "escape": "Escape", "space": " ", "up": "ArrowUp", "down": "ArrowDown",
    "left": "ArrowLeft", "right": "ArrowRight", "arrowup": "ArrowUp",
    "arrowdown": "ArrowDown", "arrowleft": "ArrowLeft", "arrowright": "ArrowRight",
    "pageup": "PageUp", "pagedown": "PageDown",
}

_DEFAULT_LONG_PRESS_MS = 800
_DEFAULT_SWIPE_MS = 300
_DEFAULT_WAIT_MS = 500
_SCROLL_FRACTION = 0.6
_SWIPE_MOVES = 8
_XHR_WAIT_CAP_S = 1.0
_QUIET_SLICE_S = 0.3
_OPENS_TAB_JS = """([x, y]) => {
  const a = document.elementFromPoint(x, y)?.closest('a[href][target]');
  return !!a && !['', '_self', '_parent', '_top'].includes(a.target.toLowerCase());
}"""
# Past its own timeouts, a call still blocked this long means the renderer hangs
# (input dispatch has no timeout): the watchdog steps in.
_WATCHDOG_GRACE_S = 2.0

_CLOSED_MARKERS = ("has been closed", "Target closed", "Connection closed",
                   "Browser closed", "browser has disconnected", "Target crashed")


class WebEnv:
    """A Chromium driven through Playwright, speaking the unified action space."""

    def __init__(self, pw: Playwright, *, headless: bool = True,
                 executable_path: str | None = DEFAULT_EXECUTABLE, image_format: str = "png",
                 step_timeout_s: float = 10.0,
                 request_filter: Callable[[str], bool] | None = None,
                 jpeg_quality: int = 80, screenshot_scale: str = "css"):
        if image_format not in ("png", "jpeg"):
            raise ValueError(f"image_format={image_format!r}: expected 'png' or 'jpeg'")
        if screenshot_scale not in ("css", "device"):
            raise ValueError(f"screenshot_scale={screenshot_scale!r}: expected 'css' or 'device'")
        if step_timeout_s <= 0:
            raise ValueError(f"step_timeout_s={step_timeout_s} must be positive")
        self._pw = pw
        self.headless = headless
        self.executable_path = executable_path
        self.image_format = image_format
        self.jpeg_quality = jpeg_quality
        self.screenshot_scale = screenshot_scale
        self.step_timeout_s = step_timeout_s
        self.request_filter = request_filter
        self.blocked_requests: list[str] = []   # urls aborted by request_filter; cleared at reset
        self.episode_start_url: str | None = None
        self.device: DeviceProfile | None = None
        self.browser: Browser | None = None
        self.context: BrowserContext | None = None
        self._page: Page | None = None
        self._cdp: CDPSession | None = None
        self._cdp_page: Page | None = None
        self._browser_pid: int | None = None
        self._disconnected = False
        self._page_crashed = False
        self._nav_error: str | None = None  # a navigation that failed during a step
        self._watchdog_fired: str | None = None
        # (scale, offsetLeft, offsetTop) of the last observation: action points
        # are on that screenshot, input events take layout CSS px.
        self._zoom: tuple[float, float, float] = (1.0, 0.0, 0.0)
        self._closed = False
        self._owns_pw = False   # True when `launch` took the thread's shared driver
        self._start_browser()

    # ------------------------------------------------------------------ life cycle
    @classmethod
    def launch(cls, headless: bool = True, executable_path: str | None = DEFAULT_EXECUTABLE,
               image_format: str = "png", step_timeout_s: float = 10.0,
               request_filter: Callable[[str], bool] | None = None, **kw) -> "WebEnv":
        pw = acquire_playwright()
        try:
            env = cls(pw, headless=headless, executable_path=executable_path,
                      image_format=image_format, step_timeout_s=step_timeout_s,
                      request_filter=request_filter, **kw)
        except BaseException:
            release_playwright(pw)
            raise
        env._owns_pw = True
        return env

    def _start_browser(self) -> None:
        self.browser = launch_chromium(self._pw, headless=self.headless,
                                       executable_path=self.executable_path)
        self._disconnected = False
        self.browser.on("disconnected", self._on_disconnected)
        self._browser_pid = browser_pid(self.browser)

    def _on_disconnected(self, _browser=None) -> None:
        self._disconnected = True

    @property
    def page(self) -> Page | None:
        """The page being acted on (tests read JS state through it)."""
        return self._page

    @property
    def browser_pid(self) -> int | None:
        return self._browser_pid

    def is_alive(self) -> bool:
        if self._closed or self.browser is None or self._disconnected:
            return False
        if not self.browser.is_connected():
            return False
        return self._browser_pid is None or process_running(self._browser_pid)

    def restart(self) -> None:
        """Relaunch the browser (after a crash); the next call must be `reset`."""
        self._drop_episode_state()
        if self.browser is not None:
            try:
                self.browser.close()
            except Exception:
                pass  # already dead: nothing to close
        self.browser = None
        try:
            self._start_browser()
        except PlaywrightError:
            # The Playwright driver itself may have gone with the browser.
            if not self._owns_pw:
                raise
            self._pw = replace_playwright(self._pw)
            self._start_browser()

    def close_episode(self) -> None:
        ctx = self.context
        self._drop_episode_state()
        if ctx is not None:
            try:
                ctx.close()
            except Exception:
                pass  # the browser may already be gone; restart() handles that

    def close(self) -> None:
        if self._closed:
            return
        self.close_episode()
        try:
            if self.browser is not None:
                self.browser.close()
        except Exception:
            pass
        if self._owns_pw:
            release_playwright(self._pw)
        self._closed = True

    def __enter__(self) -> "WebEnv":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _drop_episode_state(self) -> None:
        self.context = None
        self._page = None
        self._cdp = None
        self._cdp_page = None
        self._page_crashed = False
        self._watchdog_fired = None
        self._zoom = (1.0, 0.0, 0.0)

    # ------------------------------------------------------------------ episode
    def reset(self, url: str, device: DeviceProfile) -> Observation:
        """A fresh context for `device`, a new page at `url`, and its observation."""
        self._ensure_browser()
        self.close_episode()
        self.blocked_requests = []
        self.episode_start_url = url
        self.device = device
        try:
            self.context = self.browser.new_context(
                viewport={"width": device.viewport_width, "height": device.viewport_height},
                device_scale_factor=device.pixel_ratio, is_mobile=device.is_mobile,
                has_touch=device.is_mobile, locale=device.locale, color_scheme=device.theme,
                # Service workers could fetch around the request filter.
                service_workers="block" if self.request_filter else "allow")
            self.context.set_default_timeout(self.step_timeout_s * 1000)
            self.context.set_default_navigation_timeout(self.step_timeout_s * 1000)
            if self.request_filter is not None:
                self.context.route("**/*", self._route)
                self.context.route_web_socket(lambda _url: True, self._route_web_socket)
            self.context.on("page", self._adopt_page)
            self._adopt_page(self.context.new_page())
        except PlaywrightError as e:
            self._raise_if_dead(e)
            raise
        error = None
        try:
            with self._watchdog(self.step_timeout_s + _WATCHDOG_GRACE_S, "reset"):
                self._goto(url, time.monotonic() + self.step_timeout_s)
        except ActionError as e:
            error = str(e)
        except PlaywrightError as e:
            self._raise_if_dead(e)
            error = _short(e)
        if error is None and self.page is not None:
            # `home` returns to where the episode landed: a start URL that
            # redirects (the sandbox's /start) must not be replayed.
            self.episode_start_url = self.page.url
        return self._observe_after(error)

    def step(self, action: Action) -> Observation:
        """Carry out `action`, wait for the page to settle, observe."""
        page = self._require_page()
        # Waits, presses and swipes the action asks for come on top of the timeout.
        budget = self.step_timeout_s + _own_duration_s(action)
        deadline = time.monotonic() + budget
        self._nav_error = None
        # Only fetches the action starts are waited for (not long polls already open).
        page._tf_inflight.clear()
        error = None
        try:
            with self._watchdog(budget + _WATCHDOG_GRACE_S, action.type.value):
                self._act(page, action, deadline)
                self._settle(deadline, scrolled=action.type in (ActionType.SCROLL, ActionType.SWIPE))
        except ActionError as e:
            error = str(e)
        except PlaywrightTimeout as e:
            self._raise_if_dead(e)
            error = f"{action.type.value}: timed out ({_short(e)})"
        except PlaywrightError as e:
            self._raise_if_dead(e)
            error = f"{action.type.value}: {_short(e)}"
        if error is None and self._nav_error:
            error = self._nav_error
        return self._observe_after(error)

    def observe(self) -> Observation:
        self._require_page()
        return self._observe_after(None)

    # ------------------------------------------------------------------ observation
    def _observe_after(self, error: str | None) -> Observation:
        try:
            # Each call inside has its own timeout; the watchdog is the backstop.
            with self._watchdog(3 * self.step_timeout_s + _WATCHDOG_GRACE_S, "observe"):
                return self._observe(error)
        except PlaywrightTimeout as e:
            self._raise_if_dead(e)
            raise PageUnresponsive(f"the page did not answer within {self.step_timeout_s}s "
                                   f"while observing: {_short(e)}") from e
        except PlaywrightError as e:
            self._raise_if_dead(e)
            raise

    def _observe(self, error: str | None) -> Observation:
        page = self._require_page()
        if page._tf_nav is not None:
            # A navigation started since the last action (a timer, a redirect):
            # observe its document, or the old one if it does not arrive in time.
            try:
                self._wait_navigation(time.monotonic() + self.step_timeout_s)
            except ActionError as e:
                error = error or str(e)
            page = self._require_page()
        timeout_ms = self.step_timeout_s * 1000
        kw = {"quality": self.jpeg_quality} if self.image_format == "jpeg" else {}
        shot = self._screenshot(page, timeout_ms, kw)
        try:
            tree = page.aria_snapshot(mode="ai", boxes=True, timeout=timeout_ms)
        except PlaywrightError as e:
            # A navigation committed between the two calls: snapshot the new document.
            if "context was destroyed" not in str(e) and "navigat" not in str(e):
                raise
            self._wait_navigation(time.monotonic() + self.step_timeout_s)
            shot = self._screenshot(page, timeout_ms, kw)
            tree = page.aria_snapshot(mode="ai", boxes=True, timeout=timeout_ms)
        width, height = Image.open(io.BytesIO(shot)).size
        vp = page.viewport_size or {"width": width, "height": height}
        self._zoom = self._read_zoom(page)
        return Observation(
            screenshot=shot, image_format=self.image_format, width=width, height=height,
            url=page.url, a11y_tree=tree,
            elements=elements_from_snapshot(tree, vp["width"], vp["height"], self._zoom),
            last_action_error=error)

    def _screenshot(self, page: Page, timeout_ms: float, kw: dict) -> bytes:
        # Chromium sometimes answers "Unable to capture screenshot" while a
        # frame is being swapped (seen under load); a short retry gets it.
        for attempt in range(3):
            try:
                return page.screenshot(type=self.image_format, scale=self.screenshot_scale,
                                       timeout=timeout_ms, **kw)
            except PlaywrightError as e:
                if "Unable to capture screenshot" not in str(e) or attempt == 2:
                    raise
                time.sleep(0.2 * (attempt + 1))
        raise AssertionError("unreachable")

    def _read_zoom(self, page: Page) -> tuple[float, float, float]:
        # Desktop pages are never zoomed here; skip the round trip.
        if not (self.device and self.device.is_mobile):
            return (1.0, 0.0, 0.0)
        try:
            scale, ox, oy = page.wait_for_function(_ZOOM_JS, timeout=self.step_timeout_s * 1000).json_value()
        except PlaywrightError as e:
            self._raise_if_dead(e)
            return (1.0, 0.0, 0.0)
        return (float(scale) or 1.0, float(ox), float(oy))

    # ------------------------------------------------------------------ pages and events
    def _adopt_page(self, page: Page) -> None:
        """Track a page's navigations and in-flight fetches; act on the newest page."""
        page._tf_nav = None        # the pending main-frame navigation request
        page._tf_inflight = set()  # fetch/xhr requests not yet finished
        page.on("request", lambda r: self._on_request(page, r))
        page.on("requestfinished", lambda r: self._on_request_done(page, r, None))
        page.on("requestfailed", lambda r: self._on_request_done(page, r, r.failure))
        page.on("response", lambda r: self._on_response(page, r))
        page.on("domcontentloaded", lambda _p: setattr(page, "_tf_nav", None))
        page.on("download", lambda _d: setattr(page, "_tf_nav", None))
        page.on("crash", lambda _p: self._on_page_crash(page))
        page.on("close", lambda _p: self._on_page_close(page))
        self._page = page

    def _on_request(self, page: Page, req: Request) -> None:
        try:
            if req.is_navigation_request() and req.frame == page.main_frame:
                page._tf_nav = req
            elif req.resource_type in ("fetch", "xhr"):
                page._tf_inflight.add(req)
        except PlaywrightError:
            pass  # service-worker requests have no frame

    def _on_request_done(self, page: Page, req: Request, failure: str | None) -> None:
        page._tf_inflight.discard(req)
        if req is page._tf_nav and failure is not None:
            page._tf_nav = None
            if page is self._page:
                self._nav_error = f"navigation to {req.url} failed: {failure}"

    def _on_response(self, page: Page, resp) -> None:
        # A 204/205 answer to a navigation keeps the old document: nothing to wait for.
        if resp.request is page._tf_nav and resp.status in (204, 205):
            page._tf_nav = None

    def _on_page_crash(self, page: Page) -> None:
        if page is self._page:
            self._page_crashed = True

    def _on_page_close(self, page: Page) -> None:
        if page is not self._page or self.context is None:
            return
        others = [p for p in self.context.pages if p is not page and not p.is_closed()]
        self._page = others[-1] if others else None

    def _route(self, route) -> None:
        # Fetched here without following redirects: Playwright routes only the first
        # URL of a redirect chain, so an allowed URL answering 302 elsewhere would
        # otherwise take Chromium off the allowlist unchecked.
        filter_route(route, self.request_filter, self.blocked_requests,
                     timeout_ms=self.step_timeout_s * 1000)

    def _route_web_socket(self, ws) -> None:
        # WebSockets bypass `route`; unconnected, a routed socket never reaches a server.
        try:
            allowed = bool(self.request_filter(ws.url))
        except Exception:
            allowed = False
        if allowed:
            ws.connect_to_server()
        else:
            self.blocked_requests.append(ws.url)
            ws.close(code=1008, reason="blocked by the request filter")

    # ------------------------------------------------------------------ settling
    def _settle(self, deadline: float, scrolled: bool = False) -> None:
        """Wait for a started navigation, pending fetches and two quiet frames."""
        self._quiet(deadline, _SCROLL_SETTLE_JS if scrolled else _QUIET_JS)
        page = self._page
        if page is None:
            return
        if page._tf_nav is not None:
            self._wait_navigation(deadline)
            self._quiet(deadline, _QUIET_JS)
        xhr_deadline = min(deadline, time.monotonic() + _XHR_WAIT_CAP_S)
        if page._tf_inflight:
            while page._tf_inflight and time.monotonic() < xhr_deadline:
                page.wait_for_timeout(10)
            self._quiet(deadline, _QUIET_JS)

    def _quiet(self, deadline: float, js: str) -> None:
        """Run the settle script; return early when a navigation is pending.

        Playwright holds evaluations while a navigation is pending, so the script
        runs in short slices and the navigation, once seen, is waited for instead.
        """
        page = self._require_page()
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ActionError(f"the page did not settle within {self.step_timeout_s}s")
            try:
                page.wait_for_function(js, timeout=min(remaining, _QUIET_SLICE_S) * 1000)
                return
            except PlaywrightTimeout:
                if page._tf_nav is not None or self._page is not page:
                    return
            except PlaywrightError as e:
                self._raise_if_dead(e)
                # The document was replaced under us: a navigation, waited for by the caller.
                if "context was destroyed" not in str(e) and "navigat" not in str(e):
                    raise
                return

    def _wait_navigation(self, deadline: float) -> None:
        page = self._require_page()
        while page._tf_nav is not None:
            if time.monotonic() >= deadline:
                url = page._tf_nav.url
                self._stop_loading(page)
                raise ActionError(f"navigation to {url} did not reach domcontentloaded "
                                  f"within {self.step_timeout_s}s")
            page.wait_for_timeout(10)
            if self._page is not page:  # switched to a new tab
                return

    # ------------------------------------------------------------------ actions
    @staticmethod
    def _opens_tab(page: Page, x: float, y: float) -> bool:
        """Whether the point is on a link that opens another tab (target=_blank and kin)."""
        try:
            return bool(page.evaluate(_OPENS_TAB_JS, [x, y]))
        except PlaywrightError:
            return False

    def _act(self, page: Page, a: Action, deadline: float) -> None:
        t = a.type
        touch = bool(self.device and self.device.is_mobile)
        if t == ActionType.TAP:
            x, y = self._px(a.x, a.y)

            def tap() -> None:
                if touch:
                    page.touchscreen.tap(x, y)
                else:
                    page.mouse.click(x, y)
            if self._opens_tab(page, x, y):
                # Wait for the tab itself: on a loaded machine its event can come
                # after the old page has gone quiet, and the step would miss it.
                with self.context.expect_page(timeout=(deadline - time.monotonic()) * 1000):
                    tap()
            else:
                tap()
        elif t == ActionType.DOUBLE_TAP:
            page.mouse.dblclick(*self._px(a.x, a.y))
        elif t == ActionType.LONG_PRESS:
            x, y = self._px(a.x, a.y)
            hold = a.duration_ms if a.duration_ms is not None else _DEFAULT_LONG_PRESS_MS
            if touch:
                self._touch("touchStart", [(x, y)])
                page.wait_for_timeout(hold)
                self._touch("touchEnd", [])
            else:
                page.mouse.move(x, y)
                page.mouse.down()
                page.wait_for_timeout(hold)
                page.mouse.up()
        elif t == ActionType.SWIPE:
            self._swipe(page, self._px(a.x, a.y), self._px(a.x2, a.y2),
                        a.duration_ms if a.duration_ms is not None else _DEFAULT_SWIPE_MS, touch)
        elif t == ActionType.SCROLL:
            self._scroll(page, a)
        elif t == ActionType.TYPE:
            if a.x is not None:
                x, y = self._px(a.x, a.y)
                if touch:
                    page.touchscreen.tap(x, y)
                else:
                    page.mouse.click(x, y)
            if a.text.isascii():
                page.keyboard.type(a.text)
            else:
                page.keyboard.insert_text(a.text)
        elif t == ActionType.KEY:
            name = a.text.strip()
            low = name.lower()
            if low == "back":
                self._back(page, deadline)
            elif low == "home":
                self._goto(self.episode_start_url, deadline)
            else:
                page.keyboard.press(_KEY_NAMES.get(low, name))
        elif t == ActionType.BACK:
            self._back(page, deadline)
        elif t == ActionType.HOME:
            self._goto(self.episode_start_url, deadline)
        elif t == ActionType.OPEN_APP:
            target = a.text.strip()
            if urlparse(target).scheme not in ("http", "https", "about", "data", "file"):
                raise ActionError(f"open_app: {target!r} is not a URL (web apps open by URL)")
            self._goto(target, deadline)
        elif t == ActionType.SELECT:
            x, y = self._px(a.x, a.y)
            res = page.evaluate(_SELECT_AT_JS, [x, y, a.text])
            if "error" in res:
                raise ActionError(f"select: {res['error']}")
        elif t == ActionType.WAIT:
            page.wait_for_timeout(a.duration_ms if a.duration_ms is not None else _DEFAULT_WAIT_MS)
        # answer / done / take_over do not touch the page.

    def _px(self, x: float, y: float) -> tuple[float, float]:
        """Normalised screenshot coordinates -> the layout CSS px that input events take."""
        vp = self._page.viewport_size
        w, h = vp["width"], vp["height"]
        sx, sy = min(max(x * w, 0.0), w - 1.0), min(max(y * h, 0.0), h - 1.0)
        scale, ox, oy = self._zoom
        return sx / scale + ox, sy / scale + oy

    def _cdp_session(self) -> CDPSession:
        if self._cdp is None or self._cdp_page is not self._page:
            self._cdp = self.context.new_cdp_session(self._page)
            self._cdp_page = self._page
        return self._cdp

    def _touch(self, kind: str, points: list[tuple[float, float]]) -> None:
        # Raw touch events, so touchstart/touchmove/touchend handlers (and the
        # browser's own touch scrolling) see a real finger.
        self._cdp_session().send("Input.dispatchTouchEvent", {
            "type": kind, "touchPoints": [{"x": x, "y": y} for x, y in points]})

    def _swipe(self, page: Page, p0, p1, duration_ms: int, touch: bool) -> None:
        """Press at p0, glide to p1 in even moves over `duration_ms`, release."""
        (x0, y0), (x1, y1) = p0, p1
        def press(x, y):
            if touch:
                self._touch("touchStart", [(x, y)])
            else:
                page.mouse.move(x, y)
                page.mouse.down()

        def move(x, y):
            if touch:
                self._touch("touchMove", [(x, y)])
            else:
                page.mouse.move(x, y)

        def release():
            if touch:
                self._touch("touchEnd", [])
            else:
                page.mouse.up()

        interval = duration_ms / 1000 / _SWIPE_MOVES
        press(x0, y0)
        for i in range(1, _SWIPE_MOVES + 1):
            t0 = time.monotonic()
            f = i / _SWIPE_MOVES
            move(x0 + (x1 - x0) * f, y0 + (y1 - y0) * f)
            rest = interval - (time.monotonic() - t0)
            if rest > 0:
                time.sleep(rest)
        release()

    def _scroll(self, page: Page, a: Action) -> None:
        vp = page.viewport_size
        w, h = vp["width"], vp["height"]
        x, y = self._px(a.x, a.y) if a.x is not None else self._px(0.5, 0.5)
        # 0.6 of the screen, in layout px (a zoomed-out page moves more per px).
        scale = self._zoom[0]
        dy = _SCROLL_FRACTION * h / scale
        dx = _SCROLL_FRACTION * w / scale
        delta = {"down": (0, dy), "up": (0, -dy), "right": (dx, 0), "left": (-dx, 0)}[a.direction]
        page.mouse.move(x, y)
        page.mouse.wheel(*delta)

    def _back(self, page: Page, deadline: float) -> None:
        # Never step back onto the blank page that every new tab starts from.
        hist = self._cdp_session().send("Page.getNavigationHistory")
        index, entries = hist["currentIndex"], hist["entries"]
        if index == 0 or (index == 1 and entries[0]["url"] == "about:blank"):
            raise ActionError("back: already at the first page of this episode")
        before = page.url
        resp = page.go_back(wait_until="domcontentloaded",
                            timeout=max(1.0, (deadline - time.monotonic()) * 1000))
        if resp is None and page.url == before:
            raise ActionError("back: no previous page in this tab's history")

    def _goto(self, url: str | None, deadline: float) -> None:
        if not url:
            raise ActionError("no episode start url (reset was not called)")
        page = self._require_page()
        try:
            page.goto(url, wait_until="domcontentloaded",
                      timeout=max(1.0, (deadline - time.monotonic()) * 1000))
        except PlaywrightTimeout:
            self._stop_loading(page)
            raise ActionError(f"navigation to {url} did not reach domcontentloaded "
                              f"within {self.step_timeout_s}s")
        except PlaywrightError as e:
            self._raise_if_dead(e)
            raise ActionError(f"navigation to {url} failed: {_short(e)}")
        finally:
            page._tf_nav = None

    def _stop_loading(self, page: Page) -> None:
        """Cancel a navigation that did not arrive in time and stay on the old document.

        Playwright's screenshot and aria snapshot wait for a pending navigation
        to commit, so without this the observation would hang too.
        """
        page._tf_nav = None
        if page is self._page:
            self._cdp_session().send("Page.stopLoading")

    # ------------------------------------------------------------------ failure handling
    @contextmanager
    def _watchdog(self, seconds: float, what: str):
        """Free this thread if a Playwright call blocks past `seconds` (see browser.Watchdog)."""
        if self._browser_pid is None:
            yield
            return

        def fired(message: str) -> None:
            self._watchdog_fired = f"{what}: {message}"

        with Watchdog(self._browser_pid, seconds, fired):
            yield

    def _ensure_browser(self) -> None:
        if self._closed:
            raise RuntimeError("this WebEnv is closed")
        if not self.is_alive():
            raise BrowserCrashed("the browser is not running; call restart()")

    def _require_page(self) -> Page:
        self._ensure_browser()
        if self._watchdog_fired:
            raise PageUnresponsive(self._watchdog_fired + "; call restart() or reset()")
        if self._page_crashed:
            raise BrowserCrashed("the page's renderer crashed; call restart() or reset()")
        if self._page is None or self._page.is_closed():
            raise RuntimeError("no open page: call reset(url, device) first")
        return self._page

    def _raise_if_dead(self, e: Exception) -> None:
        if self._watchdog_fired:
            raise PageUnresponsive(f"{self._watchdog_fired}: {_short(e)}") from e
        if self._page_crashed:
            raise BrowserCrashed(f"the page's renderer crashed: {_short(e)}") from e
        if not self.is_alive():
            self._disconnected = True
            raise BrowserCrashed(f"the browser died: {_short(e)}") from e
        if any(m in str(e) for m in _CLOSED_MARKERS):
            if self._page is not None and self._page.is_closed():
                return  # only the tab closed (window.close); not a crash
            self._page_crashed = True
            raise BrowserCrashed(f"the page's renderer crashed: {_short(e)}") from e


def _own_duration_s(a: Action) -> float:
    """How long the action itself takes (holds, waits, swipes), defaults included."""
    defaults = {ActionType.LONG_PRESS: _DEFAULT_LONG_PRESS_MS, ActionType.WAIT: _DEFAULT_WAIT_MS,
                ActionType.SWIPE: _DEFAULT_SWIPE_MS}
    if a.type not in defaults:
        return 0.0
    return (a.duration_ms if a.duration_ms is not None else defaults[a.type]) / 1000


def _short(e: Exception) -> str:
    """The first line of a Playwright error (they append long call logs)."""
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
