"""Sensors: failed runs are reported, so the Dagster UI is where collection is watched."""
import json
import os
import time
from pathlib import Path

import dagster as dg


def failure_report_path() -> Path:
    return Path(os.environ.get("TRAJFORGE_DATA", "data")).resolve() / "reports" / "failed_runs.jsonl"


@dg.run_failure_sensor(default_status=dg.DefaultSensorStatus.RUNNING, monitor_all_code_locations=False)
def report_failed_runs(context: dg.RunFailureSensorContext):
    """Log each failed run and append it to $TRAJFORGE_DATA/reports/failed_runs.jsonl."""
    run = context.dagster_run
    entry = {"run_id": run.run_id, "job": run.job_name, "tags": dict(run.tags),
             "error": context.failure_event.message, "reported_at": time.time()}
    path = failure_report_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        f.write(json.dumps(entry) + "\n")
    context.log.error(f"run {run.run_id} ({run.job_name}) failed: {context.failure_event.message}")


SENSORS = [report_failed_runs]
