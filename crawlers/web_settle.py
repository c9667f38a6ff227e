"""Page tracking and the settle wait: when a step's effects are on screen.

After an action the env waits for a navigation the action started (to
domcontentloaded), for the fetch/xhr requests it started (at most
_XHR_WAIT_CAP_S), and for two animation frames, so the page has applied the
action's effects and painted. Pending navigations and fetches are tracked from
Playwright's request events on each page (`page._tf_nav`, `page._tf_inflight`).
Adopting a context's first page installs the click-listener marks
(web_clickables.install_listener_marks). IMAGES_WAIT_JS is the observation's
bounded wait for the viewport's loading images.
"""

from __future__ import annotations

import time

from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import Page, Request
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from .web_clickables import install_listener_marks
from .web_errors import ActionError

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


# Resolves once the <img>s in the viewport that are still loading have loaded
# (or failed), or after `ms`, with how many were still pending. A page without
# pending images answers at once: the cost is one round trip.
IMAGES_WAIT_JS = """(ms) => new Promise(res => {
  const vv = window.visualViewport;
  const vx0 = vv ? vv.offsetLeft : 0, vy0 = vv ? vv.offsetTop : 0;
  const vx1 = vx0 + (vv ? vv.width : innerWidth), vy1 = vy0 + (vv ? vv.height : innerHeight);
  const pending = [];
  for (const img of document.images) {
    if (img.complete) continue;
    const r = img.getBoundingClientRect();  // a loading <img> may still be 0x0
    if (r.right < vx0 || r.bottom < vy0 || r.left > vx1 || r.top > vy1) continue;
    if (img.checkVisibility && !img.checkVisibility({checkVisibilityCSS: true})) continue;
    pending.push(img);
  }
  let left = pending.length;
  if (!left || ms <= 0) return res(left);
  const timer = setTimeout(() => res(left), ms);
  const done = () => { if (--left === 0) { clearTimeout(timer); res(0); } };
  for (const img of pending) {
    img.addEventListener('load', done, {once: true});
    img.addEventListener('error', done, {once: true});
  }
})"""

# The longest an observation waits for the viewport's images before its screenshot.
IMAGES_WAIT_CAP_S = 1.5

_XHR_WAIT_CAP_S = 1.0
_QUIET_SLICE_S = 0.3


class SettleMixin:
    """WebEnv's page tracking and settle wait (state lives on the env and its pages)."""

    def _adopt_page(self, page: Page) -> None:
        """Track a page's navigations and in-flight fetches; act on the newest page."""
        page._tf_nav = None  # the pending main-frame navigation request
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
        try:
            # Before the context's first navigation: marks elements given click listeners.
            install_listener_marks(page.context)
        except PlaywrightError as e:
            self._raise_if_dead(e)  # else the walk only misses listener-only clickables

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
                self._nav_error = f"navigation to {req.url} failed: {self._blocked_failure(failure)}"

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
                raise ActionError(
                    f"navigation to {url} did not reach domcontentloaded within {self.step_timeout_s}s"
                )
            page.wait_for_timeout(10)
            if self._page is not page:  # switched to a new tab
                return
