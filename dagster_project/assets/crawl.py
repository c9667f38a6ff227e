import dagster as dg

from crawlers.allowlist import Allowlist
from dagster_project.partitions import web_app_partitions
from dagster_project.ray_resource import RayResource
from dagster_project.resources import BrowserResource, SandboxResource, StorageResource
from sandbox.crawl import SandboxCrawl, crawl
from sandbox.tasks import make_task
from trajforge.report.figures import thumbnails_markdown
from trajforge.tasks.catalog import read_catalog
from trajforge.tasks.seeds import reseeded

# A failed crawl step (a browser that will not start, a full disk, a device farm
# gone) is retried with growing, jittered delays: 10 s, 20 s, 40 s. A retry
# resumes: trajectories already committed are skipped, so nothing is duplicated.
CRAWL_RETRY_POLICY = dg.RetryPolicy(
    max_retries=3, delay=10, backoff=dg.Backoff.EXPONENTIAL, jitter=dg.Jitter.PLUS_MINUS
)


class CrawlConfig(dg.Config):
    policy: str = "oracle"  # "oracle" | "random_walk"
    seed: int = 0
    distraction_rate: float = 0.25  # chance of a pop-up on each page load
    max_steps: int = 30
    retries: int = 2
    # Trajectories per committed Parquet part: at most this many finished
    # episodes are played again after a killed run.
    batch_size: int = 16
    # -1: the catalog's tasks as they are. >= 0: the catalog's templates drawn again
    # from this task seed (the daily schedule sets trajforge.tasks.seeds.daily_seed of its
    # date, so each tick crawls new tasks instead of resuming past all of them).
    task_seed: int = -1


def catalog_tasks(storage: StorageResource, app: str, config: CrawlConfig) -> list:
    """The tasks of `app` this run crawls: the catalog's, or reseeded (config.task_seed)."""
    tasks = read_catalog(storage.catalog_path, apps=[app])
    if config.task_seed < 0:
        return tasks
    return reseeded(tasks, config.task_seed, make_task)


@dg.asset(
    group_name="collect",
    kinds={"playwright", "parquet"},
    deps=["task_catalog"],
    partitions_def=web_app_partitions,
    backfill_policy=dg.BackfillPolicy.single_run(),
    retry_policy=CRAWL_RETRY_POLICY,
)
def web_trajectories(
    context: dg.AssetExecutionContext,
    config: CrawlConfig,
    storage: StorageResource,
    sandbox: SandboxResource,
    browser: BrowserResource,
) -> dg.MaterializeResult:
    """Crawl the catalog's tasks of each app with Playwright on Chromium.

    Resumable: trajectories already committed for the same task, policy and
    seed are skipped, so a retried or re-run partition writes no duplicate.
    """
    apps = list(context.partition_keys)
    store = storage.raw
    totals: dict = {}
    examples = []
    # `browser.browsers` Chromiums for the whole run, one per worker thread (or
    # `browser.ray_actors` Ray actors when a Ray address is set); recording never
    # leaves the sandbox's origin.
    with RayResource.for_browser(browser).browser_pool(browser, Allowlist([sandbox.url])) as pool:
        for app in apps:
            tasks = catalog_tasks(storage, app, config)
            context.log.info(f"{app}: crawling {len(tasks)} tasks on {pool.size} browsers")
            stats = crawl(
                tasks,
                SandboxCrawl(
                    server_url=sandbox.url,
                    policy=config.policy,
                    seed=config.seed,
                    distraction_rate=config.distraction_rate,
                    max_steps=config.max_steps,
                    retries=config.retries,
                    image_format=browser.image_format,
                    batch_size=config.batch_size,
                ),
                store=store,
                collection=f"web/{app}",
                pool=pool,
                progress=lambda ev: _log_progress(context, ev, len(tasks)),
            )
            context.log.info(f"{app}: {stats.as_dict()}")
            for k, v in stats.as_dict().items():
                if isinstance(v, (int, float)):
                    totals[k] = totals.get(k, 0) + v
        browser_stats = pool.stats()
    for app in apps:  # a few screens of what was recorded
        for step in _first_steps(store, f"web/{app}", 1):
            examples.append(
                (f"{app}: {step.action.brief()}", store.blobs.get(step.screenshot, step.image_format))
            )
    done = totals.get("success", 0) + totals.get("failure", 0)
    return dg.MaterializeResult(
        metadata={
            **{k: (round(v, 3) if isinstance(v, float) else v) for k, v in totals.items()},
            "apps": ", ".join(apps),
            "browsers": dg.MetadataValue.json(browser_stats),
            "success_rate": round(totals.get("success", 0) / done, 3) if done else 0.0,
            "examples": dg.MetadataValue.md(thumbnails_markdown(examples)),
        }
    )


def _log_progress(context, ev, total: int) -> None:
    done = ev.stats.trajectories + ev.stats.skipped
    if ev.kind == "trajectory" and (done % 10 == 0 or done == total or ev.outcome != "success"):
        context.log.info(
            f"{done}/{total} {ev.task_id}: {ev.outcome} "
            f"({ev.stats.steps} steps so far){' ' + ev.message if ev.message else ''}"
        )
    elif ev.kind == "retry":
        context.log.warning(f"{ev.task_id}: browser died, retrying ({ev.message})")


def _first_steps(store, collection: str, n: int):
    out = []
    for step in store.iter_steps(collection):
        out.append(step)
        if len(out) >= n:
            break
    return out
