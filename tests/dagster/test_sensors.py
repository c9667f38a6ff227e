"""The failed-run sensor reports a real failed run."""

import json

import dagster as dg

from dagster_project.sensors import report_failed_runs


@dg.op
def explode():
    raise RuntimeError("chromium went away")


@dg.job
def doomed():
    explode()


def test_failed_run_is_logged_and_appended_to_the_report(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAJFORGE_DATA", str(tmp_path))
    instance = dg.DagsterInstance.ephemeral()
    result = doomed.execute_in_process(instance=instance, raise_on_error=False)
    assert not result.success
    failure = next(e for e in result.all_events if e.event_type == dg.DagsterEventType.RUN_FAILURE)
    ctx = dg.build_run_status_sensor_context(
        sensor_name="report_failed_runs",
        dagster_instance=instance,
        dagster_run=result.dagster_run,
        dagster_event=failure,
    ).for_run_failure()
    report_failed_runs(ctx)
    lines = (tmp_path / "reports" / "failed_runs.jsonl").read_text().splitlines()
    entry = json.loads(lines[-1])
    assert entry["run_id"] == result.run_id and entry["job"] == "doomed"
    assert "explode" in entry["error"] or "chromium went away" in entry["error"]
