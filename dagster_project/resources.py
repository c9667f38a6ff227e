"""Dagster resources: where data lives, the sandbox server, the browser."""
from __future__ import annotations

import os
from pathlib import Path

import dagster as dg
from pydantic import Field, PrivateAttr

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

    @property
    def curated_dir(self) -> Path:
        """curated_steps: the verdict table, its summary and the curated store."""
        return self.path / "curated"

    @property
    def curated(self) -> RawStore:
        """Kept trajectories with their kept, scrubbed steps: what the export ships."""
        return RawStore(self.curated_dir / "store")

    @property
    def synthesis_dir(self) -> Path:
        """cot_steps and task_difficulty: the CoT table, the difficulty table."""
        return self.path / "synthesis"

    @property
    def inbox_dir(self) -> Path:
        """Files dropped in inbox/<format>/ are imported by imported_trajectories."""
        return self.path / "inbox"


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
    """How to launch Chromium for Playwright (Debian's build by default).

    `browsers`: how many Chromiums the web crawl runs at once (one per worker
    thread); 2 gave 1.4-1.65x the steps/s of 1 on 2 cores. The trajectories
    are the same whatever the number.
    """

    executable_path: str = "/usr/bin/chromium"
    headless: bool = True
    image_format: str = "png"
    step_timeout_s: float = 10.0
    browsers: int = Field(default=2, ge=1)
    # Ray: a cluster address ("auto", "ray://head:10001"; else $TRAJFORGE_RAY_ADDRESS) makes
    # the web crawl play on `ray_actors` browser actors (dagster_project/ray_resource.py).
    ray_address: str = ""
    ray_actors: int = Field(default=4, ge=1)


class AppiumResource(dg.ConfigurableResource):
    """The Appium 3 server that mobile crawls drive devices through.

    By default the project's own server (node_modules/.bin/appium, installed by
    `make setup`) is started for the run on a free port, health-checked, and
    stopped afterwards; the device is Debian's Chromium with mobile emulation.
    Set `external_url` (or $TRAJFORGE_APPIUM_URL) to use a server or device farm
    that is already running, and `devices_file` to a capabilities file
    (docs/device_farm.md) to drive real Android / iOS devices instead.
    """

    external_url: str = ""
    devices_file: str = ""
    sessions: int = 2               # concurrent sessions per device profile
    step_timeout_s: float = 15.0
    # Emulated phones: "device" keeps the phone's real pixels (1082x2402 on a
    # Pixel 8), as a real device gives; "css" one pixel per CSS px, ~2.5x faster.
    screenshot_scale: str = "device"
    _server: object = PrivateAttr(default=None)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        if not self.server_url_configured:
            from crawlers.appium_server import AppiumServer
            log_dir = Path(os.environ.get("TRAJFORGE_DATA", "data")).resolve() / "logs"
            log_dir.mkdir(parents=True, exist_ok=True)
            self._server = AppiumServer(log_path=log_dir / "appium.log").start()

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        if self._server is not None:
            self._server.stop()

    @property
    def server_url_configured(self) -> str:
        return self.external_url or os.environ.get("TRAJFORGE_APPIUM_URL", "")

    @property
    def server(self):
        """The AppiumServer this resource owns (None for an external one)."""
        return self._server

    @property
    def url(self) -> str:
        return self.server_url_configured or self._server.url

    def devices_for(self, profile: str) -> list:
        """Device specs for one device profile: a capabilities file's devices of
        that profile, or the local Chromium phone emulating it."""
        from crawlers.capabilities import chromium_device, load_devices
        if self.devices_file:
            devices = [d for d in load_devices(self.devices_file) if d.profile.name == profile]
            if not devices:
                raise ValueError(f"{self.devices_file}: no device with profile {profile!r}")
            return devices
        return [chromium_device(profile)]


class VLMResource(dg.ConfigurableResource):
    """The VLM the judge (and later CoT) calls: none, a local model path, or an endpoint.

    Empty fields fall back to $TRAJFORGE_VLM_KIND / _PATH / _BASE_URL / _MODEL, so a
    deployment points the pipeline at a vLLM server without editing code. The API key
    is only ever read from the environment variable named by `api_key_env`.
    """

    kind: str = ""          # none | transformers | openai
    path: str = ""          # transformers: a local model directory
    base_url: str = ""      # openai: e.g. http://vllm:8000/v1
    model: str = ""         # openai: the served model name
    api_key_env: str = "OPENAI_API_KEY"
    batch_size: int = 8
    device: str = "auto"

    def _get(self, name: str) -> str:
        return getattr(self, name) or os.environ.get(f"TRAJFORGE_VLM_{name.upper()}", "")

    @property
    def configured(self) -> bool:
        return self._get("kind") not in ("", "none")

    def backend(self):
        """A trajforge.vlm backend, or None when no model is configured."""
        if not self.configured:
            return None
        from trajforge.vlm.backends import backend_from_config
        kind = self._get("kind")
        if kind == "transformers":
            return backend_from_config({"kind": kind, "path": self._get("path"),
                                        "batch_size": self.batch_size, "device": self.device})
        return backend_from_config({"kind": kind, "base_url": self._get("base_url"),
                                    "model": self._get("model"), "api_key_env": self.api_key_env})
