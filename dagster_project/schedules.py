"""Scheduled collection: a daily crawl of every app, then consolidation and export.

The crawl schedule starts one run per app partition. Each tick draws its task
seeds from its date (trajforge.tasks.seeds.daily_seed: the catalog's templates with
that day's seeds), so day 2 crawls new tasks rather than resuming past day 1's
(the crawl's resume is keyed by task id and seed). The downstream assets
carry an on-cron automation condition: once all of the day's crawls have
landed they materialise once (the automation sensor evaluates it).
"""

import os

import dagster as dg

from dagster_project.partitions import WEB_APPS, mobile_partitions
from trajforge.tasks.seeds import daily_seed

CRAWL_CRON = os.environ.get("TRAJFORGE_CRAWL_CRON", "0 2 * * *")
EXPORT_CRON = os.environ.get("TRAJFORGE_EXPORT_CRON", "0 6 * * *")

web_crawl_job = dg.define_asset_job(
    "web_crawl_job",
    selection=dg.AssetSelection.assets("web_trajectories"),
    description="Crawl one app's tasks (a partition) with Playwright.",
)

mobile_crawl_job = dg.define_asset_job(
    "mobile_crawl_job",
    selection=dg.AssetSelection.assets("mobile_trajectories"),
    description="Crawl one app's tasks on one device profile (a partition) through Appium.",
)

# Consolidation and export run once a day, after all of that day's crawls landed.
AFTER_CRAWL = dg.AutomationCondition.on_cron(EXPORT_CRON)

catalog_job = dg.define_asset_job("catalog_job", selection=dg.AssetSelection.assets("task_catalog"))


def day_config(asset: str, day: str) -> dict:
    """The crawl asset's run config for `day`: the catalog's templates with that day's seeds."""
    return {"ops": {asset: {"config": {"task_seed": daily_seed(day, DAILY_PER_TEMPLATE)}}}}


# Tasks per template and language in a day's crawl (the catalog's own count is kept:
# trajforge.tasks.seeds.reseeded); the seeds of two days never overlap at this width.
DAILY_PER_TEMPLATE = int(os.environ.get("TRAJFORGE_DAILY_PER_TEMPLATE", "8"))


@dg.schedule(
    job=web_crawl_job,
    cron_schedule=CRAWL_CRON,
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.STOPPED,
)
def daily_web_crawl(context: dg.ScheduleEvaluationContext):
    """One run per app, keyed by day so a tick is never launched twice; the day's seeds."""
    day = context.scheduled_execution_time.strftime("%Y-%m-%d")
    for app in WEB_APPS:
        yield dg.RunRequest(
            run_key=f"{day}:{app}",
            partition_key=app,
            run_config=day_config("web_trajectories", day),
            tags={"trajforge/schedule": "daily_web_crawl", "trajforge/day": day},
        )


@dg.schedule(
    job=mobile_crawl_job,
    cron_schedule=CRAWL_CRON,
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.STOPPED,
)
def daily_mobile_crawl(context: dg.ScheduleEvaluationContext):
    """One run per app x device partition, keyed by day; the day's seeds."""
    day = context.scheduled_execution_time.strftime("%Y-%m-%d")
    for key in mobile_partitions.get_partition_keys():
        yield dg.RunRequest(
            run_key=f"{day}:{key}",
            partition_key=key,
            run_config=day_config("mobile_trajectories", day),
            tags={"trajforge/schedule": "daily_mobile_crawl", "trajforge/day": day},
        )


SCHEDULES = [daily_web_crawl, daily_mobile_crawl]
JOBS = [web_crawl_job, mobile_crawl_job, catalog_job]
