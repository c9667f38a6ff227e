"""Reading a mobile screen: the screenshot, the page source normalised into the
accessibility tree and Elements, and the URL (or Android activity, iOS bundle).

Screenshots on the Chromium phone come from the DevTools protocol
(Page.captureScreenshot through Appium's proxy to chromedriver); the page source
goes through `crawlers.page_source.normalise` (HTML with boxes stamped by
STAMP_BOXES_JS on Chromium; UiAutomator2/XCUITest XML on phones).

`MobileScreen` is a part of `crawlers.mobile_env.MobileEnv` (a mixin): it uses
the session's `driver`, `kind`, `spec`, `image_format`, `jpeg_quality`,
`screenshot_scale`, `_origins`, `_call` and `_cdp`, and sets `_space` and `_lost`.
"""

from __future__ import annotations

import base64
import io
import logging
from typing import Any
from urllib.parse import urlparse

from PIL import Image
from selenium.common.exceptions import WebDriverException

from schemas.observation import Observation

from . import page_source
from .mobile_errors import SessionLost, is_unloaded, lost_marker
from .web_env import ActionError

log = logging.getLogger("crawlers.mobile_env")  # the environment's log, as before the split

# The stamp runs as a function body; its [innerWidth, innerHeight] comes back with the HTML.
_STAMP_AND_READ_JS = (
    f"const size = (function () {{ {page_source.STAMP_BOXES_JS} }})();\n"
    "return [size, document.documentElement.outerHTML, location.href];"
)


class MobileScreen:
    """Observes the session's screen (see the module doc)."""

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
                width, height = Image.open(io.BytesIO(png)).size  # bounds are device px
                url = self._call(lambda: f"{self.driver.current_package}/{self.driver.current_activity}")
            else:
                win = self._call(self.driver.get_window_size)  # XCUITest speaks points
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
        return Observation(
            screenshot=shot,
            image_format=self.image_format,
            width=img_w,
            height=img_h,
            url=url,
            a11y_tree=tree,
            elements=elements,
            last_action_error=error,
        )

    def _stamped_source(self) -> tuple[list, str, str]:
        """Boxes stamped, then the HTML and URL read in one round trip."""
        for attempt in range(3):
            try:
                out = self.driver.execute_script(_STAMP_AND_READ_JS)
            except WebDriverException as e:
                # A navigation replaced the document under the script: read the new one.
                if lost_marker(e) or attempt == 2 or not is_unloaded(e):
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
            vv = self._call(
                lambda: self.driver.execute_script(
                    "const v = visualViewport; return [v.pageLeft, v.pageTop, v.width, v.height];"
                )
            )
            x, y, w, h = vv
            params["clip"] = {
                "x": x,
                "y": y,
                "width": w,
                "height": h,
                "scale": 1 / self.spec.profile.pixel_ratio,
            }
        data = self._cdp("Page.captureScreenshot", **params)["data"]
        return base64.b64decode(data)

    def _encode(self, png: bytes) -> bytes:
        if self.image_format == "png":
            return png
        out = io.BytesIO()
        Image.open(io.BytesIO(png)).convert("RGB").save(out, "JPEG", quality=self.jpeg_quality)
        return out.getvalue()


def _origin(url: str) -> str:
    u = urlparse(url)
    return f"{u.scheme}://{u.netloc}" if u.scheme in ("http", "https") else ""
