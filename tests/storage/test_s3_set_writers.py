"""The synthesis set writers (reasoning, grounding) into s3:// through shard_destination:
what a plain webdataset pipeline streams from the server is the local run's set, member
for member, and a second publish of the same set puts nothing."""

from __future__ import annotations

import hashlib

import webdataset as wds

from synthesis.cot import generate_cot
from synthesis.grounding_writer import write_grounding_set
from synthesis.set_options import ReasoningSetOptions, SetOptions
from synthesis.set_writer import write_reasoning_set
from tests.export.shard_fixtures import build_store
from tests.synthesis.grounding_fixtures import build_grounding_store
from trajforge.publish.remote import publish_set, shard_destination
from trajforge.publish.shards import read_manifest
from trajforge.read.webdataset_urls import register_fsspec, set_urls

SPLITS = (("train", 0.6), ("val", 0.2), ("test", 0.2))


def _members(urls) -> list[tuple[str, tuple]]:
    ds = wds.WebDataset(urls, shardshuffle=False, empty_check=False)
    return [
        (
            s["__key__"],
            tuple(sorted((k, hashlib.sha256(v).hexdigest()) for k, v in s.items() if not k.startswith("__"))),
        )
        for s in ds
    ]


def _same_set(local, url):
    local_urls = [str(local / s["name"]) for s in read_manifest(local)["shards"]]
    want = _members(local_urls)
    assert want and _members(set_urls(url)) == want


def test_reasoning_and_grounding_sets_stream_from_s3_as_from_the_folder(s3_server, tmp_path, monkeypatch):
    for k, v in s3_server.env.items():
        monkeypatch.setenv(k, v)
    register_fsspec()
    built = build_store(tmp_path / "curated")
    rows = [
        c.to_row()
        for c in generate_cot([(built.trajectories[t], built.steps[t]) for t in sorted(built.trajectories)])
    ]
    reasoning_url = s3_server.url("reasoning")
    options = ReasoningSetOptions(splits=SPLITS, max_samples_per_shard=10)
    write_reasoning_set(built.store, rows, tmp_path / "reasoning-local", dataset="reasoning", options=options)
    with shard_destination(reasoning_url, local=tmp_path / "reasoning-mirror") as out:
        write_reasoning_set(built.store, rows, out, dataset="reasoning", options=options)
    _same_set(tmp_path / "reasoning-local", reasoning_url)
    again = publish_set(tmp_path / "reasoning-mirror", reasoning_url)
    assert again.unchanged and again.shards == 0

    g = build_grounding_store(tmp_path / "grounding-curated")
    grounding_url = s3_server.url("grounding")
    grounding_options = SetOptions(splits=(("train", 0.5), ("test", 0.5)))
    write_grounding_set(g.store, tmp_path / "grounding-local", options=grounding_options)
    with shard_destination(grounding_url, local=tmp_path / "grounding-mirror") as out:
        write_grounding_set(g.store, out, options=grounding_options)
    _same_set(tmp_path / "grounding-local", grounding_url)
