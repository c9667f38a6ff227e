import dagster as dg

from crawlers.device_pool import DevicePool
from crawlers.randomise import profile_for_task
from dagster_project.assets.crawl import (
    CRAWL_RETRY_POLICY,
    CrawlConfig,
    _first_steps,
    _log_progress,
    catalog_tasks,
)
from dagster_project.partitions import MOBILE_DEVICES, mobile_partitions
from dagster_project.ray_resource import RayResource
from dagster_project.resources import AppiumResource, SandboxResource, StorageResource
from sandbox.crawl import SandboxCrawl, crawl
from trajforge.report.figures import thumbnails_markdown


@dg.asset(
    group_name="collect",
    kinds={"appium", "parquet"},
    deps=["task_catalog"],
    partitions_def=mobile_partitions,
    backfill_policy=dg.BackfillPolicy.single_run(),
    retry_policy=CRAWL_RETRY_POLICY,
)
def mobile_trajectories(
    context: dg.AssetExecutionContext,
    config: CrawlConfig,
    storage: StorageResource,
    sandbox: SandboxResource,
    appium: AppiumResource,
) -> dg.MaterializeResult:
    """Crawl the mobile apps' tasks on phones through a real Appium server.

    A partition is app x device profile and holds the app's tasks that draw
    that profile. One device pool per profile serves every app of the run,
    with `appium.sessions` concurrent sessions; a lost session reconnects, a
    device that keeps failing is quarantined. Resumable like the web crawl.
    """
    keys = [k.keys_by_dimension for k in context.partition_keys]
    by_device: dict[str, list[str]] = {}
    for k in keys:
        by_device.setdefault(k["device"], []).append(k["app"])
    store = storage.raw
    totals: dict = {}
    pool_stats: dict = {}
    examples = []
    for device, apps in sorted(by_device.items()):
        report = storage.path / "reports" / "quarantine.jsonl"
        with _device_pool(appium, device, report) as pool:
            for app in sorted(apps):
                tasks = [
                    t
                    for t in catalog_tasks(storage, app, config)
                    if profile_for_task(config.seed, t.task_id, MOBILE_DEVICES) == device
                ]
                collection = f"mobile/{app}/{device}"
                context.log.info(f"{app} on {device}: crawling {len(tasks)} tasks with {pool.size} sessions")
                stats = crawl(
                    tasks,
                    SandboxCrawl(
                        server_url=sandbox.url,
                        policy=config.policy,
                        seed=config.seed,
                        distraction_rate=config.distraction_rate,
                        max_steps=config.max_steps,
                        retries=config.retries,
                        batch_size=config.batch_size,
                    ),
                    store=store,
                    collection=collection,
                    pool=pool,
                    progress=lambda ev, n=len(tasks): _log_progress(context, ev, n),
                )
                context.log.info(f"{app} on {device}: {stats.as_dict()}")
                for k, v in stats.as_dict().items():
                    if isinstance(v, (int, float)):
                        totals[k] = totals.get(k, 0) + v
                for step in _first_steps(store, collection, 1):
                    examples.append(
                        (
                            f"{app} on {device}: {step.action.brief()}",
                            store.blobs.get(step.screenshot, step.image_format),
                        )
                    )
            pool_stats[device] = pool.stats()
    done = totals.get("success", 0) + totals.get("failure", 0)
    return dg.MaterializeResult(
        metadata={
            **{k: (round(v, 3) if isinstance(v, float) else v) for k, v in totals.items()},
            "partitions": ", ".join(f"{k['app']}|{k['device']}" for k in keys),
            "success_rate": round(totals.get("success", 0) / done, 3) if done else 0.0,
            "device_pools": dg.MetadataValue.json(pool_stats),
            "examples": dg.MetadataValue.md(thumbnails_markdown(examples)),
        }
    )


def _device_pool(appium: AppiumResource, device: str, report):
    """The profile's sessions: a local DevicePool, or Ray actors on the cluster's phone hosts
    when the Appium resource names one."""
    ray = RayResource.for_appium(appium)
    if ray.enabled:
        return ray.device_pool(appium, appium.devices_for(device))
    return DevicePool(
        appium.devices_for(device),
        server=appium.server,
        server_url=appium.url,
        sessions_per_device=appium.sessions,
        step_timeout_s=appium.step_timeout_s,
        report_path=report,
        screenshot_scale=appium.screenshot_scale,
    )
