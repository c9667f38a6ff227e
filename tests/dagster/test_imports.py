"""The import inbox in real Dagster runs: the sensor asks for a run when files land,
imported_trajectories imports them once, and curation + export ship what they hold."""

from __future__ import annotations

import shutil
from pathlib import Path

import dagster as dg
import pyarrow.parquet as pq

from dagster_project.assets.curate import curated_steps
from dagster_project.assets.export import web_shards
from dagster_project.assets.imports import imported_trajectories
from dagster_project.assets.raw import raw_steps
from dagster_project.checks_curate import CURATE_CHECKS
from dagster_project.resources import StorageResource, VLMResource
from dagster_project.sensors import import_inbox_sensor
from trajforge.read.stats import shard_stats

SAMPLES = Path(__file__).resolve().parents[1] / "importers" / "samples"
ASSETS = [imported_trajectories, raw_steps, curated_steps, web_shards, *CURATE_CHECKS]


def _sensor(instance, cursor=None):
    ctx = dg.build_sensor_context(instance=instance, cursor=cursor)
    return import_inbox_sensor(ctx), ctx.cursor


def test_inbox_sensor_import_curate_and_export(tmp_path, monkeypatch):
    data = tmp_path / "data"
    monkeypatch.setenv("TRAJFORGE_DATA", str(data))
    instance = dg.DagsterInstance.ephemeral()
    skip, cursor = _sensor(instance)
    assert isinstance(skip, dg.SkipReason)  # empty inbox

    shutil.copytree(SAMPLES / "aitz", data / "inbox" / "aitz" / "aitz")
    shutil.copytree(SAMPLES / "android_world", data / "inbox" / "android_world" / "android_world")
    req, cursor = _sensor(instance)
    assert isinstance(req, dg.RunRequest) and req.run_key.startswith("inbox-")
    again, _ = _sensor(instance, cursor)
    assert isinstance(again, dg.SkipReason)  # nothing new since

    resources = {"storage": StorageResource(root=str(data)), "vlm": VLMResource(kind="none")}
    run = dg.materialize(ASSETS, selection=["imported_trajectories"], resources=resources, instance=instance)
    meta = run.asset_materializations_for_node("imported_trajectories")[0].metadata
    assert meta["files_imported"].value == 2 and meta["trajectories"].value == 1
    assert meta["steps"].value == 4 and meta["task_rows"].value == 3
    rerun = dg.materialize(
        ASSETS, selection=["imported_trajectories"], resources=resources, instance=instance
    )
    meta2 = rerun.asset_materializations_for_node("imported_trajectories")[0].metadata
    assert meta2["files_imported"].value == 0 and meta2["files_unchanged"].value == 2

    # AitZ ships the image of step 1 only: curation keeps that step and counts the others.
    ship = dg.materialize(
        ASSETS,
        selection=["raw_steps", "curated_steps", "web_shards"],
        resources=resources,
        instance=instance,
        run_config={"ops": {"curated_steps": {"config": {"min_steps": 1}}}},
    )
    assert ship.success
    assert all(e.passed for e in ship.get_asset_check_evaluations())
    cur = ship.asset_materializations_for_node("curated_steps")[0].metadata
    assert cur["steps_in"].value == 4 and cur["dropped_per_reason"].value["missing_screenshot"] == 3
    stats = shard_stats(data / "shards" / "sandbox")
    assert stats["trajectories"] == 1 and stats["steps"] == 1
    steps = pq.read_table(data / "curated" / "steps.parquet").to_pylist()
    assert [r["index"] for r in steps if r["keep"]] == [1]


def test_curated_steps_runs_the_judge_on_a_local_model(tmp_path, monkeypatch):
    """VLMResource -> TransformersBackend (the tiny offline model, random weights): every
    trajectory gets a verdict row with the model's id; unparseable answers are counted,
    never guessed."""
    from tests.vlm.helpers import tiny_model_path

    data = tmp_path / "data"
    monkeypatch.setenv("TRAJFORGE_DATA", str(data))
    shutil.copytree(SAMPLES / "aitz", data / "inbox" / "aitz" / "aitz")
    vlm = VLMResource(kind="transformers", path=str(tiny_model_path()), batch_size=2)
    resources = {"storage": StorageResource(root=str(data)), "vlm": vlm}
    run = dg.materialize(
        ASSETS,
        selection=["imported_trajectories", "raw_steps", "curated_steps"],
        resources=resources,
        instance=dg.DagsterInstance.ephemeral(),
    )
    assert run.success
    judge = run.asset_materializations_for_node("curated_steps")[0].metadata["judge"].value
    model_id = vlm.backend().model_id
    assert judge["judged"] == 1 and judge["models"] == [model_id]
    rows = pq.read_table(data / "curated" / "trajectories.parquet").to_pylist()
    assert [r["judge_model"] for r in rows] == [model_id]
    assert rows[0]["judge_parsed"] is (rows[0]["judge_success"] is not None)
