import dagster as dg

from dagster_project.schedules import AFTER_CRAWL

from dagster_project.resources import StorageResource
from trajforge.export import export_shards
from trajforge.report import bar_chart_markdown
from trajforge.stats import shard_stats


class ExportConfig(dg.Config):
    dataset: str = "sandbox"
    max_samples_per_shard: int = 1000


@dg.asset(automation_condition=AFTER_CRAWL, group_name="ship", kinds={"webdataset"}, deps=["raw_steps"])
def web_shards(context: dg.AssetExecutionContext, config: ExportConfig,
               storage: StorageResource) -> dg.MaterializeResult:
    """WebDataset shards (png + json per step) with a manifest, split by trajectory."""
    out = storage.shards_dir(config.dataset)
    export_shards(storage.raw, out, dataset=config.dataset,
                  max_samples_per_shard=config.max_samples_per_shard)
    stats = shard_stats(out)
    context.log.info(f"shards: {stats}")
    return dg.MaterializeResult(metadata={
        "trajectories": stats["trajectories"],
        "steps": stats["steps"],
        "verified_success": stats["verified_success"],
        "languages": dg.MetadataValue.json(stats["languages"]),
        "shards": stats.get("shards", 0),
        "action_histogram": dg.MetadataValue.md(bar_chart_markdown(stats["action_types"], "actions")),
        "path": dg.MetadataValue.path(str(out)),
    })
