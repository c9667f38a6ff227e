"""The filtering proxy on its own, with http.client as the browser (no Chromium here).

What Chromium does with it (every channel of a hostile page, redirects) is
tests/security/test_allowlist_recording.py.
"""

from __future__ import annotations

import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from crawlers.allowlist import Allowlist
from crawlers.web_proxy import FilteringProxy


class _Upstream(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        if self.path.startswith("/redirect"):
            self.send_response(302)
            self.send_header("Location", "http://elsewhere.test/landing")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.path.startswith("/stream"):  # no Content-Length: the proxy re-chunks it
            self.send_response(200)
            self.send_header("Connection", "close")
            self.end_headers()
            for part in (b"one,", b"two,", b"three"):
                self.wfile.write(part)
                self.wfile.flush()
            self.close_connection = True
            return
        body = f"{self.command} {self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Set-Cookie", "a=1")
        self.send_header("Set-Cookie", "b=2")
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def upstream():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def module_proxy(upstream):
    blocked: list[str] = []
    with FilteringProxy(Allowlist([upstream]), blocked.append) as p:
        p.blocked = blocked
        yield p


@pytest.fixture
def proxy(module_proxy):
    module_proxy.blocked.clear()
    return module_proxy


def _client(proxy) -> http.client.HTTPConnection:
    host, port = proxy.url.split("//")[1].split(":")
    return http.client.HTTPConnection(host, int(port), timeout=10)


def test_allowed_requests_pass_on_one_kept_alive_connection(upstream, proxy):
    conn = _client(proxy)
    conn.request("GET", f"{upstream}/a?q=1")
    resp = conn.getresponse()
    assert (resp.status, resp.read()) == (200, b"GET /a?q=1")
    assert resp.headers.get_all("Set-Cookie") == ["a=1", "b=2"]  # repeated headers kept
    conn.request(
        "POST",
        f"{upstream}/form",
        body=b"x=1&y=2",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert conn.getresponse().read() == b"x=1&y=2"  # same connection, body forwarded
    assert proxy.blocked == []


def test_a_redirect_is_passed_on_not_followed(upstream, proxy):
    conn = _client(proxy)
    conn.request("GET", f"{upstream}/redirect")
    resp = conn.getresponse()
    assert resp.status == 302 and resp.getheader("Location") == "http://elsewhere.test/landing"
    resp.read()
    # The browser's next request, for the target, is refused and recorded once.
    conn.request("GET", "http://elsewhere.test/landing")
    # Deliberately malformed (two Content-Lengths): Chromium fails the request and never
    # retries it; http.client is lenient and shows the 403.
    assert conn.getresponse().status == 403
    assert proxy.blocked == ["http://elsewhere.test/landing"]


def test_a_body_without_length_is_streamed_in_chunks(upstream, proxy):
    conn = _client(proxy)
    conn.request("GET", f"{upstream}/stream")
    resp = conn.getresponse()
    assert resp.getheader("Transfer-Encoding") == "chunked"
    assert resp.read() == b"one,two,three"


def test_tunnels_and_a_broken_filter_fail_closed(upstream):
    blocked: list[str] = []

    def broken(url: str) -> bool:
        raise RuntimeError("filter bug")

    with FilteringProxy(broken, blocked.append) as p:
        conn = _client(p)
        conn.request("GET", f"{upstream}/a")
        assert conn.getresponse().status == 403
        tunnel = _client(p)
        tunnel.request("CONNECT", "127.0.0.1:443")
        assert tunnel.getresponse().status == 403
    assert blocked == [f"{upstream}/a", "https://127.0.0.1:443"]
