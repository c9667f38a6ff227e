"""Fixtures for the crawler tests: static test pages on local servers, one browser per module."""

from __future__ import annotations

import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from crawlers.web_env import WebEnv

PAGES = Path(__file__).parent / "pages"


class _PagesHandler(SimpleHTTPRequestHandler):
    """Static files from PAGES, plus /slow?s=N which answers after N seconds."""

    stop: threading.Event  # set on the class by `serve_pages`

    def do_GET(self):
        u = urlparse(self.path)
        if u.path == "/slow":
            self.stop.wait(float(parse_qs(u.query).get("s", ["30"])[0]))
            body = b"<!doctype html><title>Slow</title><h1>Slow page</h1>"
            try:
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except OSError:
                pass  # the browser gave up on us
            return
        super().do_GET()

    def log_message(self, *args):
        pass


class serve_pages:
    """A threaded http.server on 127.0.0.1:<free port> serving tests/crawlers/pages."""

    def __init__(self):
        self.stop = threading.Event()
        handler = type("Handler", (_PagesHandler,), {"stop": self.stop})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), partial(handler, directory=str(PAGES)))
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def pages_url():
    with serve_pages() as s:
        yield s.url


@pytest.fixture(scope="module")
def other_pages_url():
    """A second server: the request-filter tests block requests to it."""
    with serve_pages() as s:
        yield s.url


@pytest.fixture(scope="module")
def web_env():
    with WebEnv.launch(headless=True, step_timeout_s=10.0) as env:
        yield env
