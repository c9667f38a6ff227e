"""The page an environment's JavaScript runs in: Playwright's, or an Appium web session's.

A js verifier, a `setup` script, `wait_for` and `instruction_js` need a page
to evaluate in. A WebEnv has Playwright's; a MobileEnv on a Chromium phone
(Appium's chromium driver) has a W3C session, wrapped here in the few calls
the runtime uses (`evaluate`, `wait_for_load_state`, `wait_for_function`,
`wait_for_selector`, `set_default_timeout`) with Playwright's meaning: an
expression is evaluated, a function is called with the argument, a promise
is awaited. Native Android / iOS apps have no page: the runtime says so.
"""

from __future__ import annotations

import json
import time
from typing import Any

_CALL = """const done = arguments[arguments.length - 1]; const arg = arguments[0];
(async () => {{ const v = ({expression}); return typeof v === 'function' ? await v(arg) : await v; }})()
  .then(r => done({{ok: r === undefined ? null : r}}),
        e => done({{error: String(e && e.message || e)}}));"""


class DriverPage:
    """Playwright-like evaluation over a Selenium/Appium driver in a web context."""

    def __init__(self, driver, timeout_s: float = 10.0):
        self.driver = driver
        self.timeout_s = timeout_s

    def set_default_timeout(self, ms: float) -> None:
        self.timeout_s = ms / 1000

    def evaluate(self, expression: str, arg: Any = None) -> Any:
        self.driver.set_script_timeout(self.timeout_s)
        try:
            out = self.driver.execute_async_script(_CALL.format(expression=expression), arg)
        except Exception as e:  # noqa: BLE001 - a navigation ends the script: say it so
            text = str(e)
            if "unload" in text or "navigat" in text or "detached" in text:
                raise RuntimeError(f"the page navigated while evaluating: {text}") from e
            raise
        if isinstance(out, dict) and "error" in out:
            raise RuntimeError(f"Page.evaluate: {out['error']}")
        return out.get("ok") if isinstance(out, dict) else out

    def _poll(self, check, timeout_ms: float, what: str) -> None:
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            try:
                if check():
                    return
            except RuntimeError:
                pass  # still loading: not yet
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what}: timeout {timeout_ms:.0f}ms exceeded")
            time.sleep(0.1)

    def wait_for_load_state(self, state: str = "load", timeout: float = 10_000) -> None:
        self._poll(
            lambda: self.evaluate("document.readyState") != "loading",
            timeout,
            f"wait_for_load_state({state})",
        )

    def wait_for_function(self, fn: str, timeout: float = 10_000) -> None:
        self._poll(lambda: bool(self.evaluate(fn)), timeout, "wait_for_function")

    def wait_for_selector(self, selector: str, state: str = "visible", timeout: float = 10_000) -> None:
        check = (
            "(s) => { const el = document.querySelector(s);"
            " return !!el && (el.getClientRects().length > 0); }"
        )
        self._poll(lambda: bool(self.evaluate(check, selector)), timeout, f"wait_for_selector({selector!r})")


def web_page(env):
    """The page to run an environment's JavaScript in, or None (a native app)."""
    page = getattr(env, "page", None)
    if page is not None:
        return page
    driver = getattr(env, "driver", None)
    if driver is not None and getattr(env, "kind", None) == "chromium":
        page = getattr(env, "_tf_driver_page", None)
        if page is None or page.driver is not driver:
            page = DriverPage(driver, getattr(env, "step_timeout_s", 10.0))
            env._tf_driver_page = page
        return page
    return None


def bounded_js(expression: str, timeout_s: float, message: str | None = None) -> str:
    """A page function that evaluates `expression` (a value, a promise, or a function of
    the argument, called) and rejects with `message` after `timeout_s`: a verifier or a
    wait must not hang the crawl. A function is told from a value by what the expression
    gives (typeof), never by how its text looks: `xs.some(e => e.ok)` is a value."""
    ms = int(timeout_s * 1000)
    text = json.dumps(message or f"no verdict within {timeout_s}s (timeout_s)")
    # On lines of its own: a trailing // comment must not swallow the closing parenthesis.
    expression = expression.strip().rstrip(";")
    return (
        f"async (arg) => {{ const run = async () => {{ const v = (\n{expression}\n);"
        f" return typeof v === 'function' ? await v(arg) : await v; }};"
        f" return await Promise.race([run(), new Promise((_, reject) => setTimeout("
        f"() => reject(new Error({text})), {ms}))]); }}"
    )
