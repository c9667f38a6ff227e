"""A local HTTP proxy that holds a crawl's browser to its request filter, redirects included.

With a request filter, every request a WebEnv's Chromium sends over the
network (documents, subresources, each hop of a redirect chain, beacons,
prefetches, workers) goes through this proxy: Playwright proxies loopback
too (it adds `<-loopback>` to the bypass list). A URL the filter refuses is
recorded and answered with a deliberately malformed response, which the
browser turns into a network error (REFUSAL_ERROR) and, unlike a closed
connection, never retries; an allowed request is forwarded and its answer
streamed back. A redirect is passed on as is: the browser's request for its
target comes back through the proxy and is checked like any other.

Why not Playwright's `route`: it sees only the first URL of a redirect chain,
so each allowed request had to be fetched through Python
(`route.fetch(max_redirects=0)`, crawlers.allowlist.filter_route), and
routing turns the browser's HTTP cache off. benchmarks/web_crawl.py prices
both mechanisms.
"""

from __future__ import annotations

import http.client
import select
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

# What Chromium reports for a refused request (see `_refuse`).
REFUSAL_ERROR = "ERR_RESPONSE_HEADERS_MULTIPLE_CONTENT_LENGTH"
_REFUSAL = b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nContent-Length: 1\r\nConnection: close\r\n\r\n"

# Headers that describe one connection, not the message (RFC 9110 7.6.1).
_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
_CHUNK = 64 * 1024


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive with the browser: no thread per request
    server: _ProxyServer

    def log_message(self, *args) -> None:
        pass  # a line per request would drown the crawl's own logs

    def _refuse(self) -> None:
        self.wfile.write(_REFUSAL)
        self.close_connection = True

    # ------------------------------------------------------------------ plain HTTP
    def _forward(self) -> None:
        url = self.path
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            self.send_error(400, "the proxy takes absolute http:// URLs (https goes through CONNECT)")
            return
        if not self.server.check(url):
            self._refuse()
            return
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length > 0 else None
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        try:
            resp = self._send_upstream(parts.hostname, parts.port or 80, path, body)
            self._relay(resp)
        except OSError:
            self.close_connection = True  # the server or the browser went away mid-answer

    def _send_upstream(self, host: str, port: int, path: str, body: bytes | None):
        # One upstream connection per browser connection, reused; a stale one
        # (closed by the server while idle) is replaced once, as browsers do.
        for attempt in (0, 1):
            conn = self._upstream(host, port, fresh=attempt == 1)
            try:
                conn.putrequest(self.command, path, skip_host=True, skip_accept_encoding=True)
                for name, value in self.headers.items():
                    if name.lower() not in _HOP_BY_HOP:
                        conn.putheader(name, value)
                conn.endheaders(body)
                return conn.getresponse()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                conn.close()
                if attempt == 1:
                    raise
        raise AssertionError("unreachable")

    def _upstream(self, host: str, port: int, fresh: bool) -> http.client.HTTPConnection:
        pool = self.__dict__.setdefault("_pool", {})
        conn = pool.get((host, port))
        if conn is None or fresh:
            conn = pool[(host, port)] = http.client.HTTPConnection(host, port, timeout=self.server.timeout_s)
        return conn

    def _relay(self, resp: http.client.HTTPResponse) -> None:
        self.send_response_only(resp.status, resp.reason)
        for name, value in resp.getheaders():
            if name.lower() not in _HOP_BY_HOP:
                self.send_header(name, value)
        bodiless = self.command == "HEAD" or resp.status in (204, 304) or resp.status < 200
        chunked = not bodiless and resp.getheader("Content-Length") is None
        if chunked:  # streamed as it arrives (event streams, long polls)
            self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            if bodiless:
                return
            while data := resp.read1(_CHUNK):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)
            if chunked:
                self.wfile.write(b"0\r\n\r\n")
        finally:
            # Done with this answer: the upstream connection can take the next request.
            resp.close()
            if resp.will_close:
                self.__dict__.get("_pool", {}).clear()

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _forward

    # ------------------------------------------------------------------ tunnels (https, wss)
    def do_CONNECT(self) -> None:
        self.close_connection = True
        host, _, port = self.path.rpartition(":")
        if not host or not port.isdigit():
            self.send_error(400, "CONNECT takes host:port")
            return
        if not self.server.check_tunnel(host, int(port)):
            self._refuse()
            return
        try:
            upstream = socket.create_connection((host.strip("[]"), int(port)), timeout=self.server.timeout_s)
        except OSError:
            self.send_error(502, f"cannot reach {self.path}")
            return
        try:
            self.send_response_only(200, "Connection Established")
            self.end_headers()
            _pump(self.connection, upstream)
        finally:
            upstream.close()

    def finish(self) -> None:
        for conn in self.__dict__.get("_pool", {}).values():
            conn.close()
        try:
            super().finish()
        except OSError:
            pass  # the browser dropped the connection (a cancelled load)


def _pump(a: socket.socket, b: socket.socket) -> None:
    """Copy bytes both ways until either side closes."""
    while True:
        readable, _, broken = select.select([a, b], [], [a, b], 60)
        if broken or not readable:
            return
        for s in readable:
            try:
                data = s.recv(_CHUNK)
                if not data:
                    return
                (b if s is a else a).sendall(data)
            except OSError:
                return


class _ProxyServer(ThreadingHTTPServer):
    daemon_threads = True
    timeout_s: float
    check: Callable[[str], bool]
    check_tunnel: Callable[[str, int], bool]

    def handle_error(self, request, client_address) -> None:
        pass  # a browser that cancels a load resets its connection: not an error here


class FilteringProxy:
    """An HTTP proxy on 127.0.0.1:<free port> that forwards only what `allows` accepts.

    `allows(url) -> bool` is the request filter (one that raises refuses: it
    fails closed); each refused URL goes to `on_blocked`, from a proxy thread.
    A CONNECT tunnel (https, WebSockets) is allowed when the filter accepts
    `https://host:port/` or `http://host:port/` (a WebSocket to an http origin).
    """

    def __init__(
        self, allows: Callable[[str], bool], on_blocked: Callable[[str], None], timeout_s: float = 30.0
    ):
        self._allows = allows
        self._on_blocked = on_blocked
        self._server = _ProxyServer(("127.0.0.1", 0), _Handler)
        self._server.timeout_s = timeout_s
        self._server.check = self._check
        self._server.check_tunnel = self._check_tunnel
        self.url = f"http://127.0.0.1:{self._server.server_port}"
        # A short poll: close() (at every env close) waits for one.
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.1,), name="filtering-proxy", daemon=True
        )
        self._thread.start()

    def _ok(self, url: str) -> bool:
        try:
            return bool(self._allows(url))
        except Exception:  # noqa: BLE001 - a broken filter must not open the gate
            return False

    def _check(self, url: str) -> bool:
        if self._ok(url):
            return True
        self._on_blocked(url)
        return False

    def _check_tunnel(self, host: str, port: int) -> bool:
        if self._ok(f"https://{host}:{port}/") or self._ok(f"http://{host}:{port}/"):
            return True
        self._on_blocked(f"https://{host}:{port}")
        return False

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FilteringProxy:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
