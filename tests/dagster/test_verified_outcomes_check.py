"""The check `verified_outcomes` asks the environment which verifier judges each episode.

Walks opted out with `verifier: null` under `explore` are honestly unknown: the
check passes. A walk left unknown although the file's verifier judges it (the
crawl not asking the verifier it should) fails the check, in a real Dagster run.
"""

from __future__ import annotations

import dagster as dg
import pytest

from crawlers.env_crawl import EnvCrawlStats, environment_tasks
from crawlers.env_runtime import EnvironmentRuntime
from dagster_project.assets.environments import (
    environment_partitions,
    environment_trajectories,
    outcome_check,
)
from dagster_project.resources import BrowserResource, StorageResource
from schemas.environment import environment_from_dict
from tests.thirdparty.apps import counter_server
from trajforge.store.raw import RawStore

pytestmark = pytest.mark.slow

VERIFIER = "({done: false, success: document.body.dataset.n === '2'})"
WALKER = """name: walker
start_url: {url}/
verifier: {{kind: js, expression: "{expr}"}}
explore: {{policy: random_walk, episodes: 2, max_steps: 2{opt_out}}}
"""


def _environment(opt_out: bool, **more):
    raw = {
        "name": "walker",
        "start_url": "http://127.0.0.1:1/",
        "verifier": {"kind": "js", "expression": VERIFIER},
        "explore": {"episodes": 2, **({"verifier": None} if opt_out else {})},
        **more,
    }
    return environment_from_dict(raw, source="walker.yaml")


def _check(environment, unknown):
    stats = EnvCrawlStats(trajectories=len(unknown), unknown=len(unknown))
    return outcome_check(environment, stats, unknown)


def test_the_check_asks_the_environment_which_verifier_judges_each_episode():
    walks = environment_tasks(_environment(opt_out=True), explore=True)
    opted_out = _check(_environment(opt_out=True), walks)
    assert opted_out.passed and opted_out.metadata["unknown_with_verifier"].value == 0
    judged = _check(_environment(opt_out=False), walks)
    assert not judged.passed
    assert judged.metadata["problems"].value == (
        "2 episode(s) unknown although a js verifier judges them (first: task 'walker-explore-00000')"
    )
    # A task with a verifier of its own left unknown fails the check; one with none passes.
    env = environment_from_dict(
        {
            "name": "tasks",
            "start_url": "http://127.0.0.1:1/",
            "tasks": [
                {"task_id": "own", "instruction": "x", "verifier": {"kind": "js", "expression": "true"}},
                {"task_id": "free", "instruction": "y"},
            ],
        },
        source="tasks.yaml",
    )
    own, free = env.as_tasks()
    assert not _check(env, [own]).passed and _check(env, [free]).passed


@pytest.fixture(scope="module")
def server():
    with counter_server() as url:
        yield url


def _materialize(instance, data, seed):
    return dg.materialize(
        [environment_trajectories],
        partition_key="walker",
        instance=instance,
        resources={"storage": StorageResource(root=str(data)), "browser": BrowserResource(browsers=1)},
        run_config={"ops": {"environment_trajectories": {"config": {"seed": seed}}}},
        raise_on_error=False,
    )


def _write(folder, url, opt_out):
    text = WALKER.format(url=url, expr=VERIFIER, opt_out=", verifier: null" if opt_out else "")
    (folder / "walker.yaml").write_text(text)


def test_opted_out_walks_pass_and_walks_left_unjudged_fail(server, tmp_path, monkeypatch):
    folder, data = tmp_path / "environments", tmp_path / "data"
    folder.mkdir()
    monkeypatch.setenv("TRAJFORGE_ENVIRONMENTS", str(folder))
    walks = RawStore(data / "raw")
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(environment_partitions.name, ["walker"])

        _write(folder, server, opt_out=True)  # like examples/environments/datasette.yaml
        run = _materialize(instance, data, seed=1)
        [check] = run.get_asset_check_evaluations()
        assert run.success and check.passed, check.metadata
        assert [t.outcome for t in walks.iter_trajectories("env/walker")] == ["unknown", "unknown"]

        _write(folder, server, opt_out=False)  # the file's verifier judges the walks
        run = _materialize(instance, data, seed=2)
        [check] = run.get_asset_check_evaluations()
        assert run.success and check.passed, check.metadata
        judged = [t for t in walks.iter_trajectories("env/walker") if t.seed == 2]
        assert {t.verified_by for t in judged} == {"js"} and len(judged) == 2

        # The crawl forgets the file's verifier for walks (the fault the check is for):
        # the walks are recorded unknown, and the check, asking the file, fails.
        monkeypatch.setattr(
            EnvironmentRuntime,
            "verifier_for",
            lambda self, task: None if task.params.get("explore") else self.environment.verifier_for(task),
        )
        run = _materialize(instance, data, seed=3)
        [check] = run.get_asset_check_evaluations()
        assert not check.passed
        assert check.metadata["unknown_with_verifier"].value == 2
        assert "2 episode(s) unknown although a js verifier judges them" in check.metadata["problems"].value
        assert not run.success  # the check is blocking
