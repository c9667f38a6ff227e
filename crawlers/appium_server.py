"""A local Appium server as a managed child process.

`AppiumServer` runs the Appium 3 that `make setup` installs under
node_modules/ (with appium-chromium-driver, found through APPIUM_HOME = the
repository root). It listens on 127.0.0.1 only, logs to a file, and is ready
once GET /status says so. `stop()` ends its whole process group and anything
below it (the chromedrivers and Chromiums its sessions spawned), so nothing
outlives it.

To use an external server or a device farm instead, set
TRAJFORGE_APPIUM_URL=http://host:4723 (see `external_appium_url`); nothing is
started then. docs/device_farm.md has the details.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from .browser import descendant_pids, process_running

__all__ = [
    "AppiumServer",
    "AppiumStartError",
    "APPIUM_URL_ENV",
    "external_appium_url",
    "free_port",
    "server_status",
]

REPO_ROOT = Path(__file__).resolve().parents[1]
APPIUM_URL_ENV = "TRAJFORGE_APPIUM_URL"
_LOG_TAIL_CHARS = 3000


class AppiumStartError(RuntimeError):
    """The Appium server did not come up; the message carries its log tail."""


def external_appium_url() -> str | None:
    """The external Appium server or farm named by TRAJFORGE_APPIUM_URL, if set."""
    url = os.environ.get(APPIUM_URL_ENV, "").strip()
    return url.rstrip("/") or None


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free now (the OS picks it; 5 digits on Linux)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def server_status(url: str, timeout_s: float = 2.0) -> dict | None:
    """The `value` of GET <url>/status when the server answers and is ready, else None."""
    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/status", timeout=timeout_s) as r:
            value = json.load(r).get("value") or {}
    except (urllib.error.URLError, OSError, ValueError):
        return None
    return value if value.get("ready") else None


class AppiumServer:
    """`node_modules/.bin/appium --address 127.0.0.1 --port P` in its own process group."""

    def __init__(
        self,
        port: int = 0,
        log_path: str | os.PathLike | None = None,
        *,
        host: str = "127.0.0.1",
        startup_timeout_s: float = 60.0,
        extra_args: tuple[str, ...] = (),
        repo_root: str | os.PathLike = REPO_ROOT,
    ):
        self.repo_root = Path(repo_root)
        self.appium_bin = self.repo_root / "node_modules" / ".bin" / "appium"
        self.host = host
        self._requested_port = port
        self.port = port
        self.startup_timeout_s = startup_timeout_s
        self.extra_args = tuple(extra_args)
        self._own_log = log_path is None
        self.log_path = Path(log_path) if log_path is not None else None
        self._proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        if not self.port:
            raise RuntimeError("the Appium server has no port yet: call start() first")
        return f"http://{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    # ------------------------------------------------------------------ life cycle
    def start(self) -> AppiumServer:
        if self._proc is not None and self._proc.poll() is None:
            return self
        if not os.access(self.appium_bin, os.X_OK):
            raise FileNotFoundError(
                f"{self.appium_bin} not found: run `make setup` (it installs Appium and the "
                f"Chromium driver from package.json), or set {APPIUM_URL_ENV} to use an "
                f"external Appium server"
            )
        if not self.port:
            self.port = free_port(self.host)
        elif not _port_free(self.host, self.port):
            # Checked first: the server already there would answer our /status poll.
            raise AppiumStartError(f"port {self.port} on {self.host} is already in use")
        if self.log_path is None:
            fd, name = tempfile.mkstemp(prefix=f"appium-{self.port}-", suffix=".log")
            os.close(fd)
            self.log_path = Path(name)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        cmd = [
            str(self.appium_bin),
            "--address",
            self.host,
            "--port",
            str(self.port),
            "--log-no-colors",
            "--log-timestamp",
            *self.extra_args,
        ]
        # APPIUM_HOME: the drivers installed next to Appium in node_modules, whatever the cwd.
        env = {**os.environ, "APPIUM_HOME": str(self.repo_root)}
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(
                cmd,
                cwd=self.repo_root,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        try:
            self._wait_ready()
        except BaseException:
            self._kill_tree()
            raise
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        while True:
            if self._proc.poll() is not None:
                raise AppiumStartError(
                    f"Appium exited with code {self._proc.returncode} before it was ready "
                    f"(port {self.port}); log {self.log_path}:\n{self.log_tail()}"
                )
            if server_status(self.url, timeout_s=1.0) is not None:
                return
            if time.monotonic() > deadline:
                raise AppiumStartError(
                    f"Appium on port {self.port} was not ready within {self.startup_timeout_s}s; "
                    f"log {self.log_path}:\n{self.log_tail()}"
                )
            time.sleep(0.1)

    def is_healthy(self, timeout_s: float = 2.0) -> bool:
        """Running and answering GET /status with ready=true."""
        if self._proc is None or self._proc.poll() is not None:
            return False
        return server_status(self.url, timeout_s) is not None

    def stop(self, timeout_s: float = 10.0) -> None:
        """End the server, its sessions' chromedrivers and browsers. Idempotent."""
        if self._proc is None:
            return
        self._kill_tree(timeout_s)

    def restart(self) -> AppiumServer:
        """Stop and start again on the same port, so URLs handed out stay valid."""
        self.stop()
        return self.start()

    def _kill_tree(self, timeout_s: float = 10.0) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        # Children that left the group (a browser that called setsid) are found
        # through /proc before the parent goes and they are re-parented.
        below = descendant_pids(proc.pid)
        if proc.poll() is None:
            # SIGTERM first: Appium deletes its sessions, which stops the chromedrivers.
            _signal_group(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                pass
        _signal_group(proc.pid, signal.SIGKILL)
        proc.wait()
        for pid in below:
            if process_running(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass  # gone meanwhile

    def log_tail(self, chars: int = _LOG_TAIL_CHARS) -> str:
        if self.log_path is None or not self.log_path.exists():
            return "(no log)"
        data = self.log_path.read_bytes()[-chars:]
        return data.decode("utf-8", "replace")

    def __enter__(self) -> AppiumServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self._proc is not None and self._proc.poll() is None else "stopped"
        return f"AppiumServer(port={self.port}, {state}, log={self.log_path})"


def _port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT is no obstacle
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass  # the whole group is gone
