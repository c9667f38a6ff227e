"""The allowlist: origin matching, and a real Chromium whose outside requests are aborted."""

from __future__ import annotations

import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from crawlers.allowlist import Allowlist, origin_of
from crawlers.randomise import fixed
from crawlers.web_env import WebEnv
from schemas.actions import Action, ActionType

RUNNER_PAGES = Path(__file__).parent / "runner_pages"


def test_origin_matching_is_scheme_host_and_port():
    allow = Allowlist(["http://127.0.0.1:5000", "https://Example.org"])
    assert allow.allows("http://127.0.0.1:5000/shop/?q=1")
    assert allow.allows("http://127.0.0.1:5000")
    assert allow.allows("https://example.org/a")  # host case does not matter
    assert allow.allows("https://example.org:443/a")  # the default port is the port
    assert allow.allows("ws://127.0.0.1:5000/socket")  # same origin's websocket
    assert not allow.allows("http://127.0.0.1:5001/")  # another port
    assert not allow.allows("https://127.0.0.1:5000/")  # another scheme
    assert not allow.allows("http://localhost:5000/")  # another host name
    assert not allow.allows("http://example.org/")  # http is not https
    assert not allow.allows("https://evil.example.org/")  # a subdomain is another host
    assert not allow.allows("https://example.org.evil.com/")
    assert not allow.allows("http://127.0.0.1:5000@evil.com/")  # userinfo trick
    assert not allow.allows("file:///etc/passwd")
    assert not allow.allows("chrome://settings")
    assert not allow.allows("http://[::1]:5000/")
    assert not allow.allows("not a url")


def test_local_urls_are_allowed():
    allow = Allowlist(["http://127.0.0.1:5000"])
    assert allow.allows("data:text/html,<h1>hi</h1>")
    assert allow.allows("about:blank")
    assert allow.allows("blob:http://127.0.0.1:5000/4a1e-uuid")
    assert not allow.allows("blob:http://evil.com/4a1e-uuid")
    assert not allow.allows("about:config")


def test_refused_urls_are_recorded_in_order():
    allow = Allowlist(["http://127.0.0.1:5000"])
    for url in ("http://a.com/1", "http://127.0.0.1:5000/ok", "https://b.com/2"):
        allow(url)
    assert allow.blocked == ["http://a.com/1", "https://b.com/2"]


def test_bad_origins_are_refused_with_the_origin_named():
    with pytest.raises(ValueError, match="ftp://x"):
        Allowlist(["ftp://x"])
    with pytest.raises(ValueError, match="'127.0.0.1:5000'"):
        Allowlist(["127.0.0.1:5000"])
    assert origin_of("http://h:99999/") is None  # an impossible port


@pytest.mark.slow
def test_chromium_aborts_requests_to_a_second_server_and_records_them():
    """A page on the allowed server fetches from, loads an image from and links to
    a second local server: none of it reaches that server, all of it is recorded."""
    with PagesServer() as allowed, PagesServer() as other:
        allow = Allowlist([allowed.url])
        with WebEnv.launch(headless=True, step_timeout_s=10.0, request_filter=allow) as env:
            obs = env.reset(f"{allowed.url}/outside.html?other={other.url}", fixed("desktop", "en"))
            assert obs.last_action_error is None
            obs = _until(env, obs, lambda o: not o.find("pending", role="paragraph"))
            texts = [e.name for e in obs.find(role="paragraph")]
            assert "own fetch: reached 200" in texts, texts  # the allowed origin works
            assert "fetch: blocked" in texts and "image: blocked" in texts, texts
            assert f"{other.url}/second.html" in env.blocked_requests
            assert f"{other.url}/pixel.png?from=img" in env.blocked_requests
            assert not any(u.startswith(allowed.url) for u in env.blocked_requests)

            # A navigation off the allowlist is aborted too (Chromium shows its error page).
            link = obs.find("Leave the sandbox", role="link")[0]
            obs = env.step(Action.tap(*link.centre()))
            assert not obs.url.startswith(other.url), obs.url
            assert f"{other.url}/second.html?from=link" in env.blocked_requests
            assert obs.last_action_error and "second.html" in obs.last_action_error

            assert allow.blocked == env.blocked_requests
        assert other.requests == []  # the second server never saw a request
        assert "/outside.html" in {p.split("?")[0] for p in allowed.requests}


@pytest.mark.slow
def test_the_browsers_own_lookups_are_not_counted_as_the_pages_blocked_requests():
    """The sandbox's mail app (forms on every page): Chromium's autofill lookups to
    Google were refused by the proxy and counted as blocked requests of the page, about
    two per episode; the crawler's Chromium makes none."""
    import trajforge.envs as tf_envs
    from sandbox.server import SandboxServer

    with SandboxServer() as server:
        env = tf_envs.make_sandbox(server.url, apps=["mail"])
        try:
            for seed in range(3):
                env.reset(seed=seed)
                assert env.unwrapped.browser.blocked_requests == [], env.unwrapped.browser.blocked_requests
        finally:
            env.close()


def _until(env, obs, cond, tries: int = 20):
    """Let the page's async requests finish (they fail fast when blocked)."""
    for _ in range(tries):
        if cond(obs):
            return obs
        obs = env.step(Action(type=ActionType.WAIT, duration_ms=100))
    raise AssertionError(f"condition never held; tree:\n{obs.a11y_tree}")


class _LoggingHandler(SimpleHTTPRequestHandler):
    log: list  # set per server

    def do_GET(self):
        self.log.append(self.path)
        super().do_GET()

    def log_message(self, *args):
        pass


class PagesServer:
    """tests/crawlers/runner_pages on 127.0.0.1:<free port>, logging each request path."""

    def __init__(self):
        self.requests: list[str] = []
        handler = type("Handler", (_LoggingHandler,), {"log": self.requests})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), partial(handler, directory=str(RUNNER_PAGES)))
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> PagesServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
