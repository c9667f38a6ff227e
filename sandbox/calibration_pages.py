"""Screenshot pairs drawn live from the sandbox, labelled, to calibrate the near-duplicate radius.

Real Chromium over real sandbox pages (EN and ZH, a 1280x800 desktop viewport
and a 412x915 phone), each pair two screenshots with their keys and a label:

- positives (the same state, drawn twice): a small scroll (20-80 px), a toast
  (mobile_shop's real one through its `msg` parameter; elsewhere a small
  role=status element injected with JS), a clock change (the phone status bar;
  a mail timestamp on the web);
- negatives: different pages of one template (product 1 vs 2, mail 1 vs 2,
  profile A vs B, note 1 vs 2), and hard negatives at the SAME URL (a cart
  with one more item, a bottom sheet opened, dark mode switched on, an inbox
  with one mail archived) so that the key alone cannot tell them apart.

Keys: `url_key` (path + query, without the flash-message parameter) and, as a
variant, `a11y_key` (a hash of the page's aria snapshot). The pairs come out as
plain dicts; filters/calibration.py scores them (it never drives a browser).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from urllib.parse import parse_qsl, urlencode, urlparse

from sandbox.apps import APPS
from sandbox.server import start_url
from schemas.screen_signature import screen_signature

# Query parameters that only carry a one-off message (the toast), not the state.
FLASH_PARAMS = frozenset({"msg", "notice"})

WEB_VIEWPORT = {"width": 1280, "height": 800}
PHONE = {
    "viewport": {"width": 412, "height": 915},
    "device_scale_factor": 2.625,
    "is_mobile": True,
    "has_touch": True,
}


def url_key(url: str) -> str:
    """Path and sorted query of a URL, without host and flash-message parameters."""
    u = urlparse(url)
    q = sorted((k, v) for k, v in parse_qsl(u.query, keep_blank_values=True) if k not in FLASH_PARAMS)
    return u.path + (f"?{urlencode(q)}" if q else "")


def a11y_key(snapshot: str) -> str:
    """The screen signature of an aria snapshot (schemas.screen_signature)."""
    return screen_signature(snapshot)


class _Shooter:
    """One browser context on one sandbox session: load, change, screenshot."""

    TOAST_JS = """(text) => {
      const t = document.createElement('div');
      t.setAttribute('role', 'status');
      t.textContent = text;
      t.style.cssText = 'position:fixed;left:50%;bottom:24px;transform:translateX(-50%);' +
        'background:#323232;color:#fff;padding:10px 18px;border-radius:6px;' +
        'font:14px sans-serif;z-index:99999';
      document.body.appendChild(t);
    }"""

    def __init__(self, browser, server_url: str, app: str, lang: str, mobile: bool, seed: int):
        self.base, self.app, self.lang, self.mobile, self.seed = server_url, app, lang, mobile, seed
        opts = dict(PHONE) if mobile else {"viewport": WEB_VIEWPORT}
        self.ctx = browser.new_context(**opts)
        self.page = self.ctx.new_page()
        sid = f"calib-{app}-{lang}-{seed}-{random.Random(seed).getrandbits(32):x}"
        self.page.goto(start_url(server_url, sid=sid, app=app, lang=lang, seed=seed))

    def close(self):
        self.ctx.close()

    def goto(self, path: str) -> None:
        self.page.goto(f"{self.base}/{self.app}{path}", wait_until="load")

    def post(self, path: str, form: dict) -> None:
        r = self.ctx.request.post(f"{self.base}/{self.app}{path}", form=form, max_redirects=0)
        if r.status >= 400:
            raise RuntimeError(f"POST /{self.app}{path} {form} failed: HTTP {r.status}")

    def shot(self) -> tuple[bytes, str, str]:
        kw = {"scale": "css"} if self.mobile else {}
        img = self.page.screenshot(type="png", **kw)
        return img, url_key(self.page.url), a11y_key(self.page.locator("body").aria_snapshot())

    def scroll(self, px: int) -> None:
        self.page.evaluate(
            """(px) => {
          const m = document.querySelector('.m-main');
          if (m && m.scrollHeight > m.clientHeight) m.scrollBy(0, px); else window.scrollBy(0, px);
        }""",
            px,
        )
        self.page.evaluate("() => new Promise(r => requestAnimationFrame(() => r()))")

    def toast(self) -> None:
        self.page.evaluate(self.TOAST_JS, "已保存" if self.lang == "zh" else "Saved")

    def tick(self, selector: str) -> None:
        """A clock moving on: every digit of the first `selector` element + 1 (same format)."""
        n = self.page.evaluate(
            "(s) => { const e = document.querySelector(s); if (!e) return 0;"
            " e.textContent = e.textContent.replace(/[0-9]/g,"
            " d => String((+d + 1) % 10)); return 1; }",
            selector,
        )
        if not n:
            raise RuntimeError(f"{self.app}: no {selector!r} on {self.page.url}")


def _pair(sh: _Shooter, name: str, kind: str, label: bool, a, b) -> dict:
    return {
        "name": f"{sh.app}/{sh.lang}/{'phone' if sh.mobile else 'web'}/{kind}/{name}",
        "kind": kind,
        "label": label,
        "image_a": a[0],
        "image_b": b[0],
        "key_a": a[1],
        "key_b": b[1],
        "a11y_a": a[2],
        "a11y_b": b[2],
    }


def _same_page(
    sh: _Shooter, path: str, name: str, kind: str, change: Callable[[], None], label: bool
) -> dict:
    """Screenshot `path`, apply `change` on the same URL, screenshot again."""
    sh.goto(path)
    a = sh.shot()
    change()
    return _pair(sh, name, kind, label, a, sh.shot())


def _two_pages(sh: _Shooter, path_a: str, path_b: str, kind: str = "other_page", label: bool = False) -> dict:
    sh.goto(path_a)
    a = sh.shot()
    sh.goto(path_b)
    return _pair(sh, f"{path_a} vs {path_b}", kind, label, a, sh.shot())


def _not_in_cart(app: str, lang: str, seed: int) -> str:
    """A product that is not in the seeded cart: adding it adds a row, not a quantity."""
    state = APPS[app].initial_state(lang, seed)
    in_cart = {line["pid"] for line in state["cart"]}
    return next(p["id"] for p in state["products"] if p["id"] not in in_cart)


def _scenes(sh: _Shooter, rng: random.Random) -> Iterable[dict]:
    px = lambda: rng.randint(20, 80)  # noqa: E731
    app = sh.app
    if app == "shop":
        yield _same_page(sh, "/", "home", "scroll", lambda: sh.scroll(px()), True)
        yield _same_page(sh, "/product/p1", "p1", "toast", sh.toast, True)
        yield _two_pages(sh, "/product/p1", "/product/p2")
        yield _two_pages(sh, "/product/p3", "/product/p4")
        pid = _not_in_cart(app, sh.lang, sh.seed)
        yield _same_page(
            sh,
            "/cart",
            f"cart+{pid}",
            "same_url",
            lambda: (sh.post("/cart/add", {"pid": pid}), sh.goto("/cart")),
            False,
        )
    elif app == "mail":
        yield _same_page(sh, "/", "inbox", "scroll", lambda: sh.scroll(px()), True)
        yield _same_page(sh, "/", "inbox", "clock", lambda: sh.tick(".gm-date, .c-time"), True)
        yield _same_page(sh, "/m/m1", "m1", "toast", sh.toast, True)
        yield _two_pages(sh, "/m/m1", "/m/m2")
        yield _same_page(
            sh,
            "/f/archive",
            "archive+1",
            "same_url",
            lambda: (sh.post("/m/m1/act", {"action": "archive"}), sh.goto("/f/archive")),
            False,
        )
    elif app == "social":
        yield _same_page(sh, "/", "home", "scroll", lambda: sh.scroll(px()), True)
        yield _same_page(sh, "/", "home", "toast", sh.toast, True)
        yield _two_pages(sh, "/u/mayaruns", "/u/leocodes")
    elif app == "settings":
        yield _same_page(sh, "/", "index", "toast", sh.toast, True)
        yield _same_page(
            sh,
            "/display",
            "dark",
            "same_url",
            lambda: (sh.post("/toggle", {"key": "dark_mode"}), sh.goto("/display")),
            False,
        )
    elif app == "notes":
        yield _same_page(sh, "/", "index", "scroll", lambda: sh.scroll(px()), True)
        yield _two_pages(sh, "/n/n1", "/n/n2")
    elif app == "mobile_shop":
        yield _same_page(sh, "/", "home", "scroll", lambda: sh.scroll(px()), True)
        yield _same_page(sh, "/", "home", "clock", lambda: sh.tick(".m-clock"), True)
        # the app's own toast: the same page reached with ?msg=added
        yield _two_pages(sh, "/product/m1", "/product/m1?msg=added", kind="toast", label=True)
        yield _two_pages(sh, "/product/m1", "/product/m2")
        yield _same_page(
            sh,
            "/product/m3",
            "sku sheet",
            "same_url",
            lambda: (sh.page.click("[data-sheet=sku]"), sh.page.wait_for_selector(".m-sheet:not([hidden])")),
            False,
        )
        pid = _not_in_cart(app, sh.lang, sh.seed)
        yield _same_page(
            sh,
            "/cart",
            f"cart+{pid}",
            "same_url",
            lambda: (sh.post("/cart/add", {"pid": pid, "qty": "1"}), sh.goto("/cart")),
            False,
        )
    elif app == "mobile_social":
        yield _same_page(sh, "/", "home", "scroll", lambda: sh.scroll(px()), True)
        yield _same_page(sh, "/", "home", "clock", lambda: sh.tick(".m-clock"), True)
        yield _two_pages(sh, "/u/mayawanders", "/u/leo.eats")


WEB_APPS = ("shop", "mail", "social", "settings", "notes")
PHONE_APPS = ("mobile_shop", "mobile_social")


def draw_pairs(
    server_url: str,
    browser,
    *,
    langs: Iterable[str] = ("en", "zh"),
    apps: Iterable[str] = WEB_APPS + PHONE_APPS,
    seed: int = 0,
) -> list[dict]:
    """Drive `browser` (a Playwright Browser) over the sandbox at `server_url`; one dict per
    pair (filters.calibration.labelled_pairs reads them)."""
    rng = random.Random(seed)
    pairs: list[dict] = []
    for lang in langs:
        for app in apps:
            sh = _Shooter(browser, server_url, app, lang, app in PHONE_APPS, seed)
            try:
                pairs.extend(_scenes(sh, rng))
            finally:
                sh.close()
    return pairs
