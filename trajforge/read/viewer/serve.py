"""Serve a built viewer site over HTTP from a background thread (standard library only)."""

from __future__ import annotations

import functools
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass  # one line per image would drown the terminal


def serve(site_dir: Path | str, port: int = 0, host: str = "127.0.0.1") -> tuple[ThreadingHTTPServer, str]:
    """Start serving site_dir; return (server, url of its index). Stop with server.shutdown().

    port=0 picks a free port. Binds to localhost only: the site shows raw
    screenshots, which may hold private data.
    """
    site_dir = Path(site_dir)
    if not (site_dir / "index.html").is_file():
        raise FileNotFoundError(f"{site_dir}: no index.html (build the site first)")
    handler = functools.partial(_QuietHandler, directory=str(site_dir))
    server = ThreadingHTTPServer((host, port), handler)
    thread = threading.Thread(target=server.serve_forever, name="trajforge-viewer", daemon=True)
    thread.start()
    return server, f"http://{host}:{server.server_port}/index.html"
