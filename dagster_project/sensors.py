"""Sensors: new files in the import inbox are imported; failed runs are reported."""

import json
import os
import time
from pathlib import Path

import dagster as dg

from trajforge.importers.inbox import default_inbox, inbox_entries, inbox_signature


def failure_report_path() -> Path:
    return Path(os.environ.get("TRAJFORGE_DATA", "data")).resolve() / "reports" / "failed_runs.jsonl"


@dg.run_failure_sensor(default_status=dg.DefaultSensorStatus.RUNNING, monitor_all_code_locations=False)
def report_failed_runs(context: dg.RunFailureSensorContext):
    """Log each failed run and append it to $TRAJFORGE_DATA/reports/failed_runs.jsonl."""
    run = context.dagster_run
    entry = {
        "run_id": run.run_id,
        "job": run.job_name,
        "tags": dict(run.tags),
        "error": context.failure_event.message,
        "reported_at": time.time(),
    }
    path = failure_report_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        f.write(json.dumps(entry) + "\n")
    context.log.error(f"run {run.run_id} ({run.job_name}) failed: {context.failure_event.message}")


@dg.sensor(
    asset_selection=dg.AssetSelection.assets("imported_trajectories"),
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.RUNNING,
)
def import_inbox_sensor(context: dg.SensorEvaluationContext):
    """Import what is dropped in $TRAJFORGE_DATA/inbox/<format>/ (one run per change of the inbox).

    The cursor is a fingerprint of names, sizes and mtimes; the asset itself skips
    files whose content it has already imported, so a repeated run is harmless.
    """
    inbox = default_inbox()
    if not any(True for _ in inbox_entries(inbox)):
        return dg.SkipReason(f"{inbox} is empty")
    sig = inbox_signature(inbox)
    if sig == context.cursor:
        return dg.SkipReason("nothing new in the inbox")
    context.update_cursor(sig)
    return dg.RunRequest(run_key=f"inbox-{sig[:16]}")


SENSORS = [report_failed_runs, import_inbox_sensor]
