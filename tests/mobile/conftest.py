"""Shared fixtures for the mobile tests: one Appium server, one sandbox, one phone.

- `appium_server`: a local AppiumServer for the whole package (started once).
- `appium_url`: TRAJFORGE_APPIUM_URL when set (an external server), else the local one.
- `sandbox_server`: the sandbox Flask server on a free port.
- `mobile_env`: a MobileEnv on a Chromium-emulated pixel_8, shared by the
  package; reopened if an earlier test lost its session. Each test starts its
  episode with `reset`, so nothing carries over but the session itself.
- `pages_url`: tests/mobile/pages over HTTP on 127.0.0.1.
"""

from __future__ import annotations

import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from crawlers.appium_server import AppiumServer, external_appium_url, free_port
from crawlers.capabilities import chromium_device

PAGES = Path(__file__).parent / "pages"


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="package")
def appium_server():
    with AppiumServer() as server:
        yield server


@pytest.fixture(scope="package")
def appium_url(request):
    external = external_appium_url()
    if external:
        return external
    return request.getfixturevalue("appium_server").url


@pytest.fixture(scope="package")
def sandbox_server():
    from sandbox.server import SandboxServer

    with SandboxServer() as server:
        yield server


@pytest.fixture(scope="package")
def pages_url():
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_QuietHandler, directory=str(PAGES)))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="package")
def _pixel_8_env(appium_url):
    from crawlers.mobile_env import MobileEnv

    env = MobileEnv(appium_url, chromium_device("pixel_8"), chromedriver_port=free_port())
    yield env
    env.close()


@pytest.fixture()
def mobile_env(_pixel_8_env):
    """The shared pixel_8 MobileEnv; a new session if an earlier test lost it."""
    if not _pixel_8_env.is_alive():
        _pixel_8_env.restart()
    return _pixel_8_env
