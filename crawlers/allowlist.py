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
    return (_SCHEME_FAMILY.get(scheme, scheme), host,
            port if port is not None else _DEFAULT_PORTS[scheme])


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
