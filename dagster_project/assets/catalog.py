import dagster as dg

from dagster_project.resources import StorageResource
from sandbox.tasks import build_catalog
from trajforge.tasks.catalog import catalog_summary, write_catalog
from trajforge.tasks.seeds import check_crawl_seed


class TaskCatalogConfig(dg.Config):
    per_template: int = 2  # tasks per template and language
    languages: list[str] = ["en", "zh"]
    seed: int = 0


@dg.asset(group_name="collect", kinds={"parquet"})
def task_catalog(
    context: dg.AssetExecutionContext, config: TaskCatalogConfig, storage: StorageResource
) -> dg.MaterializeResult:
    """Tasks from every sandbox template, in English and Chinese, with seeded parameters."""
    tasks = build_catalog(
        config.per_template, tuple(config.languages), check_crawl_seed(config.seed)
    )  # the evaluation seeds stay unseen
    write_catalog(tasks, storage.catalog_path)
    summary = catalog_summary(tasks)
    context.log.info(f"task catalog: {summary}")
    return dg.MaterializeResult(
        metadata={
            "tasks": summary["tasks"],
            "templates": summary["templates"],
            "by_app": dg.MetadataValue.json(summary["by_app"]),
            "by_language": dg.MetadataValue.json(summary["by_language"]),
            "path": dg.MetadataValue.path(str(storage.catalog_path)),
            "examples": dg.MetadataValue.md(
                "\n".join(
                    f"- `{t.template_id}` ({t.language}): {t.instruction}"
                    for t in tasks[:: max(1, len(tasks) // 8)]
                )
            ),
        }
    )
