"""An export into s3:// killed (SIGKILL) while it writes its shards, and again while it
publishes them, then resumed: the published set is the uninterrupted one, byte for
byte; no duplicate, half or stale shard is ever listed, and while the set is being
replaced no manifest is visible."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.export.shard_fixtures import build_store
from trajforge.publish.export import export_shards
from trajforge.publish.remote import publish_set, shard_destination, spool_dir
from trajforge.publish.resume import STAGING_PREFIX
from trajforge.publish.shards import MANIFEST
from trajforge.publish.writer import JOURNAL
from trajforge.store.object_folder import ObjectFolder

ROOT = Path(__file__).resolve().parents[2]
OPTIONS = dict(dataset="demo", splits=(("train", 0.6), ("val", 0.2), ("test", 0.2)), max_samples_per_shard=2)

# mode "export": SIGKILL itself after trajectory n of the export;
# mode "publish": SIGKILL itself when shard put n starts (the first n-1 landed).
CHILD = """
import os, signal, sys
from pathlib import Path
from trajforge.publish.export import export_shards
from trajforge.store.object_folder import ObjectFolder
from trajforge.publish.remote import shard_destination
from trajforge.store.raw import RawStore
root, url, mode, n, options = sys.argv[1:6]
n, count = int(n), [0]
def tick(*_):
    count[0] += 1
    if count[0] == n:
        os.kill(os.getpid(), signal.SIGKILL)
if mode == "publish":
    real = ObjectFolder.put_file
    def put_file(self, name, local, what="object"):
        tick()
        return real(self, name, local, what)
    ObjectFolder.put_file = put_file
with shard_destination(url) as out:
    export_shards(RawStore(Path(root)), out, progress=tick if mode == "export" else None,
                  **eval(options))
"""


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return build_store(tmp_path_factory.mktemp("raw"))


def _killed(store, url, mode, n, env):
    child = subprocess.run(
        [sys.executable, "-c", CHILD, str(store.root), url, mode, str(n), repr(OPTIONS)],
        cwd=ROOT,
        env=env,
        timeout=120,
    )
    assert child.returncode == -signal.SIGKILL


def test_killed_twice_then_resumed_publishes_the_uninterrupted_set(store, s3_server, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT), TRAJFORGE_SPOOL_DIR=str(tmp_path / "spool"), **s3_server.env)
    url = s3_server.url("killed")
    folder = ObjectFolder(url, s3_server.storage_options)
    reference = tmp_path / "reference"
    ref = export_shards(store.store, reference, **OPTIONS)
    # An older, differently cut set is already published there.
    older = tmp_path / "older"
    export_shards(store.store, older, **{**OPTIONS, "max_samples_per_shard": 50})
    publish_set(older, url, s3_server.storage_options)
    old_manifest = folder.get_bytes(MANIFEST)

    _killed(store, url, "export", 5, env)  # mid-export: the old set stays whole
    assert folder.get_bytes(MANIFEST) == old_manifest
    mirror = Path(env["TRAJFORGE_SPOOL_DIR"]) / "shards" / url.replace("://", "/", 1)
    journals = list(mirror.glob(f"{STAGING_PREFIX}*/{JOURNAL}"))
    assert journals and journals[0].read_text().strip()  # what the next run resumes from
    _killed(store, url, "publish", 4, env)  # mid-publish: no manifest at all
    remote = folder.sizes()
    assert MANIFEST not in remote
    assert 3 <= sum(n.endswith(".tar") for n in remote)

    os.environ["TRAJFORGE_SPOOL_DIR"] = env["TRAJFORGE_SPOOL_DIR"]
    try:
        with shard_destination(url, storage_options=s3_server.storage_options) as out:
            assert out == spool_dir(url)
            resumed = export_shards(store.store, out, **OPTIONS)
    finally:
        del os.environ["TRAJFORGE_SPOOL_DIR"]
    manifest = json.loads(folder.get_bytes(MANIFEST))
    assert manifest == ref.manifest and resumed.samples == ref.samples == 42
    remote = folder.sizes()
    assert {n for n in remote if n.endswith(".tar")} == {s["name"] for s in manifest["shards"]}
    for s in manifest["shards"]:  # every listed shard is the reference's, byte for byte
        assert folder.get_bytes(s["name"]) == (reference / s["name"]).read_bytes()
