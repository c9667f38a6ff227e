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
- With a `request_filter`, every network request (redirect hops included)
  goes through a local filtering proxy (crawlers/web_proxy.py) and WebSockets
  through `route_web_socket`; refused URLs land in `blocked_requests`.
- JS dialogs (alert/confirm/prompt) are dismissed, Playwright's default.
- The sync API is bound to the thread that launched the env.

The env is split by responsibility: web_actions (carrying out actions),
web_settle (page tracking and the settle wait), web_observe (screenshot, aria
snapshot, elements), web_errors (what it raises); this module holds the life
cycle, the request filter and failure handling.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import contextmanager

from playwright.sync_api import Browser, BrowserContext, CDPSession, Page, Playwright
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from schemas.actions import Action, ActionType
from schemas.environment import ResetSpec
from schemas.observation import Observation
from schemas.records import DeviceProfile, Task

from .browser import (
    CHROMIUM_ARGS,
    DEFAULT_EXECUTABLE,
    Watchdog,
    acquire_playwright,
    browser_pid,
    launch_chromium,
    process_running,
    release_playwright,
    replace_playwright,
)
from .shared_browser import REGISTRY, SharedChromium, default_contexts_per_browser
from .web_actions import _SELECT_AT_JS, ActionsMixin, _own_duration_s
from .web_errors import CLOSED_MARKERS, ActionError, BrowserCrashed, PageUnresponsive, short_error
from .web_observe import _WATCHDOG_GRACE_S, ObserveMixin
from .web_proxy import REFUSAL_ERROR, FilteringProxy
from .web_settle import SettleMixin

_CONTEXT_RESET = ResetSpec()


def _context_key(device: DeviceProfile | None) -> tuple | None:
    """What a browser context fixes for its life: the screen and the locale."""
    if device is None:
        return None
    return (
        device.viewport_width,
        device.viewport_height,
        device.pixel_ratio,
        device.is_mobile,
        device.locale,
    )


# _SELECT_AT_JS: the mobile env shares the <select> handling.
__all__ = ["WebEnv", "CHROMIUM_ARGS", "ActionError", "BrowserCrashed", "PageUnresponsive", "_SELECT_AT_JS"]


class WebEnv(SettleMixin, ActionsMixin, ObserveMixin):
    """A Chromium driven through Playwright, speaking the unified action space."""

    def __init__(
        self,
        pw: Playwright,
        *,
        headless: bool = True,
        executable_path: str | None = DEFAULT_EXECUTABLE,
        image_format: str = "png",
        step_timeout_s: float = 10.0,
        request_filter: Callable[[str], bool] | None = None,
        jpeg_quality: int = 80,
        screenshot_scale: str = "css",
        contexts_per_browser: int | None = None,
    ):
        if image_format not in ("png", "jpeg"):
            raise ValueError(f"image_format={image_format!r}: expected 'png' or 'jpeg'")
        if screenshot_scale not in ("css", "device"):
            raise ValueError(f"screenshot_scale={screenshot_scale!r}: expected 'css' or 'device'")
        if step_timeout_s <= 0:
            raise ValueError(f"step_timeout_s={step_timeout_s} must be positive")
        # 1: a Chromium of its own; N > 1: a context in a Chromium shared by up to N envs.
        self.contexts_per_browser = (
            default_contexts_per_browser() if contexts_per_browser is None else contexts_per_browser
        )
        if self.contexts_per_browser < 1:
            raise ValueError(f"contexts_per_browser={self.contexts_per_browser} must be >= 1")
        self._shared: SharedChromium | None = None
        self._pw = pw
        self.headless = headless
        self.executable_path = executable_path
        self.image_format = image_format
        self.jpeg_quality = jpeg_quality
        self.screenshot_scale = screenshot_scale
        self.step_timeout_s = step_timeout_s
        self.request_filter = request_filter
        self.blocked_requests: list[str] = []  # urls aborted by request_filter; cleared at reset
        # Called with each new episode's BrowserContext before its first page
        # (an environment's frozen clock, init scripts).
        self.context_hooks: list[Callable[[BrowserContext], None]] = []
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
        self._owns_pw = False  # True when `launch` took the thread's shared driver
        self._proxy: FilteringProxy | None = None  # holds the browser to request_filter
        self._keep_page = False  # the last reset was in mode `page`: close_episode keeps it
        self._reset_once = False  # mode `relaunch` relaunches from the second episode on
        self._start_browser()

    # ------------------------------------------------------------------ life cycle
    @classmethod
    def launch(
        cls,
        headless: bool = True,
        executable_path: str | None = DEFAULT_EXECUTABLE,
        image_format: str = "png",
        step_timeout_s: float = 10.0,
        request_filter: Callable[[str], bool] | None = None,
        **kw,
    ) -> WebEnv:
        pw = acquire_playwright()
        try:
            env = cls(
                pw,
                headless=headless,
                executable_path=executable_path,
                image_format=image_format,
                step_timeout_s=step_timeout_s,
                request_filter=request_filter,
                **kw,
            )
        except BaseException:
            release_playwright(pw)
            raise
        env._owns_pw = True
        return env

    def _start_browser(self) -> None:
        if self.contexts_per_browser > 1:
            self._shared = REGISTRY.lease(
                self.contexts_per_browser,
                executable=self.executable_path or DEFAULT_EXECUTABLE,
                headless=self.headless,
            )
            try:
                self.browser = self._pw.chromium.connect_over_cdp(self._shared.endpoint)
            except BaseException:
                self._release_shared()
                raise
            self._browser_pid = self._shared.pid
        else:
            self.browser = launch_chromium(
                self._pw, headless=self.headless, executable_path=self.executable_path
            )
            self._browser_pid = browser_pid(self.browser)
        self._disconnected = False
        self.browser.on("disconnected", self._on_disconnected)

    def _release_shared(self) -> None:
        shared, self._shared = self._shared, None
        if shared is not None:
            REGISTRY.release(shared)  # the last env on it stops it

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
        self._release_shared()  # a crashed shared browser: lease a live one
        try:
            self._start_browser()
        except PlaywrightError:
            # The Playwright driver itself may have gone with the browser.
            if not self._owns_pw:
                raise
            self._pw = replace_playwright(self._pw)
            self._start_browser()

    def close_episode(self) -> None:
        """Free the episode's context, unless the environment resets in its page
        (reset mode `page`: the next reset of the same device reuses it)."""
        if self._keep_page and self._page is not None and not self._page_crashed:
            return
        self._close_context()

    def _close_context(self) -> None:
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
                self.browser.close()  # over CDP: disconnects, the shared browser stays
        except Exception:
            pass
        self._release_shared()
        if self._owns_pw:
            release_playwright(self._pw)
        if self._proxy is not None:
            self._proxy.close()
            self._proxy = None
        self._closed = True

    def __enter__(self) -> WebEnv:
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
    def reset(
        self,
        url: str,
        device: DeviceProfile | None = None,
        *,
        how: ResetSpec | None = None,
        task: Task | None = None,
        values: dict | None = None,
    ) -> Observation:
        """A fresh context for `device`, a new page at `url`, and its observation.

        `how` (the environment file's `reset`): mode `page` keeps the context and
        page of the last episode when the device is the same and runs the app's own
        reset script; `relaunch` starts a new browser; `storage_state` seeds the context.
        `task` and `values` are the desktop's (its setup commands): a page ignores them.
        """
        if device is None:
            raise ValueError("WebEnv.reset: a browser episode needs its device profile")
        how = how or _CONTEXT_RESET
        if how.mode == "relaunch" and self._reset_once:
            self.restart()
        self._reset_once = True
        self._ensure_browser()
        reuse = (
            how.mode == "page"
            and self._page is not None
            and not self._page_crashed
            and _context_key(self.device) == _context_key(device)
        )
        self._keep_page = how.mode == "page"
        if reuse:
            self.device = device
            return self._reset_in_page(url, how.script)
        self._close_context()
        self.blocked_requests = []
        self.episode_start_url = url
        self.device = device
        try:
            self.context = self.browser.new_context(
                storage_state=how.storage_state,
                # Every request goes through the filtering proxy, redirect hops included.
                proxy={"server": self._filtering_proxy().url} if self.request_filter else None,
                viewport={"width": device.viewport_width, "height": device.viewport_height},
                device_scale_factor=device.pixel_ratio,
                is_mobile=device.is_mobile,
                has_touch=device.is_mobile,
                locale=device.locale,
                color_scheme=device.theme,
                # Service workers could fetch around the request filter.
                service_workers="block" if self.request_filter else "allow",
            )
            self.context.set_default_timeout(self.step_timeout_s * 1000)
            self.context.set_default_navigation_timeout(self.step_timeout_s * 1000)
            if self.request_filter is not None:
                self.context.route_web_socket(lambda _url: True, self._route_web_socket)
            for hook in self.context_hooks:
                hook(self.context)
            self.context.on("page", self._adopt_page)
            self._adopt_page(self.context.new_page())
        except PlaywrightError as e:
            self._raise_if_dead(e)
            raise
        return self._landed(self._start_page(url))

    def _reset_in_page(self, url: str, script: str | None) -> Observation:
        """Mode `page`: the app's own reset in the kept page, then its start page again.
        The theme is the page's to change; a new screen or locale took a new context."""
        self.blocked_requests = []
        self.episode_start_url = url
        self._zoom = (1.0, 0.0, 0.0)
        try:
            self._page.emulate_media(color_scheme=self.device.theme)
        except PlaywrightError as e:
            self._raise_if_dead(e)
            return self._landed(short_error(e))
        return self._landed(self._start_page(url, script))

    def _start_page(self, url: str, script: str | None = None) -> str | None:
        """The reset `script` (if any), then `url`; the error that stopped them, else None."""
        deadline = time.monotonic() + self.step_timeout_s
        try:
            with self._watchdog(self.step_timeout_s + _WATCHDOG_GRACE_S, "reset"):
                if script:
                    self._run_reset_script(script)
                self._goto(url, deadline)
        except ActionError as e:
            return str(e)
        except PlaywrightError as e:
            self._raise_if_dead(e)
            return short_error(e)
        return None

    def _run_reset_script(self, script: str) -> None:
        try:
            self._page.evaluate(script)
        except PlaywrightError as e:
            if "context was destroyed" not in str(e) and "navigat" not in str(e):
                raise ActionError(f"the reset script failed: {short_error(e)}") from e

    def _landed(self, error: str | None) -> Observation:
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
            error = f"{action.type.value}: timed out ({short_error(e)})"
        except PlaywrightError as e:
            self._raise_if_dead(e)
            error = f"{action.type.value}: {short_error(e)}"
        if error is None and self._nav_error:
            error = self._nav_error
        return self._observe_after(error)

    def observe(self) -> Observation:
        self._require_page()
        return self._observe_after(None)

    # ------------------------------------------------------------------ the request filter
    def _filtering_proxy(self) -> FilteringProxy:
        if self._proxy is None:
            # A proxy thread reports refusals into the current episode's list.
            self._proxy = FilteringProxy(
                self.request_filter,
                lambda url: self.blocked_requests.append(url),
                timeout_s=self.step_timeout_s * 3,
            )
        return self._proxy

    def _refused(self, url: str) -> bool:
        """Check a navigation the env starts itself (record it when refused)."""
        if self.request_filter is None:
            return False
        try:
            allowed = bool(self.request_filter(url))
        except Exception:  # noqa: BLE001 - a broken filter must not open the gate
            allowed = False
        if not allowed:
            self.blocked_requests.append(url)
        return not allowed

    def _blocked_failure(self, failure: str) -> str:
        """Name a request the proxy refused for what it is, not Chromium's parse error."""
        if REFUSAL_ERROR in failure:
            return "net::ERR_BLOCKED_BY_CLIENT (refused by the request filter)"
        return failure

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
            raise PageUnresponsive(f"{self._watchdog_fired}: {short_error(e)}") from e
        if self._page_crashed:
            raise BrowserCrashed(f"the page's renderer crashed: {short_error(e)}") from e
        if not self.is_alive():
            self._disconnected = True
            raise BrowserCrashed(f"the browser died: {short_error(e)}") from e
        if any(m in str(e) for m in CLOSED_MARKERS):
            if self._page is not None and self._page.is_closed():
                return  # only the tab closed (window.close); not a crash
            self._page_crashed = True
            raise BrowserCrashed(f"the page's renderer crashed: {short_error(e)}") from e
