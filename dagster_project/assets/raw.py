import dagster as dg

from dagster_project.schedules import AFTER_CRAWL

from dagster_project.resources import StorageResource
from trajforge.consolidate import consolidate
from trajforge.report import bar_chart_markdown


@dg.asset(automation_condition=AFTER_CRAWL, group_name="collect", kinds={"parquet"}, deps=["web_trajectories", "mobile_trajectories"])
def raw_steps(context: dg.AssetExecutionContext, storage: StorageResource) -> dg.MaterializeResult:
    """Every collection of the raw store, validated into one steps table (a row per step).

    Invalid rows are quarantined with the file, record and field at fault.
    """
    res = consolidate(storage.raw, storage.raw_steps_dir)
    context.log.info(f"raw_steps: {res.trajectories} trajectories, {res.steps} steps, "
                     f"{res.quarantined} quarantined")
    return dg.MaterializeResult(metadata={
        "trajectories": res.trajectories,
        "steps": res.steps,
        "quarantined": res.quarantined,
        "outcomes": dg.MetadataValue.json(res.outcomes),
        "languages": dg.MetadataValue.json(res.languages),
        "apps": dg.MetadataValue.json(res.apps),
        "action_histogram": dg.MetadataValue.md(bar_chart_markdown(res.action_types, "actions")),
        "path": dg.MetadataValue.path(str(storage.raw_steps_dir)),
    })
