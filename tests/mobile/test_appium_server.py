"""AppiumServer with the real Appium from node_modules: start, health, stop, restart.

The life-cycle test uses its own server (not the package's shared one)
because it stops and restarts it; a MobileEnv on it shows what a server loss
looks like to a crawler and that it recovers.
"""

from __future__ import annotations

import json
import os
import socket
import urllib.request

import pytest

from crawlers.appium_server import (
    APPIUM_URL_ENV,
    AppiumServer,
    AppiumStartError,
    external_appium_url,
    free_port,
    server_status,
)
from crawlers.browser import descendant_pids, process_running
from crawlers.capabilities import chromium_device

pytestmark = pytest.mark.skipif(
    not os.access(AppiumServer().appium_bin, os.X_OK), reason="Appium is not installed (make setup)"
)


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_missing_appium_says_run_make_setup(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"node_modules/\.bin/appium not found: run `make setup`"):
        AppiumServer(repo_root=tmp_path).start()


def test_external_url_from_the_environment(monkeypatch):
    monkeypatch.delenv(APPIUM_URL_ENV, raising=False)
    assert external_appium_url() is None
    monkeypatch.setenv(APPIUM_URL_ENV, "http://farm.lan:4723/")
    assert external_appium_url() == "http://farm.lan:4723"


def test_start_health_stop_restart_and_a_session_across_it(tmp_path):
    with AppiumServer(log_path=tmp_path / "appium.log") as own_server:
        pid = _server_life(own_server)
    # Leaving the with-block stopped it.
    assert not process_running(pid) and not own_server.is_healthy()
    assert "stopped" in repr(own_server)


def _server_life(own_server: AppiumServer) -> int:
    from crawlers.mobile_env import MobileEnv, SessionLost
    from crawlers.web_env import BrowserCrashed

    first_pid = own_server.pid
    own_server.start()  # already running: a no-op
    assert own_server.pid == first_pid
    port = own_server.port
    assert 1024 < port < 65536 and own_server.url == f"http://127.0.0.1:{port}"
    assert own_server.is_healthy()
    with urllib.request.urlopen(own_server.url + "/status", timeout=5) as r:
        status = json.load(r)["value"]
    assert status["ready"] is True and status["build"]["version"].startswith("3.")
    assert server_status(own_server.url)["ready"] is True
    log = own_server.log_path.read_text()
    assert "Appium REST http interface listener started" in log
    assert "chromium" in log  # the Chromium driver was found through APPIUM_HOME

    # A session spawns a chromedriver (and a Chromium) below the server.
    env = MobileEnv(own_server.url, chromium_device("pixel_8"), chromedriver_port=free_port())
    below = descendant_pids(own_server.pid)
    drivers = [
        p for p in below if "chromedriver" in _cmdline(p) and f"--port={env.chromedriver_port}" in _cmdline(p)
    ]
    assert drivers, "no chromedriver found below the Appium server"
    assert env.is_alive()

    # stop(): the server, its chromedriver and its browser are all gone.
    pid = own_server.pid
    own_server.stop()
    assert not own_server.is_healthy()
    assert not process_running(pid) and not _port_open(port)
    assert not [p for p in below if process_running(p)], "processes outlived the server"
    own_server.stop()  # idempotent

    # The crawler sees a lost session (a BrowserCrashed, so the runner retries).
    assert not env.is_alive()
    with pytest.raises(SessionLost) as info:
        env.observe()
    assert isinstance(info.value, BrowserCrashed)
    with pytest.raises(SessionLost, match="no Appium server answers"):
        env.restart()

    # restart(): same port, healthy again, and the env reconnects.
    own_server.restart()
    assert own_server.port == port and own_server.is_healthy()
    env.restart()
    obs = env.reset("data:text/html,<meta name=viewport content='width=device-width'><button>Ok</button>")
    assert obs.last_action_error is None and obs.find("Ok", role="button")
    env.close()
    assert env.session_id is None
    return own_server.pid


def test_a_taken_port_is_refused_before_spawning(appium_server):
    clash = AppiumServer(port=appium_server.port)
    with pytest.raises(AppiumStartError, match=f"port {appium_server.port} on 127.0.0.1 is already in use"):
        clash.start()
    assert clash.pid is None and appium_server.is_healthy()


def test_a_server_that_exits_fails_with_its_log_tail(tmp_path):
    bad = AppiumServer(log_path=tmp_path / "bad.log", extra_args=("--no-such-flag",))
    with pytest.raises(AppiumStartError) as info:
        bad.start()
    msg = str(info.value)
    assert "Appium exited with code" in msg and str(tmp_path / "bad.log") in msg
    assert "no-such-flag" in msg.split("\n", 1)[1], msg  # the log tail names the cause
    assert bad.pid is None and not bad.is_healthy()
