"""Fixtures for the Gym API tests: the sandbox, TiddlyWiki (tests/thirdparty/apps.py, once
per run), and a tiny app of our own whose environment file has no tasks.

Every GuiEnv launches (and closes) its own Chromium; module scope at most, never
session: a sync Playwright left running would stop a later test of the worker.
"""

from __future__ import annotations

import http.server
import threading
from pathlib import Path

import pytest

from sandbox.server import SandboxServer
from tests.envs.serving import tiny_env_file
from tests.thirdparty.apps import ENVIRONMENTS

TINY_PAGE = b"""<!doctype html><html><head><title>Tiny</title></head><body>
<h1 data-task="Press Add once">Tiny counter</h1>
<p id="count">0</p>
<button onclick="document.body.dataset.n = (+(document.body.dataset.n||0)) + 1;
  document.getElementById('count').textContent = document.body.dataset.n">Add</button>
<button style="margin-left: 200px" onclick="document.body.dataset.paid = '1'">Pay now</button>
</body></html>"""


class _TinyHandler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        self.wfile.write(TINY_PAGE)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def sandbox():
    with SandboxServer() as server:
        yield server


@pytest.fixture(scope="module")
def tiny_url():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _TinyHandler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture()
def tiny_file(tiny_url, tmp_path) -> Path:
    """An environment file without tasks: the app states the instruction (instruction_js),
    the file's explore verifier gives the verdict."""
    return tiny_env_file(tmp_path, tiny_url, max_steps=4)


@pytest.fixture()
def tiddlywiki_file(tiddlywiki_url, monkeypatch) -> Path:
    """examples/environments/tiddlywiki.yaml, pointed at this run's TiddlyWiki."""
    monkeypatch.setenv("TIDDLYWIKI_URL", tiddlywiki_url)
    return ENVIRONMENTS / "tiddlywiki.yaml"


@pytest.fixture()
def datasette_file(datasette_url, monkeypatch) -> Path:
    """examples/environments/datasette.yaml, pointed at this run's Datasette."""
    monkeypatch.setenv("DATASETTE_URL", datasette_url)
    return ENVIRONMENTS / "datasette.yaml"
