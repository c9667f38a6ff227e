import dagster as dg

from dagster_project.assets.raw import summary_metadata
from dagster_project.resources import StorageResource
from dagster_project.schedules import AFTER_CRAWL
from trajforge.publish.export import export_shards
from trajforge.report.figures import shard_summary


class ExportConfig(dg.Config):
    dataset: str = "sandbox"
    max_samples_per_shard: int = 1000
    resolution: str = "native"  # native (capped at 1920x1080 px), 1120, 448 or qwen


@dg.asset(automation_condition=AFTER_CRAWL, group_name="ship", kinds={"webdataset"}, deps=["curated_steps"])
def web_shards(
    context: dg.AssetExecutionContext, config: ExportConfig, storage: StorageResource
) -> dg.MaterializeResult:
    """WebDataset shards (png + json per step) with a manifest, split by trajectory.

    Reads the curated store: kept trajectories, their kept steps (so step indices
    may have gaps where a step was dropped), text scrubbed and screenshots blurred.
    """
    with storage.shard_destination(config.dataset) as out:  # an object root: published here
        export_shards(
            storage.curated,
            out,
            dataset=config.dataset,
            allow_index_gaps=True,
            max_samples_per_shard=config.max_samples_per_shard,
            resolution=config.resolution,
        )
    # Figures read back from the shards themselves: what users get, not what was meant.
    summary = shard_summary(out)
    context.log.info(
        f"shards: {summary['trajectories']} trajectories, {summary['steps']} steps, "
        f"splits { ({k: v['steps'] for k, v in summary['splits'].items()}) }"
    )
    return dg.MaterializeResult(
        metadata={
            "trajectories": summary["trajectories"],
            "steps": summary["steps"],
            "verified_success": summary["verified_success"],
            "languages": dg.MetadataValue.json(summary["languages"]),
            "shards": sum(s["shards"] for s in summary["splits"].values()),
            **summary_metadata(summary),
            "path": dg.MetadataValue.path(str(storage.shards_target(config.dataset))),
        }
    )
