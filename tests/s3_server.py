"""An S3-compatible server for the tests: moto's server mode on loopback.

A pytest plugin (tests/conftest.py registers it), so every test folder can ask
for the session-scoped `s3_server` fixture: one `moto_server` subprocess per
pytest process, on a free port, stopped by its PID at the end of the session.

Pointing a store at it:

    open_raw_store(s3_server.url("my-test"), storage_options=s3_server.storage_options)

or, in a subprocess or a Ray worker, the environment `s3_server.env`
(AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_DEFAULT_REGION):
botocore, hence s3fs, reads them, and a plain `open_raw_store("s3://...")` then
talks to this server. `url(name)` gives a fresh prefix each call, so tests
sharing the server never see each other's objects.

Its state lives in memory: `pause()` / `resume()` (SIGSTOP / SIGCONT) make an
outage that keeps it; a kill would lose every object.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest

BUCKET = "trajforge-test"
KEY = SECRET = "testing"  # moto accepts any credentials
REGION = "us-east-1"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class S3Server:
    endpoint_url: str
    bucket: str
    pid: int
    proc: subprocess.Popen = field(repr=False)

    @property
    def storage_options(self) -> dict:
        """fsspec/s3fs options for this server (short timeouts: a test waits seconds, not minutes)."""
        return {
            "key": KEY,
            "secret": SECRET,
            "client_kwargs": {"endpoint_url": self.endpoint_url, "region_name": REGION},
            "config_kwargs": {"connect_timeout": 2, "read_timeout": 3, "retries": {"max_attempts": 1}},
        }

    @property
    def env(self) -> dict[str, str]:
        return {
            "AWS_ENDPOINT_URL": self.endpoint_url,
            "AWS_ACCESS_KEY_ID": KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET,
            "AWS_DEFAULT_REGION": REGION,
        }

    def url(self, name: str = "t") -> str:
        return f"s3://{self.bucket}/{name}-{uuid.uuid4().hex[:8]}"

    def pause(self) -> None:
        os.kill(self.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.pid, signal.SIGCONT)


def _wait_ready(url: str, proc: subprocess.Popen, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"moto_server exited with {proc.returncode}")
        try:
            urllib.request.urlopen(f"{url}/moto-api/", timeout=1).read()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"moto_server not answering on {url} after {timeout:.0f} s")


def start_server(bucket: str = BUCKET) -> S3Server:
    port = _free_port()
    exe = Path(sys.executable).with_name("moto_server")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "moto.server"]
    proc = subprocess.Popen(
        cmd + ["-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(url, proc)
        req = urllib.request.Request(f"{url}/{bucket}", method="PUT")  # create the bucket
        urllib.request.urlopen(req, timeout=5).read()
    except BaseException:
        stop_server(proc)
        raise
    return S3Server(url, bucket, proc.pid, proc)


def stop_server(proc: subprocess.Popen) -> None:
    try:
        os.kill(proc.pid, signal.SIGCONT)  # a paused server cannot act on SIGTERM
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
    except ProcessLookupError:
        pass
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()


@pytest.fixture(scope="session")
def s3_server():
    """A moto S3 server on loopback for this pytest process, with an empty bucket."""
    pytest.importorskip("moto", reason="moto[server] is in the dev extra")
    pytest.importorskip("s3fs", reason="s3fs is in the storage extra")
    server = start_server()
    try:
        yield server
    finally:
        stop_server(server.proc)
