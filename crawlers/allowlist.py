"""Which origins a crawl may reach: everything else is aborted and recorded.

The crawler drives pages it does not control (a sandbox app may embed a link,
an image or a fetch to anywhere). WebEnv calls the allowlist on navigation and
on every sub-request, so a crawl never talks to the outside world.
"""

from __future__ import annotations

from urllib.parse import urlsplit

_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}
# A WebSocket to an allowed host is the same origin as the page that opened it.
_SCHEME_FAMILY = {"ws": "http", "wss": "https"}
# URLs that never leave the browser.
_LOCAL_URLS = ("about:blank", "about:srcdoc")


Origin = tuple[str, str, int]


def origin_of(url: str) -> Origin | None:
    """(scheme, host, port) of a URL with a network origin, else None."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:  # a malformed port or host
        return None
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if scheme not in _DEFAULT_PORTS or not host:
        return None
    return (_SCHEME_FAMILY.get(scheme, scheme), host, port if port is not None else _DEFAULT_PORTS[scheme])


class Allowlist:
    """`allows(url)`: True for URLs on one of `origins`, `data:` and `about:blank`.

    Origins match on scheme, host and port exactly (http://127.0.0.1:5000 is
    not http://localhost:5000). Every refused URL is appended to `blocked`.
    """

    def __init__(self, origins: list[str]):
        self.origins: set[Origin] = set()
        for o in origins:
            parsed = origin_of(o)
            if parsed is None:
                raise ValueError(f"allowlist origin {o!r} is not an http(s) URL with a host")
            self.origins.add(parsed)
        self.blocked: list[str] = []

    def allows(self, url: str) -> bool:
        ok = self._allowed(url)
        if not ok:
            self.blocked.append(url)
        return ok

    __call__ = allows  # so it can be passed wherever a predicate is expected

    def _allowed(self, url: str) -> bool:
        low = url.strip().lower()
        if low.startswith("data:") or low in _LOCAL_URLS:
            return True
        if low.startswith("blob:"):  # blob:http://host:port/uuid belongs to its origin
            return self._allowed(url.strip()[5:])
        return origin_of(url) in self.origins

    def __repr__(self) -> str:
        shown = ", ".join(f"{s}://{h}:{p}" for s, h, p in sorted(self.origins))
        return f"Allowlist([{shown}])"


def filter_route(route, allows, blocked: list[str], timeout_ms: float | None = None) -> None:
    """A Playwright route handler body that also holds across HTTP redirects.

    Playwright calls a route handler only for the first URL of a redirect chain,
    so an allowed URL answering 302 to another origin would take Chromium there
    unchecked. Allowed requests are therefore fetched without following
    redirects (`timeout_ms` bounds the fetch); a redirect whose target `allows`
    refuses is aborted and its target recorded in `blocked`; any other answer
    is handed to the page (a redirect it then follows comes back through the
    handler). A filter that raises refuses: it fails closed.

    WebEnv no longer routes through this (crawlers/web_proxy.py holds the
    browser to the filter at the network level and keeps the HTTP cache on);
    it stays as the Playwright-only way for code that cannot use a proxy.
    """
    from urllib.parse import urljoin

    def ok(url: str) -> bool:
        try:
            return bool(allows(url))
        except Exception:  # noqa: BLE001 - a broken filter must not open the gate
            return False

    def settle(call, *args, **kw) -> None:
        try:
            call(*args, **kw)
        except Exception:  # noqa: BLE001 - the page navigated away or closed meanwhile
            pass

    url = route.request.url
    if not ok(url):
        blocked.append(url)
        settle(route.abort, "blockedbyclient")
        return
    try:
        response = route.fetch(max_redirects=0, timeout=timeout_ms)
    except Exception:  # noqa: BLE001 - the server, the page or the timeout gave up
        settle(route.abort, "failed")
        return
    location = response.headers.get("location")
    if 300 <= response.status < 400 and location:
        target = urljoin(url, location)
        if not ok(target):
            blocked.append(target)
            settle(route.abort, "blockedbyclient")
            return
    settle(route.fulfill, response=response)
