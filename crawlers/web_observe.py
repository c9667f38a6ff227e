"""The observation after a step: screenshot, aria snapshot with boxes, elements, URL.

Screenshots are of the viewport (`scale="css"` by default, so the image,
the a11y boxes and the action coordinates share one pixel grid). Aria-snapshot
boxes are relative to the visible viewport; on a zoomed-out mobile page they
go through the visual viewport's scale and offset to match the screenshot.

Before the screenshot, one evaluate waits for the viewport's loading images
(at most `image_wait_s`, web_settle.IMAGES_WAIT_JS) and lists the clickable
elements the aria tree misses (web_clickables.SCAN_JS); these are appended to
the elements with role "clickable" unless an interactive aria element already
sits at their box. `scan_clickables = False` or `image_wait_s = 0` on the env
turn either off.

After the aria snapshot, one more evaluate hit-tests every element it lists
(crawlers.visibility: on screen, visible fraction, centre and inner points,
modal cover); the clickables get the same record inside the scan.
`measure_visibility = False` leaves `Element.visibility` None (not measured).
"""

from __future__ import annotations

import io
import time

from PIL import Image
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import Page
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from schemas.a11y import parse_snapshot, to_elements
from schemas.observation import Observation

from .visibility import MEASURE_JS, boxed_nodes, measure_args, measure_result, with_visibility
from .web_clickables import MAX_CLICKABLES, MAX_SCANNED, SCAN_JS, clickable_elements, merge_clickables
from .web_errors import ActionError, PageUnresponsive, short_error
from .web_settle import IMAGES_WAIT_CAP_S, IMAGES_WAIT_JS

# The visual viewport's zoom: a mobile page without <meta name=viewport> is laid
# out wider than the screen and shown zoomed out.
_ZOOM_JS = """() => { const v = window.visualViewport;
  return v ? [v.scale, v.offsetLeft, v.offsetTop] : [1, 0, 0]; }"""

# One round trip before the screenshot: the image wait, then the clickables scan
# (so its boxes are those of the screen the screenshot shows).
_BEFORE_SHOT_JS = f"""async (a) => {{
  const pending = await ({IMAGES_WAIT_JS})(a.imageMs);
  return {{pending, rows: a.scan ? ({SCAN_JS})(a) : []}};
}}"""

# Past its own timeouts, a call still blocked this long means the renderer hangs
# (input dispatch has no timeout): the watchdog steps in.
_WATCHDOG_GRACE_S = 2.0


class ObserveMixin:
    """WebEnv's observation (state lives on the env)."""

    scan_clickables: bool = True  # add the "clickable" elements the tree misses
    image_wait_s: float = IMAGES_WAIT_CAP_S  # wait this long at most for loading images
    measure_visibility: bool = True  # hit-test every element (Element.visibility)

    def _observe_after(self, error: str | None) -> Observation:
        try:
            # Each call inside has its own timeout; the watchdog is the backstop.
            with self._watchdog(3 * self.step_timeout_s + _WATCHDOG_GRACE_S, "observe"):
                return self._observe(error)
        except PlaywrightTimeout as e:
            self._raise_if_dead(e)
            raise PageUnresponsive(
                f"the page did not answer within {self.step_timeout_s}s while observing: {short_error(e)}"
            ) from e
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
        rows = self._before_shot(page)
        shot = self._screenshot(page, timeout_ms, kw)
        try:
            tree = page.aria_snapshot(mode="ai", boxes=True, timeout=timeout_ms)
        except PlaywrightError as e:
            # A navigation committed between the two calls: snapshot the new document.
            if "context was destroyed" not in str(e) and "navigat" not in str(e):
                raise
            self._wait_navigation(time.monotonic() + self.step_timeout_s)
            rows = self._before_shot(page)
            shot = self._screenshot(page, timeout_ms, kw)
            tree = page.aria_snapshot(mode="ai", boxes=True, timeout=timeout_ms)
        width, height = Image.open(io.BytesIO(shot)).size
        vp = page.viewport_size or {"width": width, "height": height}
        self._zoom = self._read_zoom(page)
        nodes = boxed_nodes(parse_snapshot(tree))
        elements = with_visibility(
            to_elements(nodes, vp["width"], vp["height"], self._zoom), self._measure_visibility(page, nodes)
        )
        if rows:
            elements = merge_clickables(
                elements, clickable_elements(rows, vp["width"], vp["height"], self._zoom)
            )
        return Observation(
            screenshot=shot,
            image_format=self.image_format,
            width=width,
            height=height,
            url=page.url,
            a11y_tree=tree,
            elements=elements,
            last_action_error=error,
        )

    def _before_shot(self, page: Page) -> list:
        """Wait for the viewport's loading images (bounded); the clickables scan's rows."""
        wait_s = max(0.0, min(self.image_wait_s, self.step_timeout_s / 4))
        if not self.scan_clickables and wait_s <= 0:
            return []
        try:
            res = page.evaluate(
                _BEFORE_SHOT_JS,
                {
                    "imageMs": wait_s * 1000,
                    "scan": self.scan_clickables,
                    "max": MAX_CLICKABLES,
                    "maxScanned": MAX_SCANNED,
                },
            )
        except PlaywrightError as e:
            # A navigation replaced the document, or the page broke a builtin
            # the scan uses: observe without the extra elements.
            self._raise_if_dead(e)
            return []
        return (res.get("rows") or []) if isinstance(res, dict) else []

    def _measure_visibility(self, page: Page, nodes: list) -> list | None:
        """The visibility rows of the snapshot's boxed nodes; None when not measured."""
        if not self.measure_visibility or not nodes:
            return None
        try:
            res = page.evaluate(MEASURE_JS, measure_args(nodes))
        except PlaywrightError as e:
            # A navigation since the snapshot, or a page that broke a builtin:
            # the elements stay unmeasured rather than guessed.
            self._raise_if_dead(e)
            return None
        rows, self.last_visibility_stats = measure_result(res)
        return rows

    def _screenshot(self, page: Page, timeout_ms: float, kw: dict) -> bytes:
        # Chromium sometimes answers "Unable to capture screenshot" while a
        # frame is being swapped (seen under load); a short retry gets it.
        for attempt in range(3):
            try:
                return page.screenshot(
                    type=self.image_format, scale=self.screenshot_scale, timeout=timeout_ms, **kw
                )
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
            # One evaluate: wait_for_function would add a round trip for the
            # handle's value and leave the handle alive until the page closes.
            scale, ox, oy = page.evaluate(_ZOOM_JS)
        except PlaywrightError as e:
            self._raise_if_dead(e)
            return (1.0, 0.0, 0.0)
        return (float(scale) or 1.0, float(ox), float(oy))
