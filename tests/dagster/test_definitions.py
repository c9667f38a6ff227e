"""The Definitions load and wire up as documented (no runs here)."""

import datetime as dt

import dagster as dg

from dagster_project.definitions import defs
from dagster_project.partitions import WEB_APPS
from dagster_project.schedules import daily_web_crawl


def test_graph_has_the_assets_and_checks():
    repo = defs.get_repository_def()
    keys = {k.to_user_string() for k in repo.asset_graph.get_all_asset_keys()}
    assert {
        "task_catalog",
        "web_trajectories",
        "imported_trajectories",
        "raw_steps",
        "curated_steps",
        "web_shards",
    } <= keys
    graph = repo.asset_graph
    assert graph.get(dg.AssetKey("web_trajectories")).parent_keys == {dg.AssetKey("task_catalog")}
    assert dg.AssetKey("imported_trajectories") in graph.get(dg.AssetKey("raw_steps")).parent_keys
    assert graph.get(dg.AssetKey("curated_steps")).parent_keys == {dg.AssetKey("raw_steps")}
    assert graph.get(dg.AssetKey("web_shards")).parent_keys == {dg.AssetKey("curated_steps")}
    assert graph.get(dg.AssetKey("cot_steps")).parent_keys == {dg.AssetKey("curated_steps")}
    for name in ("reasoning_set", "chinese_gui_set"):
        assert graph.get(dg.AssetKey(name)).parent_keys == {dg.AssetKey("cot_steps")}
    checks = {c.name: c for c in repo.asset_graph.asset_check_keys}
    assert {
        "raw_steps_schema_valid",
        "raw_steps_screenshots_decode",
        "raw_steps_coordinates_in_bounds",
        "oracle_success_rate_check",
    } <= set(checks)
    curate_checks = {
        "curated_steps_reconcile",
        "curated_duplicate_rate",
        "curated_noop_rate",
        "curated_no_planted_pii",
    }
    assert curate_checks <= set(checks)
    assert all(checks[name].asset_key == dg.AssetKey("curated_steps") for name in curate_checks)
    assert all(repo.asset_graph.get_check_spec(checks[name]).blocking for name in curate_checks)


def test_crawl_is_partitioned_by_app_with_single_run_backfill():
    node = defs.get_repository_def().asset_graph.get(dg.AssetKey("web_trajectories"))
    assert node.partitions_def.get_partition_keys() == WEB_APPS
    assert node.backfill_policy == dg.BackfillPolicy.single_run()


def test_daily_schedule_requests_one_run_per_app_with_stable_keys():
    ctx = dg.build_schedule_context(scheduled_execution_time=dt.datetime(2026, 11, 30, 2, 0, tzinfo=dt.UTC))
    requests = list(daily_web_crawl(ctx))
    assert sorted(r.partition_key for r in requests) == sorted(WEB_APPS)
    assert {r.run_key for r in requests} == {f"2026-11-30:{a}" for a in WEB_APPS}


def test_mobile_crawl_is_partitioned_by_app_and_device_and_feeds_raw_steps():
    from crawlers.randomise import MOBILE_PROFILES
    from dagster_project.partitions import ALL_MOBILE_RANGE, MOBILE_APPS, mobile_partitions
    from sandbox.apps import MOBILE_APPS as SANDBOX_MOBILE_APPS
    from sandbox.apps import WEB_APPS as SANDBOX_WEB_APPS

    graph = defs.get_repository_def().asset_graph
    node = graph.get(dg.AssetKey("mobile_trajectories"))
    assert node.partitions_def == mobile_partitions
    assert node.backfill_policy == dg.BackfillPolicy.single_run()
    assert MOBILE_APPS == SANDBOX_MOBILE_APPS and WEB_APPS == SANDBOX_WEB_APPS
    keys = mobile_partitions.get_partition_keys()
    assert len(keys) == len(MOBILE_APPS) * len(MOBILE_PROFILES) == 9
    # The demo's one range covers every app x device key.
    lo, hi = ALL_MOBILE_RANGE.split("...")
    assert (keys[0], keys[-1]) == (lo, hi)
    assert dg.AssetKey("mobile_trajectories") in graph.get(dg.AssetKey("raw_steps")).parent_keys


def test_mobile_partitions_split_each_apps_tasks_between_devices():
    from crawlers.randomise import profile_for_task
    from dagster_project.partitions import MOBILE_DEVICES
    from sandbox.tasks import build_catalog

    tasks = build_catalog(per_template=2, apps=["mobile_shop"])
    drawn = [profile_for_task(0, t.task_id, MOBILE_DEVICES) for t in tasks]
    assert drawn == [profile_for_task(0, t.task_id, MOBILE_DEVICES) for t in tasks]
    # Every profile gets a share; each task exactly one.
    assert set(drawn) == set(MOBILE_DEVICES)
    assert all(drawn.count(d) >= len(tasks) // 6 for d in MOBILE_DEVICES)
