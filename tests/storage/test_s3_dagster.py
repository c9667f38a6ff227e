"""The Dagster assets with an object root (StorageResource.object_root = s3://... on the
moto server): curated_steps publishes a curated generation, web_shards publishes its set,
and a second node with an empty data root ships the same shards from what was published."""

from __future__ import annotations

import shutil
from pathlib import Path

import dagster as dg

from dagster_project.assets.curate import curated_steps
from dagster_project.assets.export import web_shards
from dagster_project.assets.imports import imported_trajectories
from dagster_project.assets.raw import raw_steps
from dagster_project.resources import StorageResource, VLMResource
from trajforge.publish.remote import read_remote_manifest
from trajforge.read.loader import ShardDataset
from trajforge.store.curated_object import current_generation

SAMPLES = Path(__file__).resolve().parents[1] / "importers" / "samples"
ASSETS = [imported_trajectories, raw_steps, curated_steps, web_shards]
MIN_STEPS = {"ops": {"curated_steps": {"config": {"min_steps": 1}}}}


def _keys(url_or_dir, split):
    return [(s["key"], s["image"]) for s in ShardDataset(url_or_dir, split, shuffle=0, image="bytes")]


def test_assets_ship_to_the_object_root_and_a_second_node_reads_them(s3_server, tmp_path, monkeypatch):
    for k, v in s3_server.env.items():
        monkeypatch.setenv(k, v)
    root = s3_server.url("dagster")
    node1, node2 = tmp_path / "node1", tmp_path / "node2"
    monkeypatch.setenv("TRAJFORGE_DATA", str(node1))
    shutil.copytree(SAMPLES / "aitz", node1 / "inbox" / "aitz" / "aitz")
    storage1 = StorageResource(root=str(node1), object_root=root)
    run = dg.materialize(
        ASSETS,
        resources={"storage": storage1, "vlm": VLMResource(kind="none")},
        run_config=MIN_STEPS,
        instance=dg.DagsterInstance.ephemeral(),
    )
    assert run.success
    meta = run.asset_materializations_for_node("curated_steps")[0].metadata
    assert meta["generation"].value == current_generation(f"{root}/curated")
    shipped = run.asset_materializations_for_node("web_shards")[0].metadata
    assert shipped["path"].value == f"{root}/shards/sandbox"

    manifest = read_remote_manifest(f"{root}/shards/sandbox")
    splits = sorted({s["split"] for s in manifest["shards"]})
    assert manifest["totals"]["samples"] >= 1
    for split in splits:  # the set at its URL is the local mirror, sample for sample
        assert _keys(f"{root}/shards/sandbox", split) == _keys(node1 / "shards" / "sandbox", split)

    # Node 2 has no local data: web_shards syncs the published curated generation first.
    monkeypatch.setenv("TRAJFORGE_DATA", str(node2))
    storage2 = StorageResource(root=str(node2), object_root=root)
    again = dg.materialize(
        ASSETS,
        selection=["web_shards"],
        instance=dg.DagsterInstance.ephemeral(),
        resources={"storage": storage2, "vlm": VLMResource(kind="none")},
        run_config={"ops": {"web_shards": {"config": {"dataset": "node2"}}}},
    )
    assert again.success
    other = read_remote_manifest(f"{root}/shards/node2")
    assert [s["sha256"] for s in other["shards"]] == [s["sha256"] for s in manifest["shards"]]


def test_without_an_object_root_everything_stays_local(tmp_path, monkeypatch):
    monkeypatch.delenv("TRAJFORGE_OBJECT_ROOT", raising=False)
    storage = StorageResource(root=str(tmp_path))
    assert storage.object_url == "" and storage.curated_url == ""
    assert storage.shards_target("sandbox") == tmp_path / "shards" / "sandbox"
    assert storage.publish_curated() is None
    assert StorageResource(root=str(tmp_path), object_root=str(tmp_path / "x")).object_url == ""
