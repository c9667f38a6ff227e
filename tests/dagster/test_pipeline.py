"""Real Dagster runs of the graph on the real sandbox and Chromium."""

import json
import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pyarrow.parquet as pq
import pytest

from dagster_project.assets.catalog import task_catalog
from dagster_project.assets.crawl import web_trajectories
from dagster_project.assets.curate import curated_steps
from dagster_project.assets.export import web_shards
from dagster_project.assets.raw import raw_steps
from dagster_project.checks import CHECKS
from dagster_project.checks_curate import CURATE_CHECKS
from dagster_project.resources import BrowserResource, SandboxResource, StorageResource, VLMResource
from trajforge.read.stats import shard_stats

ROOT = Path(__file__).resolve().parents[2]
ASSETS = [task_catalog, web_trajectories, raw_steps, curated_steps, web_shards, *CHECKS, *CURATE_CHECKS]


@pytest.mark.slow
def test_graph_materialises_end_to_end_and_reruns_idempotently(tmp_path):
    data = tmp_path / "data"
    resources = {
        "storage": StorageResource(root=str(data)),
        "sandbox": SandboxResource(),
        "browser": BrowserResource(),
        "vlm": VLMResource(kind="none"),
    }
    instance = dg.DagsterInstance.ephemeral()
    cfg = {"ops": {"task_catalog": {"config": {"per_template": 1}}}}
    assert dg.materialize(
        ASSETS, selection=["task_catalog"], resources=resources, instance=instance, run_config=cfg
    ).success

    crawl = dg.materialize(
        ASSETS,
        selection=["web_trajectories"],
        partition_key="settings",
        resources=resources,
        instance=instance,
    )
    assert crawl.success
    meta = crawl.asset_materializations_for_node("web_trajectories")[0].metadata
    n_tasks = pq.read_metadata(data / "catalog" / "tasks.parquet").num_rows
    crawled = meta["trajectories"].value
    assert crawled > 0 and meta["success_rate"].value >= 0.95

    ship = dg.materialize(
        ASSETS,
        selection=dg.AssetSelection.assets("raw_steps", "curated_steps", "web_shards"),
        resources=resources,
        instance=instance,
    )
    assert ship.success
    evals = {e.check_name: e.passed for e in ship.get_asset_check_evaluations()}
    assert evals == {
        "raw_steps_schema_valid": True,
        "raw_steps_screenshots_decode": True,
        "raw_steps_coordinates_in_bounds": True,
        "oracle_success_rate_check": True,
        "curated_steps_reconcile": True,
        "curated_duplicate_rate": True,
        "curated_noop_rate": True,
        "curated_no_planted_pii": True,
    }
    cur = ship.asset_materializations_for_node("curated_steps")[0].metadata
    dropped = cur["dropped_per_reason"].value
    assert cur["steps_in"].value == cur["steps_kept"].value + sum(dropped.values())
    assert "pHash distance" in cur["phash_distance_histogram"].value
    stats = shard_stats(data / "shards" / "sandbox")
    # The shards hold what curation kept: whole failed or too-short runs are gone.
    assert 0 < stats["trajectories"] == cur["trajectories_kept"].value <= crawled
    assert stats["steps"] == cur["steps_kept"].value
    assert set(stats["languages"]) == {"en", "zh"}
    assert stats["verified_success"] == stats["trajectories"]
    # The pages showed the sandbox's planted personal data: synthetic, it ships as it is
    # (listed in curation's audit) and is no leak of real data.
    from filters.audit import curated_leaks, shard_leaks
    from sandbox.planted_pii import planted_for
    from trajforge.store.raw import RawStore

    assert curated_leaks(RawStore(data / "raw"), planted=planted_for)[1]
    checked, shipped = shard_leaks(data / "shards" / "sandbox", planted=planted_for)
    assert checked == stats["steps"] and shipped
    assert shard_leaks(data / "shards" / "sandbox", ["sandbox"], planted=planted_for) == (0, [])
    assert (data / "curated" / "pii_audit.jsonl").stat().st_size > 0

    # A re-run of the same partition finds everything committed: no duplicates.
    again = dg.materialize(
        ASSETS,
        selection=["web_trajectories"],
        partition_key="settings",
        resources=resources,
        instance=instance,
    )
    meta2 = again.asset_materializations_for_node("web_trajectories")[0].metadata
    assert meta2["trajectories"].value == 0 and meta2["skipped"].value == crawled
    assert n_tasks >= crawled


@pytest.mark.slow
def test_cli_materialises_the_catalog(tmp_path):
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path), "TRAJFORGE_DATA": str(tmp_path / "data")}
    dagster = Path(sys.executable).parent / "dagster"
    cfg = json.dumps({"ops": {"task_catalog": {"config": {"per_template": 2, "languages": ["zh"]}}}})
    out = subprocess.run(
        [
            str(dagster),
            "asset",
            "materialize",
            "-m",
            "dagster_project.definitions",
            "--select",
            "task_catalog",
            "--config-json",
            cfg,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    rows = pq.read_table(tmp_path / "data" / "catalog" / "tasks.parquet").to_pylist()
    assert rows and {r["language"] for r in rows} == {"zh"}
    assert len({r["template_id"] for r in rows}) * 2 == len(rows)


@pytest.mark.slow
def test_mobile_partition_crawls_through_appium_into_the_same_shards(tmp_path):
    """One app x device partition on a real Appium server with two sessions."""
    from dagster_project.assets.mobile import mobile_trajectories
    from dagster_project.resources import AppiumResource

    data = tmp_path / "data"
    resources = {
        "storage": StorageResource(root=str(data)),
        "sandbox": SandboxResource(),
        "appium": AppiumResource(sessions=2, screenshot_scale="css"),
        "vlm": VLMResource(kind="none"),
    }
    assets = [task_catalog, mobile_trajectories, raw_steps, curated_steps, web_shards]
    instance = dg.DagsterInstance.ephemeral()
    cfg = {"ops": {"task_catalog": {"config": {"per_template": 1}}}}
    assert dg.materialize(
        assets, selection=["task_catalog"], resources=resources, instance=instance, run_config=cfg
    ).success
    key = dg.MultiPartitionKey({"app": "mobile_shop", "device": "pixel_8"})
    crawl = dg.materialize(
        assets, selection=["mobile_trajectories"], partition_key=key, resources=resources, instance=instance
    )
    assert crawl.success
    meta = crawl.asset_materializations_for_node("mobile_trajectories")[0].metadata
    crawled = meta["trajectories"].value
    assert crawled >= 3 and meta["success_rate"].value >= 0.9
    pools = meta["device_pools"].value
    assert pools["pixel_8"]["slots"] == 2 and pools["pixel_8"]["quarantined"] == []
    ship = dg.materialize(
        assets, selection=["raw_steps", "curated_steps", "web_shards"], resources=resources, instance=instance
    )
    assert ship.success
    kept = ship.asset_materializations_for_node("curated_steps")[0].metadata["trajectories_kept"].value
    stats = shard_stats(data / "shards" / "sandbox")
    mobile = stats["by_platform"]["mobile_web"]
    assert 0 < mobile["trajectories"] == kept == stats["trajectories"] <= crawled
    assert stats["apps"] == {"mobile_shop": kept}
    # The partition holds exactly the app's tasks that draw pixel_8.
    from crawlers.randomise import profile_for_task
    from dagster_project.partitions import MOBILE_DEVICES
    from trajforge.tasks.catalog import read_catalog

    mine = [
        t
        for t in read_catalog(data / "catalog" / "tasks.parquet", apps=["mobile_shop"])
        if profile_for_task(0, t.task_id, MOBILE_DEVICES) == "pixel_8"
    ]
    assert crawled == len(mine)
