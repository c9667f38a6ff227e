"""Carrying out unified actions on a Playwright page: taps, touch, swipes, keys, navigation.

Action coordinates are normalised to the last screenshot; `_px` maps them to
the layout CSS px that input events take (through the visual viewport's zoom
on a zoomed-out mobile page). A mobile profile gets touch events (raw CDP
touch for long presses and swipes, so touch handlers see a real finger).
"""

from __future__ import annotations

import time
from urllib.parse import urlparse

from playwright.sync_api import CDPSession, Page
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from schemas.actions import SCROLL_NOTCH_PX, Action, ActionType
from schemas.keys import KeyNameError, canonical_key, to_playwright

from .web_errors import ActionError, short_error

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

_DEFAULT_LONG_PRESS_MS = 800
_DEFAULT_SWIPE_MS = 300
_DEFAULT_WAIT_MS = 500
_SCROLL_FRACTION = 0.6
_SWIPE_MOVES = 8
_OPENS_TAB_JS = """([x, y]) => {
  const a = document.elementFromPoint(x, y)?.closest('a[href][target]');
  return !!a && !['', '_self', '_parent', '_top'].includes(a.target.toLowerCase());
}"""


class ActionsMixin:
    """WebEnv's action dispatch (state lives on the env)."""

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
        elif t == ActionType.RIGHT_CLICK:
            # The secondary mouse button (a contextmenu event), on touch profiles too:
            # a right click is not a long press.
            page.mouse.click(*self._px(a.x, a.y), button="right")
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
            self._swipe(
                page,
                self._px(a.x, a.y),
                self._px(a.x2, a.y2),
                a.duration_ms if a.duration_ms is not None else _DEFAULT_SWIPE_MS,
                touch,
            )
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
            try:
                canon = canonical_key(name)
            except KeyNameError:
                canon = name.lower()
            if canon == "back":
                self._back(page, deadline)
            elif canon == "home":
                self._goto(self.episode_start_url, deadline)
            else:
                press_key(page, name)
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
        self._cdp_session().send(
            "Input.dispatchTouchEvent", {"type": kind, "touchPoints": [{"x": x, "y": y} for x, y in points]}
        )

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
        # `amount` notches of SCROLL_NOTCH_PX CSS px, else 0.6 of the screen in
        # layout px (a zoomed-out page moves more per px).
        scale = self._zoom[0]
        if a.amount is not None:
            dx = dy = a.amount * SCROLL_NOTCH_PX
        else:
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
        resp = page.go_back(
            wait_until="domcontentloaded", timeout=max(1.0, (deadline - time.monotonic()) * 1000)
        )
        if resp is None and page.url == before:
            raise ActionError("back: no previous page in this tab's history")

    def _goto(self, url: str | None, deadline: float) -> None:
        if not url:
            raise ActionError("no episode start url (reset was not called)")
        page = self._require_page()
        if self._refused(url):
            raise ActionError(
                f"navigation to {url} failed: net::ERR_BLOCKED_BY_CLIENT (refused by the request filter)"
            )
        try:
            page.goto(
                url, wait_until="domcontentloaded", timeout=max(1.0, (deadline - time.monotonic()) * 1000)
            )
        except PlaywrightTimeout:
            self._stop_loading(page)
            raise ActionError(
                f"navigation to {url} did not reach domcontentloaded within {self.step_timeout_s}s"
            ) from None
        except PlaywrightError as e:
            self._raise_if_dead(e)
            raise ActionError(f"navigation to {url} failed: {self._blocked_failure(short_error(e))}") from e
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


def press_key(page: Page, name: str) -> None:
    """Press a key or chord; a name neither schemas.keys nor Playwright knows is an
    ActionError naming it."""
    try:
        key = to_playwright(canonical_key(name))
    except KeyNameError as e:  # Playwright may still know it ("F13", "AudioVolumeMute")
        known = str(e)
        key = name
    else:
        known = None
    try:
        page.keyboard.press(key)
    except PlaywrightError as e:
        if "Unknown key" not in str(e):
            raise
        raise ActionError(known or f"unknown key {name!r}") from None


def _own_duration_s(a: Action) -> float:
    """How long the action itself takes (holds, waits, swipes), defaults included."""
    defaults = {
        ActionType.LONG_PRESS: _DEFAULT_LONG_PRESS_MS,
        ActionType.WAIT: _DEFAULT_WAIT_MS,
        ActionType.SWIPE: _DEFAULT_SWIPE_MS,
    }
    if a.type not in defaults:
        return 0.0
    return (a.duration_ms if a.duration_ms is not None else defaults[a.type]) / 1000
