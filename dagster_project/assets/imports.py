"""imported_trajectories: public datasets dropped in the inbox, in the canonical schema."""

import dagster as dg

from dagster_project.assets.crawl import CRAWL_RETRY_POLICY
from dagster_project.resources import StorageResource
from trajforge.importers.inbox import import_inbox


# Retried like the crawls (a full disk, storage that blinked): a re-run skips
# files already in the ledger and trajectories already stored.
@dg.asset(group_name="collect", kinds={"parquet"}, retry_policy=CRAWL_RETRY_POLICY)
def imported_trajectories(
    context: dg.AssetExecutionContext, storage: StorageResource
) -> dg.MaterializeResult:
    """Every new file under inbox/<format>/ imported into the raw store (collection import/<format>).

    A file is imported once (a ledger keyed by its sha256); a changed file is imported
    again and its trajectories, having stable ids, are not duplicated. Bad records are
    quarantined with the file, record and field.
    """
    res = import_inbox(storage.inbox_dir, storage.raw, log=context.log.info)
    return dg.MaterializeResult(
        metadata={
            "files_imported": res["files_imported"],
            "files_unchanged": res["files_unchanged"],
            "trajectories": res["trajectories"],
            "task_rows": res["task_rows"],
            "steps": res["steps"],
            "quarantined": res["quarantined"],
            "by_format": dg.MetadataValue.json(res["by_format"]),
            "unknown_formats": dg.MetadataValue.json(res["unknown_formats"]),
            "inbox": dg.MetadataValue.path(str(storage.inbox_dir)),
        }
    )
