"""Dagster resources: where data lives, the sandbox server, the browser."""
from __future__ import annotations

import os
from pathlib import Path

import dagster as dg
from pydantic import PrivateAttr

from trajforge.store import RawStore


class StorageResource(dg.ConfigurableResource):
    """The data root ($TRAJFORGE_DATA, default ./data) and the paths under it."""

    root: str = ""

    @property
    def path(self) -> Path:
        return Path(self.root or os.environ.get("TRAJFORGE_DATA", "data")).resolve()

    @property
    def raw(self) -> RawStore:
        return RawStore(self.path / "raw")

    @property
    def catalog_path(self) -> Path:
        return self.path / "catalog" / "tasks.parquet"

    @property
    def raw_steps_dir(self) -> Path:
        return self.path / "raw_steps"

    def shards_dir(self, dataset: str) -> Path:
        return self.path / "shards" / dataset


class SandboxResource(dg.ConfigurableResource):
    """The embedded sandbox apps, served on 127.0.0.1 for the run's duration.

    Set `external_url` to crawl a sandbox that is already running elsewhere.
    """

    host: str = "127.0.0.1"
    port: int = 0
    external_url: str = ""
    _server: object = PrivateAttr(default=None)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        if not self.external_url:
            from sandbox.server import SandboxServer
            self._server = SandboxServer(self.host, self.port).start()

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        if self._server is not None:
            self._server.stop()

    @property
    def url(self) -> str:
        return self.external_url or self._server.url


class BrowserResource(dg.ConfigurableResource):
    """How to launch Chromium for Playwright (Debian's build by default)."""

    executable_path: str = "/usr/bin/chromium"
    headless: bool = True
    image_format: str = "png"
    step_timeout_s: float = 10.0
