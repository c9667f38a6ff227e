"""Curated data and shard sets on the S3 server (moto on loopback), judged from the
consumer's side: what a trainer streams from s3:// is what it streams from the
local folder, byte for byte; a failed publish never leaves a manifest."""

from __future__ import annotations

import hashlib
import json
import threading
import time

import pyarrow.parquet as pq
import pytest
import webdataset as wds
from typer.testing import CliRunner

from schemas.errors import SchemaError
from tests.export.test_export_curated import curated_dir  # noqa: F401 - the shared fixture
from trajforge.cli import app
from trajforge.publish.export import export_shards
from trajforge.publish.remote import fetched_set, publish_set, shard_destination
from trajforge.publish.shards import MANIFEST, ShardError
from trajforge.read.loader import ShardDataset
from trajforge.read.stats import shard_stats
from trajforge.read.validate import validate
from trajforge.read.webdataset_urls import pipe_urls, register_fsspec, set_urls
from trajforge.store.curated_object import (
    CURRENT,
    current_generation,
    open_curated,
    publish_curated,
    sync_curated,
)
from trajforge.store.object_folder import ObjectFolder
from trajforge.store.object_store import ObjectStoreError
from trajforge.store.raw import RawStore

SPLITS = (("train", 0.5), ("val", 0.5))
EXPORT = dict(dataset="curated", splits=SPLITS, allow_index_gaps=True, max_samples_per_shard=3)


@pytest.fixture
def aws_env(s3_server, monkeypatch):
    """The server through the environment, as a trainer's process would get it."""
    for k, v in s3_server.env.items():
        monkeypatch.setenv(k, v)


def _samples(ds) -> list[tuple[str, str, str]]:
    """(split-independent key, sha256 of the image, sha256 of the JSON fields) in order."""
    out = []
    for s in ds:
        fields = {k: v for k, v in s.items() if k not in ("image", "shard")}
        out.append(
            (
                s["key"],
                hashlib.sha256(s["image"]).hexdigest(),
                hashlib.sha256(json.dumps(fields, sort_keys=True, default=str).encode()).hexdigest(),
            )
        )
    return out


def _wds_samples(urls) -> list[tuple[str, str]]:
    ds = wds.WebDataset(urls, shardshuffle=False, empty_check=False)
    return [(s["__key__"], hashlib.sha256(s["png"]).hexdigest()) for s in ds]


def test_curate_and_export_into_s3_match_the_local_run(curated_dir, s3_server, aws_env, tmp_path):
    opts = s3_server.storage_options
    curated_url = s3_server.url("curated")
    gen = publish_curated(curated_dir, curated_url, opts)

    # The curated tables read in place are the local ones.
    remote = open_curated(curated_url, opts)
    assert remote.generation == gen == current_generation(curated_url, opts)
    for name in ("steps.parquet", "trajectories.parquet"):
        assert remote.read_table(name).equals(pq.read_table(curated_dir / name))
    assert remote.summary == json.loads((curated_dir / "summary.json").read_text())
    local_store = RawStore(curated_dir / "store")
    local_steps = sorted((s.trajectory_id, s.index, s.screenshot) for s in local_store.iter_steps())
    assert sorted((s.trajectory_id, s.index, s.screenshot) for s in remote.store.iter_steps()) == local_steps
    sha = local_steps[0][2]
    assert remote.store.blobs.get(sha) == local_store.blobs.get(sha)

    # Another node: sync the published generation, export straight into s3://.
    synced = tmp_path / "node2" / "curated"
    assert sync_curated(curated_url, synced, opts) == gen
    local_res = export_shards(local_store, tmp_path / "local-shards", **EXPORT)
    shards_url = s3_server.url("shards")
    with shard_destination(shards_url, local=tmp_path / "mirror", storage_options=opts) as out:
        s3_res = export_shards(RawStore(synced / "store"), out, **EXPORT)
    assert local_res.shards >= 3 and [s["sha256"] for s in s3_res.manifest["shards"]] == [
        s["sha256"] for s in local_res.manifest["shards"]
    ]

    # The consumer's side: the project's loader, plain webdataset (fsspec and pipe:).
    for split in sorted({s["split"] for s in local_res.manifest["shards"]}):
        local = _samples(ShardDataset(tmp_path / "local-shards", split, shuffle=0, image="bytes"))
        assert (
            local
            and _samples(ShardDataset(shards_url, split, shuffle=0, image="bytes", storage_options=opts))
            == local
        )
    want = _wds_samples([str(p) for p in sorted((tmp_path / "local-shards").glob("*.tar"))])
    register_fsspec()
    assert _wds_samples(set_urls(shards_url)) == want
    assert _wds_samples(pipe_urls(shards_url)) == want

    # stats and validate of the set at its URL, in Python and from the command line.
    with fetched_set(shards_url, opts) as folder:
        assert validate(folder).ok
        assert shard_stats(folder)["steps"] == local_res.samples
    cli = CliRunner()
    out = cli.invoke(app, ["stats", "--json", shards_url])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["steps"] == local_res.samples
    ok = cli.invoke(app, ["validate", shards_url])
    assert ok.exit_code == 0 and shards_url in ok.stdout, ok.output
    missing = cli.invoke(app, ["validate", s3_server.url("nothing-here")])
    assert missing.exit_code != 0 and "manifest.json" in missing.output


def test_a_rerun_replaces_curated_data_by_one_pointer_put(curated_dir, s3_server):
    opts = s3_server.storage_options
    url = s3_server.url("curated-rerun")
    work = curated_dir.parent / f"{curated_dir.name}-copy"
    import shutil

    shutil.copytree(curated_dir, work, dirs_exist_ok=True)
    gens = [publish_curated(work, url, opts) for _ in range(3)]
    assert len(set(gens)) == 3 and current_generation(url, opts) == gens[-1]
    kept = {n.split("/", 1)[0] for n in ObjectFolder(url, opts).sizes() if n.startswith("gen-")}
    assert kept == set(gens[1:])  # the previous one stays for a reader caught mid-switch
    assert CURRENT in ObjectFolder(url, opts).sizes()


def _mirror_with_set(curated_dir, path):
    export_shards(RawStore(curated_dir / "store"), path, **EXPORT)
    return path


def test_a_failed_shard_put_names_the_object_and_puts_no_manifest(curated_dir, s3_server, tmp_path):
    url = s3_server.url("outage-shards")
    mirror = _mirror_with_set(curated_dir, tmp_path / "mirror")
    publish_set(mirror, url, s3_server.storage_options)  # a previous set is there
    folder = ObjectFolder(url, s3_server.storage_options)
    assert MANIFEST in folder.sizes()
    # A different set now (another shard size), published while the server is stopped.
    (mirror / MANIFEST).unlink()
    export_shards(RawStore(curated_dir / "store"), mirror, **{**EXPORT, "max_samples_per_shard": 2})
    impatient = dict(
        s3_server.storage_options,
        config_kwargs={"connect_timeout": 1, "read_timeout": 1, "retries": {"max_attempts": 1}},
    )
    started = threading.Event()

    def stop_after_first_request():
        started.wait(10)
        s3_server.pause()

    outage = threading.Thread(target=stop_after_first_request, daemon=True)
    outage.start()
    real_put = ObjectFolder.put_file

    def put_file(self, name, local, what="object"):
        started.set()
        time.sleep(0.3)  # let the outage start before this request
        return real_put(self, name, local, what)

    ObjectFolder.put_file = put_file
    try:
        with pytest.raises(ObjectStoreError, match=r"shard s3://\S+/(train|val)-\d{6}\.tar"):
            publish_set(mirror, url, impatient, attempts=2, timeout=2)
    finally:
        ObjectFolder.put_file = real_put
        s3_server.resume()
        outage.join()
    # The old manifest was withdrawn before any shard was replaced; none was put after.
    assert MANIFEST not in folder.sizes()
    with pytest.raises(ShardError, match="no manifest.json"):
        ShardDataset(url, "train", storage_options=s3_server.storage_options)
    # Run again once the server is back: the whole new set, nothing stale listed.
    publish_set(mirror, url, s3_server.storage_options)
    manifest = json.loads(folder.get_bytes(MANIFEST))
    remote = folder.sizes()
    assert all(remote[s["name"]] == s["bytes"] for s in manifest["shards"])
    assert {n for n in remote if n.endswith(".tar")} == {s["name"] for s in manifest["shards"]}


def test_an_unfinished_set_is_not_published(curated_dir, s3_server, tmp_path):
    url = s3_server.url("unfinished")
    mirror = _mirror_with_set(curated_dir, tmp_path / "mirror")
    manifest = json.loads((mirror / MANIFEST).read_text())
    victim = mirror / manifest["shards"][1]["name"]
    victim.write_bytes(victim.read_bytes()[:-512])  # a cut shard
    with pytest.raises(ShardError, match=rf"{victim.name}.*shards.bytes"):
        publish_set(mirror, url, s3_server.storage_options)
    assert ObjectFolder(url, s3_server.storage_options).sizes() == {}
    (mirror / MANIFEST).unlink()
    with pytest.raises(ShardError, match="no manifest.json"):
        with shard_destination(url, local=mirror, storage_options=s3_server.storage_options):
            pass
    assert ObjectFolder(url, s3_server.storage_options).sizes() == {}


def test_bad_objects_are_named(s3_server, curated_dir):
    opts = s3_server.storage_options
    url = s3_server.url("bad")
    folder = ObjectFolder(url, opts)
    with pytest.raises(FileNotFoundError, match=rf"{url}/CURRENT.json"):
        open_curated(url, opts)
    folder.put_bytes(CURRENT, b"{not json")
    with pytest.raises(SchemaError, match=rf"{url}/CURRENT.json.*'generation'"):
        open_curated(url, opts)
    folder.put_bytes(
        MANIFEST,
        json.dumps(
            {"dataset": "x", "version": "1", "splits": {}, "shards": [{"name": "../evil.tar"}]}
        ).encode(),
    )
    with pytest.raises(ShardError, match=rf"{url}/manifest.json, record 0, field 'shards.split'"):
        ShardDataset(url, "train", storage_options=opts)
    with pytest.raises(FileNotFoundError, match="summary.json"):
        publish_curated(curated_dir / "store", url, opts)  # not a finished curation
