"""`environment_goal_tasks`: a real materialisation on Datasette (a third-party app from
PyPI, tests/thirdparty/apps.py) writes a task file of validated `predicates` goals with
its funnel as metadata; its two checks fail on a validation that kept trivial or
unachievable goals."""

from __future__ import annotations

import json
import shutil

import dagster as dg
import pytest

from crawlers.task_validation_report import Rejection, TaskFigures, ValidationReport
from dagster_project.assets.environments import environment_partitions
from dagster_project.assets.goal_tasks import (
    ACHIEVABLE,
    NON_TRIVIAL,
    GoalTasksConfig,
    environment_goal_tasks,
    goal_checks,
)
from dagster_project.resources import StorageResource
from schemas.environment import load_environment
from tests.thirdparty.apps import ENVIRONMENTS

pytestmark = pytest.mark.slow


def _materialise(tmp_path, monkeypatch, config: dict, **kw) -> dg.ExecuteInProcessResult:
    """environment_goal_tasks on the Datasette example file's partition (a folder of one
    file under tmp_path/environments, the data root tmp_path/data)."""
    folder = tmp_path / "environments"
    folder.mkdir()
    shutil.copy(ENVIRONMENTS / "datasette.yaml", folder / "datasette.yaml")
    monkeypatch.setenv("TRAJFORGE_ENVIRONMENTS", str(folder))
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(environment_partitions.name, ["datasette"])
        return dg.materialize(
            [environment_goal_tasks],
            partition_key="datasette",
            instance=instance,
            resources={"storage": StorageResource(root=str(tmp_path / "data"))},
            run_config={"ops": {"environment_goal_tasks": {"config": config}}},
            **kw,
        )


def test_materialise_goal_tasks_on_datasette(datasette_url, tmp_path, monkeypatch):
    folder, data = tmp_path / "environments", tmp_path / "data"
    monkeypatch.setenv("DATASETTE_URL", datasette_url)
    run = _materialise(tmp_path, monkeypatch, {"minutes": 0.5, "random_tries": 5, "languages": ["en", "zh"]})
    assert run.success
    [mat] = run.asset_materializations_for_node("environment_goal_tasks")
    meta = {k: v.value for k, v in mat.metadata.items()}
    assert meta["candidates"] >= meta["validated"] >= meta["kept"] >= 1, meta
    assert meta["kept_tasks"] == 2 * meta["kept"] and meta["languages"] == "en,zh"
    assert meta["validated"] - meta["kept"] == sum(meta["rejected"].values())
    assert meta["tasks_per_core_hour"] > 0
    assert meta["difficulty"].startswith("![difficulty](data:image/png;base64,")
    task_file = data / "tasks" / "datasette.jsonl"
    assert meta["task_file"] == str(task_file)
    rows = [json.loads(line) for line in task_file.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == meta["kept_tasks"] and {r["language"] for r in rows} == {"en", "zh"}
    assert {r["verifier"]["kind"] for r in rows} == {"predicates"}
    assert all(0 <= r["difficulty"] <= 1 for r in rows)
    # The task file is one the environment file takes (what `trajforge serve --tasks` loads).
    served = load_environment(folder / "datasette.yaml", tasks_file=task_file)
    assert sorted(t.task_id for t in served.tasks) == sorted(r["task_id"] for r in rows)
    checks = {c.check_name: c for c in run.get_asset_check_evaluations()}
    assert set(checks) == {NON_TRIVIAL, ACHIEVABLE}
    for check in checks.values():
        assert check.passed, check.metadata
        assert check.metadata["played"].value >= meta["kept"]


def _report(tasks_in: int, **rejected: int) -> ValidationReport:
    report = ValidationReport(environment="app", tasks_in=tasks_in)
    n = 0
    for reason, count in rejected.items():
        for _ in range(count):
            report.rejections.append(Rejection(f"t{n}", reason, "made here"))
            n += 1
    report.kept = [f"t{i}" for i in range(n, tasks_in)]
    report.figures = {t: TaskFigures(t, checks=1) for t in report.kept}
    return report


def test_each_check_fails_on_a_validation_that_fails_it():
    config = GoalTasksConfig()  # non-trivial >= 0.8, achievable >= 0.7

    def verdicts(report):
        return {c.check_name: (c.passed, c.metadata["rate"].value) for c in goal_checks(report, config)}

    # 10 in, 1 duplicate (not played): 9 played, 1 trivial, 1 unachievable of 8.
    assert verdicts(_report(10, duplicate=1, trivial=1, unachievable=1)) == {
        NON_TRIVIAL: (True, 0.889),
        ACHIEVABLE: (True, 0.875),
    }
    # Mostly trivial: 6 of 10 true at reset; the 4 others all reached.
    assert verdicts(_report(10, trivial=6)) == {NON_TRIVIAL: (False, 0.4), ACHIEVABLE: (True, 1.0)}
    # Mostly unachievable: none trivial, 5 of 10 not reached by their demonstration.
    assert verdicts(_report(10, unachievable=5, random_shortcut=2)) == {
        NON_TRIVIAL: (True, 1.0),
        ACHIEVABLE: (False, 0.5),
    }
    # Nothing played (every candidate without a demonstration), or no validation at all.
    for report in (_report(3, no_demonstration=3), None):
        results = goal_checks(report, config)
        assert [c.passed for c in results] == [False, False]
        assert {c.metadata["problem"].value for c in results} == {"no goal was played"}
    # The thresholds are the config's.
    lenient = GoalTasksConfig(min_non_trivial_rate=0.3, min_achievable_rate=0.5)
    assert all(c.passed for c in goal_checks(_report(10, trivial=6), lenient))
    assert all(c.passed for c in goal_checks(_report(10, unachievable=5), lenient))


def test_a_language_it_cannot_write_fails_the_run_naming_the_file(tmp_path, monkeypatch):
    folder = tmp_path / "environments"
    run = _materialise(tmp_path, monkeypatch, {"languages": ["en", "fr"]}, raise_on_error=False)
    assert not run.success
    [failure] = [e for e in run.all_events if e.is_step_failure]
    message = failure.step_failure_data.error.message
    assert str(folder / "datasette.yaml") in message and "languages" in message and "fr" in message
