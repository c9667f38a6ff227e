"""The unified action space on an Appium session: touch gestures, typing, keys, apps.

Gestures are W3C pointer actions with a touch pointer, so pages see real
touchstart/touchmove/touchend. Chromedriver jumps a pointer move to its end
point in one event whatever its duration, so a swipe is cut into several short
moves (about one per 50 ms) and held still 100 ms before lifting: gesture code
sees a drag, and a scroll moves the page by the drag distance instead of
flinging on.

Coordinates: Chromium takes CSS px of the layout viewport, UiAutomator2 device
px, XCUITest points. Each observation keeps the size of that space; normalised
action points and element boxes both map through it.

`MobileActions` is a part of `crawlers.mobile_env.MobileEnv` (a mixin): it uses
the session's `driver`, `kind`, `spec`, `episode_start_url`, `_space`,
`_start_index`, `_call` and `_cdp`.
"""

from __future__ import annotations

import io
import re
import time
from urllib.parse import urljoin, urlparse

from PIL import Image
from selenium.webdriver.common.actions import interaction
from selenium.webdriver.common.actions.action_builder import ActionBuilder
from selenium.webdriver.common.actions.pointer_input import PointerInput
from selenium.webdriver.common.keys import Keys

from schemas import keys
from schemas.actions import Action, ActionType
from schemas.keys import KeyNameError, canonical_key

from .web_env import _SELECT_AT_JS, ActionError

_DEFAULT_LONG_PRESS_MS = 800
_DEFAULT_SWIPE_MS = 300
_DEFAULT_WAIT_MS = 500
_TAP_HOLD_S = 0.05
_DOUBLE_TAP_GAP_S = 0.1
_SWIPE_MOVE_MS = 50  # one pointer move per ~50 ms of swipe
_SWIPE_END_HOLD_S = 0.1  # still before lifting: a drag, not a fling
_SCROLL_FRACTION = 0.5  # a scroll drags half the screen

# The focused element when it takes text, else null (typing would go nowhere).
_FOCUSED_FIELD_JS = """
const e = document.activeElement;
if (!e || e === document.body || e === document.documentElement) return null;
if (e.isContentEditable || e.tagName === 'TEXTAREA') return e;
if (e.tagName === 'INPUT' && !/^(button|submit|reset|checkbox|radio|file|image|range|color)$/i.test(e.type)) return e;
return null;
"""

# Key names: schemas.keys canonicalises them and gives the W3C keys (Chromium),
# Android keycodes and iOS keyboard text / buttons. The tables stay importable here.
ANDROID_KEYCODES = keys.ANDROID_KEYCODES
_IOS_TEXT_KEYS = keys.IOS_TEXT_KEYS
_IOS_BUTTONS = keys.IOS_BUTTONS
_APP_ID_RE = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)+(/[A-Za-z0-9_.$]+)?$")


class MobileActions:
    """Carries out one action on the session (see the module doc)."""

    def _act(self, a: Action) -> None:
        t = a.type
        if t == ActionType.TAP:
            self._touch(self._taps(self._px(a.x, a.y), 1))
        elif t == ActionType.DOUBLE_TAP:
            self._touch(self._taps(self._px(a.x, a.y), 2))
        elif t == ActionType.RIGHT_CLICK:
            raise ActionError(
                "a touch screen cannot right-click (there is no secondary "
                "button); a long press is a different action"
            )
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
            out.append(
                ("move", round(x0 + (x1 - x0) * i / n), round(y0 + (y1 - y0) * i / n), max(1, round(ms / n)))
            )
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
        try:
            canon = canonical_key(name)
        except KeyNameError:
            canon = None
        if self.kind == "chromium":
            if canon == "back":
                self._browser_back()
            elif canon == "home":
                self._goto(self.episode_start_url)
            else:
                self._w3c_key(name, canon)
        elif self.kind == "android":
            if canon is None:
                raise ActionError(f"unknown Android key {name!r}")
            try:
                code, meta = keys.to_android(canon)
            except KeyNameError:
                raise ActionError(
                    f"unknown Android key {name!r} (Android has no keycode for {canon!r})"
                ) from None
            if meta:
                self.driver.press_keycode(code, meta)
            else:
                self.driver.press_keycode(code)
        else:
            try:
                if canon is None:
                    raise KeyNameError(f"unknown iOS key {name!r}")
                kind, value = keys.to_ios(canon)
            except KeyNameError as e:
                msg = str(e)
                if msg.startswith("unknown"):
                    msg = (
                        f"unknown iOS key {name!r}; known: {sorted({*_IOS_BUTTONS, *_IOS_TEXT_KEYS, 'back'})}"
                    )
                raise ActionError(msg) from None
            if kind == "button":
                self.driver.execute_script("mobile: pressButton", {"name": value})
            else:
                self.driver.switch_to.active_element.send_keys(value)

    def _w3c_key(self, name: str, canon: str | None) -> None:
        """Press a key or chord through W3C key actions: modifiers down, the key, all up."""
        try:
            if canon is None:
                raise KeyNameError(name)
            values = keys.to_w3c(canon)
        except KeyNameError:
            # Selenium's own names for what schemas.keys does not know ("NUMPAD5").
            value = name if len(name) == 1 else getattr(Keys, name.upper().replace(" ", "_"), None)
            if not isinstance(value, str):
                raise ActionError(f"unknown key {name!r}") from None
            values = [value]
        builder = ActionBuilder(self.driver)
        for v in values:
            builder.key_action.key_down(v)
        for v in reversed(values):
            builder.key_action.key_up(v)
        builder.perform()

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
                raise ActionError(
                    f"{target!r} is neither a URL, a path, nor an app of "
                    f"{self.spec.name!r} ({sorted(self.spec.apps)})"
                )
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
            raise ValueError(
                f"{name!r} is not an app of device {self.spec.name!r} "
                f"({sorted(self.spec.apps)}) nor a package / bundle id"
            )
        return app


def action_seconds(a: Action) -> float:
    """Seconds the action itself takes (holds, waits, swipes), on top of the timeout."""
    defaults = {
        ActionType.LONG_PRESS: _DEFAULT_LONG_PRESS_MS,
        ActionType.WAIT: _DEFAULT_WAIT_MS,
        ActionType.SWIPE: _DEFAULT_SWIPE_MS,
        ActionType.SCROLL: _DEFAULT_SWIPE_MS,
    }
    if a.type not in defaults:
        return 0.0
    return (a.duration_ms if a.duration_ms is not None else defaults[a.type]) / 1000
