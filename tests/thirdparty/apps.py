"""Third-party web apps from the registries, started on loopback for the tests, stopped by PID.

TiddlyWiki comes from npm (package.json), Datasette from PyPI (the dev extra).
Nothing here knows the apps' pages: the environment files in
examples/environments/ and their task files do, as a user's would.

The fixtures `tiddlywiki_url` and `datasette_url` start each app once per test
run (per xdist worker) for every folder that uses it (tests/conftest.py loads
this module as a plugin); each is started only when a test asks for it. A test
that changes an app's data leaves it for the next: the environment files' own
`setup` resets what their tasks create.
"""

from __future__ import annotations

import http.server
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENVIRONMENTS = ROOT / "examples" / "environments"
TIDDLYWIKI = ROOT / "node_modules" / ".bin" / "tiddlywiki"
DATASETTE = Path(sys.executable).parent / "datasette"

CITIES = [
    ("Paris", "France", 2_102_650),
    ("Lyon", "France", 522_250),
    ("Berlin", "Germany", 3_878_100),
    ("Madrid", "Spain", 3_332_035),
    ("北京", "中国", 21_893_095),
    ("上海", "中国", 24_870_895),
    ("杭州", "中国", 12_203_600),
    ("Tokyo", "Japan", 14_094_034),
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, proc: subprocess.Popen, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[0]} exited with {proc.returncode} before serving {url}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"{url} did not answer within {timeout_s}s")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


@contextmanager
def tiddlywiki(folder: Path):
    """A TiddlyWiki server (node) on a free loopback port; yields its URL."""
    wiki = folder / "wiki"
    subprocess.run(
        [str(TIDDLYWIKI), str(wiki), "--init", "server"], check=True, capture_output=True, timeout=60
    )
    port = free_port()
    log = open(folder / "tiddlywiki.log", "wb")
    proc = subprocess.Popen(
        [str(TIDDLYWIKI), str(wiki), "--listen", f"port={port}", "host=127.0.0.1"],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(url + "/status", proc)
        yield url
    finally:
        stop(proc)
        log.close()


@contextmanager
def datasette(folder: Path):
    """Datasette over a world.db (table cities) made here, on a free loopback port; yields its URL."""
    db = folder / "world.db"
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE cities (name TEXT PRIMARY KEY, country TEXT, population INT)")
        con.executemany("INSERT INTO cities VALUES (?, ?, ?)", CITIES)
    port = free_port()
    log = open(folder / "datasette.log", "wb")
    proc = subprocess.Popen(
        [str(DATASETTE), "serve", str(db), "-h", "127.0.0.1", "-p", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(url + "/-/versions.json", proc)
        yield url
    finally:
        stop(proc)
        log.close()


COUNTER_PAGE = b"""<!doctype html><html><body><h1>Counter</h1>
<button onclick="document.body.dataset.n = (+(document.body.dataset.n||0)) + 1">Add</button>
</body></html>"""


class _CounterHandler(http.server.BaseHTTPRequestHandler):
    """A page with an Add button; /missing answers 404; /verdict a JSON verdict."""

    def do_GET(self):
        if self.path.startswith("/missing"):
            self.send_response(404)
            self.end_headers()
            self.wfile.write(b"<h1>Not Found</h1>")
            return
        verdict = self.path.startswith("/verdict")
        body = (
            b'{"done": true, "success": true, "reason": "server says so", "extra": 1}'
            if verdict
            else COUNTER_PAGE
        )
        self.send_response(200)
        self.send_header("Content-Type", "application/json" if verdict else "text/html")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@contextmanager
def counter_server():
    """A stand-in for a user's small app on a loopback port (a thread); yields its URL."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _CounterHandler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture(scope="session")
def tiddlywiki_url(tmp_path_factory):
    """A TiddlyWiki server for the whole run; its URL."""
    with tiddlywiki(tmp_path_factory.mktemp("tiddlywiki")) as url:
        yield url


@pytest.fixture(scope="session")
def datasette_url(tmp_path_factory):
    """A Datasette over world.db for the whole run; its URL."""
    with datasette(tmp_path_factory.mktemp("datasette")) as url:
        yield url
