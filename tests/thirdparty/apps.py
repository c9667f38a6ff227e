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
from dataclasses import dataclass, field
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


# A small single-page app: its list fills in after ?delay= ms (a wait_for must wait),
# its Save button creates /api/notes/milk on the server (GET answers 404 until then),
# and it states its own task (instruction_js). It ignores the emulated colour scheme.
NOTES_PAGE = """<!doctype html><html lang="{lang}"><head><title>Notes</title>{head}</head>
<body><h1>{title}</h1><p id="task">{task}</p><ul id="items"></ul>
<button onclick="fetch('/api/notes/milk', {{method: 'POST'}}).then(() => document.body.dataset.saved = '1')"
>{save}</button>
<script>setTimeout(() => {{ const li = document.createElement('li'); li.className = 'item';
  li.textContent = 'ready'; document.getElementById('items').appendChild(li); }},
  +(new URLSearchParams(location.search).get('delay') || 400));</script>
</body></html>"""
# Follows the emulated colour scheme (a dark background in dark mode).
THEMED_HEAD = """<meta name="color-scheme" content="light dark"><style>
@media (prefers-color-scheme: dark) { body { background: #111; color: #eee; } }</style>"""
NOTES_VARIANTS = {
    "/": dict(lang="en", head="", title="Notes", task="Save the note milk", save="Save"),
    "/themed": dict(lang="en", head=THEMED_HEAD, title="Notes", task="Save the note milk", save="Save"),
    "/zh": dict(lang="zh-CN", head="", title="笔记", task="保存笔记 milk", save="保存"),
    # No lang attribute: the language is read from the text.
    "/zh-nolang": dict(lang="", head="", title="笔记", task="保存笔记 milk", save="保存"),
}


class _NotesHandler(http.server.BaseHTTPRequestHandler):
    def _send(self, status: int, body: bytes = b"", kind: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        path = self.path.split("?")[0]
        if path.startswith("/api/notes/"):
            name = path.removeprefix("/api/notes/")
            status = 200 if name in self.server.app.notes else 404
            self.server.app.answers.append((path, status))
            if status == 404:
                return self._send(404, b'{"error": "no such note"}')
            return self._send(200, ('{"title": "%s"}' % name).encode())
        page = NOTES_VARIANTS.get(path)
        if page is None:
            return self._send(404, b"<h1>Not Found</h1>", "text/html")
        html = NOTES_PAGE.format(**page).replace(' lang=""', "")
        self._send(200, html.encode("utf-8"), "text/html; charset=utf-8")

    def do_POST(self):
        path = self.path.split("?")[0]
        if not path.startswith("/api/notes/"):
            return self._send(404)
        self.server.app.notes.add(path.removeprefix("/api/notes/"))
        self._send(201, b"{}")

    def log_message(self, *args):
        pass


@dataclass
class NotesApp:
    url: str
    notes: set[str] = field(default_factory=set)
    answers: list[tuple[str, int]] = field(default_factory=list)  # (path, status) of each note GET


@contextmanager
def notes_server():
    """The small notes app on a loopback port (a thread), empty; yields its NotesApp."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NotesHandler)
    httpd.app = NotesApp(f"http://127.0.0.1:{httpd.server_address[1]}")
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield httpd.app
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
