"""Dagster resources: where data lives, the sandbox server, the browser."""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg
from pydantic import Field, PrivateAttr

from trajforge.store.object_store import open_raw_store
from trajforge.store.raw import RawStore


class StorageResource(dg.ConfigurableResource):
    """The data root ($TRAJFORGE_DATA, default ./data) and the paths under it.

    `object_root` ($TRAJFORGE_OBJECT_ROOT), an fsspec URL such as s3://bucket/prefix:
    the curated data is published to <object_root>/curated (trajforge/store/curated_object.py)
    and every shard set to <object_root>/shards/<dataset> (trajforge/publish/remote.py),
    each written through its local folder under the data root first. `raw_url`
    ($TRAJFORGE_RAW_URL) puts the raw store itself on object storage. Unset: local
    folders only, as before.
    """

    root: str = ""
    object_root: str = ""
    raw_url: str = ""

    @property
    def path(self) -> Path:
        return Path(self.root or os.environ.get("TRAJFORGE_DATA", "data")).resolve()

    @property
    def object_url(self) -> str:
        """The object-storage root, checked (protocol known, its package installed); "" if unset."""
        url = self.object_root or os.environ.get("TRAJFORGE_OBJECT_ROOT", "")
        if not url:
            return ""
        from dagster_project.production import check_storage_root

        parsed = check_storage_root(url)
        return "" if parsed.is_local else parsed.url

    @property
    def raw(self) -> RawStore:
        url = self.raw_url or os.environ.get("TRAJFORGE_RAW_URL", "")
        return open_raw_store(url) if url else RawStore(self.path / "raw")

    @property
    def catalog_path(self) -> Path:
        return self.path / "catalog" / "tasks.parquet"

    @property
    def raw_steps_dir(self) -> Path:
        return self.path / "raw_steps"

    def shards_dir(self, dataset: str) -> Path:
        """A set's local folder (with an object root: its local mirror)."""
        return self.path / "shards" / dataset

    def shards_target(self, dataset: str) -> str | Path:
        """Where a set is shipped: <object_root>/shards/<dataset>, else shards_dir."""
        return f"{self.object_url}/shards/{dataset}" if self.object_url else self.shards_dir(dataset)

    def shard_destination(self, dataset: str):
        """`with storage.shard_destination(name) as out:` write the set to `out`; with an
        object root it is published (shards, manifest last) when the block ends."""
        from trajforge.publish.remote import shard_destination

        return shard_destination(self.shards_target(dataset), local=self.shards_dir(dataset))

    @property
    def curated_dir(self) -> Path:
        """curated_steps: the verdict table, its summary and the curated store."""
        return self.path / "curated"

    @property
    def curated_url(self) -> str:
        return f"{self.object_url}/curated" if self.object_url else ""

    def publish_curated(self) -> str | None:
        """Put curated_dir at curated_url as a new generation (None without an object root)."""
        if not self.curated_url:
            return None
        from trajforge.store.curated_object import publish_curated

        return publish_curated(self.curated_dir, self.curated_url)

    @property
    def curated(self) -> RawStore:
        """Kept trajectories with their kept, scrubbed steps: what the export ships.

        With an object root, curated_dir is first brought to the published generation
        (a step on another node, or after another node's curation)."""
        if self.curated_url:
            from trajforge.store.curated_object import current_generation, sync_curated

            if current_generation(self.curated_url) is not None:
                sync_curated(self.curated_url, self.curated_dir)
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
    sessions: int = 2  # concurrent sessions per device profile
    step_timeout_s: float = 15.0
    # Emulated phones: "device" keeps the phone's real pixels (1082x2402 on a
    # Pixel 8), as a real device gives; "css" one pixel per CSS px, ~2.5x faster.
    screenshot_scale: str = "device"
    # A Ray cluster whose phone hosts declare `device:<profile>` (dagster_project.ray_resource):
    # each session an actor there; `external_url` is then the Appium server as those hosts
    # reach it. "" (and no $TRAJFORGE_APPIUM_RAY_ADDRESS): a local DevicePool.
    ray_address: str = ""
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

    kind: str = ""  # none | transformers | openai
    path: str = ""  # transformers: a local model directory
    base_url: str = ""  # openai: e.g. http://vllm:8000/v1
    model: str = ""  # openai: the served model name
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
        from trajforge.vlm.backend_config import backend_from_config

        kind = self._get("kind")
        if kind == "transformers":
            return backend_from_config(
                {
                    "kind": kind,
                    "path": self._get("path"),
                    "batch_size": self.batch_size,
                    "device": self.device,
                }
            )
        return backend_from_config(
            {
                "kind": kind,
                "base_url": self._get("base_url"),
                "model": self._get("model"),
                "api_key_env": self.api_key_env,
            }
        )
