"""Environment files in Dagster: the sensor makes the partitions, the asset crawls one,
its check can fail, the daily schedule's second tick adds new trajectories, and
`retry_errors` plays an errored partition again once its file is fixed."""

from __future__ import annotations

import datetime as dt

import dagster as dg
import pytest

from dagster_project.assets.environments import (
    daily_environment_crawl,
    environment_files_sensor,
    environment_partitions,
    environment_trajectories,
)
from dagster_project.resources import BrowserResource, StorageResource
from tests.thirdparty.apps import counter_server
from trajforge.store.raw import RawStore

pytestmark = pytest.mark.slow

ENV = """name: {name}
start_url: {url}/
max_steps: 3
tasks:
  - task_id: add
    instruction: Press Add twice
    params: {{script: [{{tap: {{role: button, name: Add}}}}, {{tap: {{role: button, name: Add}}}}]}}
verifier: {{kind: js, expression: "{expr}"}}
"""
GOOD = "({done: document.body.dataset.n === '2', success: document.body.dataset.n === '2'})"


@pytest.fixture(scope="module")
def server():
    with counter_server() as url:
        yield url


def _materialize(instance, data, name, seed=0):
    return dg.materialize(
        [environment_trajectories],
        partition_key=name,
        instance=instance,
        resources={"storage": StorageResource(root=str(data)), "browser": BrowserResource(browsers=1)},
        run_config={"ops": {"environment_trajectories": {"config": {"seed": seed}}}},
        raise_on_error=False,
    )


def test_sensor_partitions_crawl_check_and_daily_seeds(server, tmp_path, monkeypatch):
    folder, data = tmp_path / "environments", tmp_path / "data"
    folder.mkdir()
    (folder / "counter.yaml").write_text(ENV.format(name="counter", url=server, expr=GOOD))
    (folder / "broken.yaml").write_text(
        ENV.format(name="broken", url=server, expr=GOOD).replace("max_steps", "max_step")
    )
    (folder / "throws.yaml").write_text(ENV.format(name="throws", url=server, expr="nope.x"))
    monkeypatch.setenv("TRAJFORGE_ENVIRONMENTS", str(folder))
    with dg.instance_for_test() as instance:
        _run_all(instance, data)


def _run_all(instance, data):

    result = environment_files_sensor(dg.build_sensor_context(instance=instance))
    [add] = result.dynamic_partitions_requests
    assert sorted(add.partition_keys) == ["counter", "throws"]  # broken.yaml reported, skipped
    assert sorted(r.partition_key for r in result.run_requests) == ["counter", "throws"]
    instance.add_dynamic_partitions(environment_partitions.name, list(add.partition_keys))

    run = _materialize(instance, data, "counter")
    assert run.success
    [mat] = run.asset_materializations_for_node("environment_trajectories")
    meta = {k: v.value for k, v in mat.metadata.items()}
    assert (meta["success"], meta["episodes"], meta["verified_success_rate"]) == (1, 1, 1.0)
    [check] = run.get_asset_check_evaluations()
    assert check.passed

    bad = _materialize(instance, data, "throws")  # the verifier throws: every episode an error
    [check] = bad.get_asset_check_evaluations()
    assert not check.passed and "error rate 100%" in check.metadata["problems"].value

    # Two daily ticks: different seeds, so the second adds a new trajectory.
    seeds = []
    for day in (dt.datetime(2026, 12, 1, 3, tzinfo=dt.UTC), dt.datetime(2026, 12, 2, 3, tzinfo=dt.UTC)):
        ctx = dg.build_schedule_context(instance=instance, scheduled_execution_time=day)
        reqs = {r.partition_key: r for r in daily_environment_crawl(ctx)}
        assert set(reqs) == {"counter", "throws"}
        seeds.append(reqs["counter"].run_config["ops"]["environment_trajectories"]["config"]["seed"])
    assert seeds[0] != seeds[1]
    counts = []
    for seed in seeds:
        assert _materialize(instance, data, "counter", seed=seed).success
        counts.append(len(list(RawStore(data / "raw").iter_trajectories("env/counter"))))
    assert counts == [2, 3]  # seed 0, then day 1 adds one, day 2 another
    assert _materialize(instance, data, "counter", seed=seeds[1]).success  # a re-run adds nothing
    assert len(list(RawStore(data / "raw").iter_trajectories("env/counter"))) == 3


WALKER = """name: walker
start_url: {url}/
explore: {{policy: random_walk, episodes: 2, max_steps: 4}}
"""


def test_explored_walks_become_replayed_verified_tasks(server, tmp_path, monkeypatch):
    import json

    from dagster_project.assets.environments import environment_reverse_tasks
    from dagster_project.resources import VLMResource

    folder, data = tmp_path / "environments", tmp_path / "data"
    folder.mkdir()
    (folder / "walker.yaml").write_text(WALKER.format(url=server))
    monkeypatch.setenv("TRAJFORGE_ENVIRONMENTS", str(folder))
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(environment_partitions.name, ["walker"])
        resources = {
            "storage": StorageResource(root=str(data)),
            "browser": BrowserResource(browsers=1),
            "vlm": VLMResource(kind="none"),
        }
        run = dg.materialize(
            [environment_trajectories, environment_reverse_tasks],
            partition_key="walker",
            instance=instance,
            resources=resources,
        )
        assert run.success
        [mat] = run.asset_materializations_for_node("environment_reverse_tasks")
        meta = {k: v.value for k, v in mat.metadata.items()}
    walks = list(RawStore(data / "raw").iter_trajectories("env/walker"))
    assert len(walks) == 2 and {t.outcome for t in walks} == {"unknown"}  # no verifier: honest
    assert meta["walks"] == 2 and meta["tasks"] == 2
    assert meta["instruction_sources"] == {"template": 2}  # no VLM: labelled template
    rows = [
        json.loads(line) for line in (data / "reverse" / "walker" / "tasks.jsonl").read_text().splitlines()
    ]
    assert all(r["params"]["instruction_source"] == "template" and r["params"]["actions"] for r in rows)
    replays = list(RawStore(data / "raw").iter_trajectories("env-reverse/walker"))
    assert sorted(t.outcome for t in replays) == ["success", "success"], [t.error for t in replays]
    assert {t.verified_by for t in replays} == {"python"} and meta["replays_verified"] == 2


BROKEN = """name: counter
start_url: {url}/
wait_for: "{wait_for}"
wait_timeout_s: 1
max_steps: 3
tasks:
  - task_id: add
    instruction: Press Add twice
    params: {{script: [{{tap: {{role: button, name: Add}}}}, {{tap: {{role: button, name: Add}}}}]}}
verifier: {{kind: js, expression: "({{done: document.body.dataset.n === '2', success: document.body.dataset.n === '2'}})"}}
"""


def test_retry_errors_replays_an_errored_partition_once_the_file_is_fixed(server, tmp_path, monkeypatch):
    folder, data = tmp_path / "environments", tmp_path / "data"
    folder.mkdir()
    monkeypatch.setenv("TRAJFORGE_ENVIRONMENTS", str(folder))
    store = RawStore(data / "raw")

    def run(instance, **config):
        return dg.materialize(
            [environment_trajectories],
            partition_key="counter",
            instance=instance,
            resources={"storage": StorageResource(root=str(data)), "browser": BrowserResource(browsers=1)},
            run_config={"ops": {"environment_trajectories": {"config": {"retries": 0, **config}}}},
            raise_on_error=False,
        )

    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(environment_partitions.name, ["counter"])
        (folder / "counter.yaml").write_text(BROKEN.format(url=server, wait_for="js:window.nosuch === 1"))
        [check] = run(instance).get_asset_check_evaluations()
        assert not check.passed and [t.outcome for t in store.iter_trajectories("env/counter")] == ["error"]

        (folder / "counter.yaml").write_text(BROKEN.format(url=server, wait_for="button"))
        plain = run(instance)  # the same seed: the stored error is skipped
        assert plain.success and [t.outcome for t in store.iter_trajectories("env/counter")] == ["error"]
        replayed = run(instance, retry_errors=True)
        [check] = replayed.get_asset_check_evaluations()
        assert replayed.success and check.passed
        [mat] = replayed.asset_materializations_for_node("environment_trajectories")
        assert (mat.metadata["replayed_errors"].value, mat.metadata["success"].value) == (1, 1)
        assert [t.outcome for t in store.iter_trajectories("env/counter")] == ["success"]
