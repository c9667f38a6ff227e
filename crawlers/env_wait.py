"""An environment's `wait_for` in a page: a CSS selector or a JavaScript condition, polled.

How the condition is read:
- `css:` or `js:` in front says which it is;
- otherwise it is JavaScript when it starts as only JavaScript can (`window`,
  `document`, `return`, `function`, `async`, `(`, `!`, `x =>`) or when the
  page's `document.querySelector` refuses it as a selector; else it is a CSS
  selector, and the element must be visible.

A JavaScript condition is an expression; when its value is a function
(`() => ...`, `function () {...}`, `async () => ...`) the function is called,
and a promise is awaited. Whether it is a function is decided by its value,
never by the text: `[...xs].some(e => e.ok)` contains an arrow and is an
expression. A condition that starts with `return` is a function body. What the
condition throws while the page still loads counts as "not yet"; the last
error is named when the time runs out.
"""

from __future__ import annotations

import re
import time

from .env_page import bounded_js

# Text no CSS selector can start with.
_JS_START = re.compile(r"^(window|document|return|function|async)\b|^[(!]|^[A-Za-z_$][\w$]*\s*=>")
_IS_SELECTOR = "(s) => { try { document.querySelector(s); return true; } catch (e) { return false; } }"
_POLL_S = 0.1


def wait_for_condition(page, condition: str, timeout_s: float) -> None:
    """Return once `condition` holds in `page`; TimeoutError saying why when it does not
    in time (its message starts with what was waited for, to follow "wait_for ")."""
    deadline = time.monotonic() + timeout_s
    kind, text = condition_kind(page, condition, deadline)
    if kind == "css":
        try:
            page.wait_for_selector(text, state="visible", timeout=_left_ms(deadline))
        except Exception as e:  # noqa: BLE001 - Playwright's timeout, or a bad selector
            detail = _first_line(e)
            if "timeout" in detail.lower():  # `app.ready` is a selector too: say how to mean JavaScript
                detail = "for a JavaScript condition, write js: before it"
            raise TimeoutError(f"selector {text!r} was not visible within {timeout_s:g} s ({detail})") from e
        return
    script_of = text
    if re.match(r"return\b", text):
        script_of = f"() => {{\n{text}\n}}"
    last_error = None
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        script = bounded_js(script_of, left, "the condition's promise did not settle in time")
        try:
            if page.evaluate(script, None):
                return
            last_error = None  # evaluated fine: it simply does not hold yet
        except Exception as e:  # noqa: BLE001 - the page is loading, navigating, or the condition throws
            last_error = _first_line(e)
        time.sleep(min(_POLL_S, max(0.0, deadline - time.monotonic())))
    why = f" (last error: {last_error})" if last_error else ""
    raise TimeoutError(f"{text!r} did not hold within {timeout_s:g} s{why}")


def condition_kind(page, condition: str, deadline: float) -> tuple[str, str]:
    """("css" or "js", the condition without its prefix)."""
    text = condition.strip()
    prefix, _, body = text.partition(":")
    if prefix in ("css", "js") and body.strip():
        return prefix, body.strip()
    if _JS_START.match(text):
        return "js", text
    while True:  # the selector check needs a document; the one of a reload may not be there yet
        try:
            return ("css" if page.evaluate(_IS_SELECTOR, text) else "js"), text
        except Exception as e:  # noqa: BLE001 - the page is navigating: ask the next document
            if time.monotonic() > deadline:
                raise TimeoutError(f"{text!r}: no page to read it in ({_first_line(e)})") from e
            time.sleep(_POLL_S)


def _left_ms(deadline: float) -> float:
    return max(1.0, (deadline - time.monotonic()) * 1000)


def _first_line(e: BaseException) -> str:
    lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
    text = lines[0] if lines else type(e).__name__
    return text.removeprefix("Page.evaluate: ")[:300]
