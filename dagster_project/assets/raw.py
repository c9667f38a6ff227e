import dagster as dg

from dagster_project.resources import StorageResource
from dagster_project.schedules import AFTER_CRAWL
from training.flywheel import failure_pool, sft_sources
from trajforge.report.figures import app_outcome_rows, outcome_columns, raw_summary, summary_markdown
from trajforge.store.consolidate import consolidate


def summary_metadata(summary: dict) -> dict:
    """A trajforge.report.figures summary as Dagster metadata: plots as markdown, a table, the JSON."""
    cols = outcome_columns(summary)
    meta = {name: dg.MetadataValue.md(md) for name, md in summary_markdown(summary).items()}
    meta["app_outcome_table"] = dg.MetadataValue.table(
        records=[dg.TableRecord(r) for r in app_outcome_rows(summary)],
        schema=dg.TableSchema(
            columns=[
                dg.TableColumn("app", "string"),
                *(dg.TableColumn(c, "int") for c in cols),
                dg.TableColumn("total", "int"),
            ]
        ),
    )
    meta["summary"] = dg.MetadataValue.json(summary)
    return meta


@dg.asset(
    automation_condition=AFTER_CRAWL,
    group_name="collect",
    kinds={"parquet"},
    deps=["web_trajectories", "mobile_trajectories", "imported_trajectories", "reflection_trajectories"],
)
def raw_steps(context: dg.AssetExecutionContext, storage: StorageResource) -> dg.MaterializeResult:
    """Every collection of the raw store, validated into one steps table (a row per step).

    Invalid rows are quarantined with the file, record and field at fault. The
    failure pool of agent rollouts (`rollouts-failed/*`) stays out: it is kept for
    analysis and RL, while verified rollouts (`rollouts/*`, the flywheel's output of
    the last checkpoint) flow in with the crawls and imports.
    """
    res = consolidate(storage.raw, storage.raw_steps_dir, collections=sft_sources(storage.raw))
    pool = failure_pool(storage.raw)
    if pool:
        context.log.info(f"left out the failure pool: {', '.join(pool)}")
    context.log.info(
        f"raw_steps: {res.trajectories} trajectories, {res.steps} steps, {res.quarantined} quarantined"
    )
    return dg.MaterializeResult(
        metadata={
            "trajectories": res.trajectories,
            "steps": res.steps,
            "quarantined": res.quarantined,
            "outcomes": dg.MetadataValue.json(res.outcomes),
            "languages": dg.MetadataValue.json(res.languages),
            "apps": dg.MetadataValue.json(res.apps),
            **summary_metadata(raw_summary(storage.raw_steps_dir)),
            "path": dg.MetadataValue.path(str(storage.raw_steps_dir)),
        }
    )
