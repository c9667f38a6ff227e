"""The Appium environment for mobile crawls: reset / step / observe, like WebEnv.

One Appium session per `MobileEnv`, on one device (`DeviceSpec`): a phone
emulated in Chromium ("chromium", platform "mobile_web"), an Android phone
(UiAutomator2) or an iPhone (XCUITest). The interface is WebEnv's, so the
runner drives either.

Choices worth knowing:

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

The actions (gestures, how coordinates map, keys, apps) live in
`crawlers.mobile_actions` and reading the screen in `crawlers.mobile_screen`,
both mixins of `MobileEnv`; the session failures in `crawlers.mobile_errors`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from appium import webdriver
from appium.options.common.base import AppiumOptions
from appium.webdriver.client_config import AppiumClientConfig
from selenium.common.exceptions import InvalidSessionIdException, WebDriverException

from schemas.actions import Action, ActionType
from schemas.environment import ResetSpec
from schemas.observation import Observation
from schemas.records import DeviceProfile, Task

from .capabilities import DeviceSpec, build_capabilities
from .mobile_actions import MobileActions, action_seconds
from .mobile_errors import TRANSPORT_ERRORS, SessionLost, lost_marker, short_error
from .mobile_screen import MobileScreen
from .web_env import ActionError, BrowserCrashed

__all__ = ["MobileEnv", "SessionLost"]

T = TypeVar("T")

_PHONE_SETTLE_S = 0.4  # phones: no page to ask, a short fixed pause
_SETTLE_CAP_MS = 2000  # Chromium: longest wait for load + frames
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


class MobileEnv(MobileActions, MobileScreen):
    """One Appium session on one device, speaking the unified action space."""

    def __init__(
        self,
        server_url: str,
        spec: DeviceSpec,
        *,
        chromedriver_port: int,
        image_format: str = "png",
        step_timeout_s: float = 15.0,
        screenshot_scale: str = "device",
        headless: bool = True,
        allow_hosts: tuple[str, ...] = (),
        jpeg_quality: int = 80,
    ):
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
        self.capabilities = build_capabilities(
            spec, chromedriver_port=chromedriver_port, headless=headless, allow_hosts=allow_hosts
        )
        self.blocked_requests: list[str] = []
        self.episode_start_url: str | None = None
        self.device: DeviceProfile | None = None
        self.driver: webdriver.Remote | None = None
        self._client: AppiumClientConfig | None = None
        self._lost: str | None = None  # why the session is unusable
        self._space: tuple[float, float] | None = None  # action coordinate space (w, h)
        self._emulated: tuple | None = None  # Chromium: the (locale, theme) now emulated
        self._episode_app: str | None = None  # phones: the app the episode runs in
        self._origins: set[str] = set()  # Chromium: origins to clear after an episode
        self._start_index = 0  # Chromium: the tab's history index at reset
        self._closed = False
        self._open_session()

    # ------------------------------------------------------------------ life cycle
    def _open_session(self) -> None:
        self._client = AppiumClientConfig(
            self.server_url, timeout=_SESSION_START_S[self.kind], keep_alive=True
        )
        opts = AppiumOptions()
        opts.load_capabilities(self.capabilities)
        try:
            driver = webdriver.Remote(self.server_url, options=opts, client_config=self._client)
        except TRANSPORT_ERRORS as e:
            raise SessionLost(f"no Appium server answers at {self.server_url}: {short_error(e)}") from e
        except WebDriverException as e:
            raise SessionLost(
                f"Appium could not open a {self.kind} session on {self.spec.name!r}: {short_error(e)}"
            ) from e
        self.driver = driver
        self._lost = None
        self._space = None
        self._emulated = None
        self._client.timeout = self.step_timeout_s + 5
        if self.kind == "chromium":
            # DevTools commands reach chromedriver through Appium's proxy.
            driver.command_executor.add_command(
                "executeCdpCommand", "POST", "/session/$sessionId/goog/cdp/execute"
            )
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

    def __enter__(self) -> MobileEnv:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _quit_quietly(self) -> None:
        driver, self.driver = self.driver, None
        if driver is None:
            return
        if self._client is not None:
            self._client.timeout = 5  # a hung browser must not hold up the restart
        try:
            driver.quit()
        except Exception:
            pass  # the session or the server is gone already

    def _drop_episode_state(self) -> None:
        self.episode_start_url = None
        self._episode_app = None
        self._origins = set()

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
        """Start an episode at `url` (Chromium) or in app `url` (a name of
        spec.apps, a package or bundle id) and observe it.

        `device` (default: the spec's profile) is what the trajectory records;
        its screen must be the device's own. A Chromium phone also takes the
        episode's theme and locale; a phone keeps those of its settings.
        `how` may only be the default (a fresh page); `task` and `values` are the
        desktop's (its setup commands): a phone ignores them.
        """
        if how is not None and (how.mode != "context" or how.storage_state):
            raise ValueError(
                f"reset mode {how.mode!r}{' with storage_state' if how.storage_state else ''} needs "
                f"Playwright's Chromium: an Appium session starts each episode in a fresh page"
            )
        device = device or self.spec.profile
        p = self.spec.profile
        if (device.viewport_width, device.viewport_height, device.pixel_ratio) != (
            p.viewport_width,
            p.viewport_height,
            p.pixel_ratio,
        ):
            raise ValueError(
                f"device {device.name!r} is {device.viewport_width}x{device.viewport_height}"
                f"@{device.pixel_ratio}, but {self.spec.name!r} is {p.viewport_width}x"
                f"{p.viewport_height}@{p.pixel_ratio}: a session's screen is fixed; lease "
                f"a device with that profile instead"
            )
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
            self._call(lambda: self._act(action), timeout_s=self.step_timeout_s + action_seconds(action))
            self._settle(action)
        except ActionError as e:
            error = f"{action.type.value}: {e}"
        return self._observe(error)

    def observe(self) -> Observation:
        self._require_session()
        return self._observe(None)

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
                self._call(lambda: self.driver.execute_async_script(_SETTLE_JS, _SETTLE_CAP_MS, scrolled))
                return
            except ActionError as e:
                # The action started a navigation: settle on the new document.
                if attempt == 2 or "unload" not in str(e).lower():
                    raise ActionError(f"the page did not settle: {e}") from None

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
        self._cdp(
            "Emulation.setEmulatedMedia", features=[{"name": "prefers-color-scheme", "value": device.theme}]
        )
        self._cdp("Emulation.setLocaleOverride")  # a second override fails: clear first
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
            raise SessionLost(f"the Appium session is gone ({self._lost or 'not open'}); call restart()")

    def _call(self, fn: Callable[[], T], timeout_s: float | None = None) -> T:
        """Run a driver call: a lost session raises SessionLost, any other failure ActionError."""
        self._require_session()
        if timeout_s is not None:
            self._client.timeout = timeout_s + 5
        try:
            return fn()
        except ActionError:
            raise
        except TRANSPORT_ERRORS as e:
            self._lost = f"Appium at {self.server_url} did not answer: {short_error(e)}"
            raise SessionLost(self._lost) from e
        except InvalidSessionIdException as e:
            self._lost = f"the session ended: {short_error(e)}"
            raise SessionLost(self._lost) from e
        except WebDriverException as e:
            if lost_marker(e):
                self._lost = f"the session was lost: {short_error(e)}"
                raise SessionLost(self._lost) from e
            raise ActionError(short_error(e)) from None
        finally:
            if timeout_s is not None:
                self._client.timeout = self.step_timeout_s + 5
