"""A hand-written `predicates` task on the sandbox's settings app, in a real Chromium.

The environment is written here as a lab would write its file: the sandbox is
only a web app behind a start URL. The task's verifier checks the end state three
ways: the Wi-Fi switch in the accessibility tree, the URL, and an http probe of the
app's own state API. It is false right after reset (the app starts with Wi-Fi off
for seed 0) and true once the switch is tapped, and the oracle's crawl records it
as verified by `predicates`.
"""

from __future__ import annotations

import pytest

from crawlers.crawl_driver import EnvCrawl
from crawlers.env_crawl import crawl_environment
from crawlers.env_runtime import EnvironmentRuntime, VerifierError
from crawlers.randomise import DEVICE_PROFILES
from crawlers.scripted import find_element
from schemas.actions import Action, ActionType
from schemas.environment import environment_from_dict
from tests.sandbox_fixtures import sandbox_fixtures
from trajforge.store.raw import RawStore

sandbox, env = sandbox_fixtures("module")

PREDICATES = [
    {"element": {"role": "switch", "name": "Wi-Fi"}, "checked": True},
    {"url": {"path": "/settings"}},
    {"probe": "wifi", "equals": True},
]


def settings_file(base: str, predicates: list[dict] = PREDICATES) -> dict:
    return {
        "name": "settings-by-hand",
        "start_url": (
            f"{base}/start?sid={{session}}&app=settings&lang=en&seed={{seed}}"
            "&theme=light&font_scale=1&distraction_rate=0"
        ),
        "allow": [base],
        "max_steps": 4,
        "probes": {"wifi": {"http": f"{base}/api/state/{{session}}", "pick": "state.wifi"}},
        "tasks": [
            {
                "task_id": "wifi-on",
                "instruction": "Turn Wi-Fi on",
                "params": {"seed": 0, "script": [{"tap": {"role": "switch", "name": "Wi-Fi"}}]},
                "verifier": {"kind": "predicates", "predicates": predicates},
            }
        ],
    }


def test_false_after_reset_true_after_the_tap(sandbox, env):
    runtime = EnvironmentRuntime(environment_from_dict(settings_file(sandbox.url)))
    [task] = runtime.environment.as_tasks()
    obs, task = runtime.start(env, task, session="p1", seed=0, device=DEVICE_PROFILES["desktop"])
    before = runtime.verify(env, task, obs, [], final=False, session="p1", seed=0)
    assert (before.done, before.success, before.kind) == (False, False, "predicates")
    assert before.reason == (
        "predicate 0 (switch 'Wi-Fi' checked=True) fails: found 1, none matching: checked=False"
        " (and 1 more of 3 fail)"
    )
    switch = find_element(obs.elements, {"role": "switch", "name": "Wi-Fi"})
    obs = env.step(Action(type=ActionType.TAP, x=switch.centre()[0], y=switch.centre()[1]))
    after = runtime.verify(env, task, obs, [], final=False, session="p1", seed=0)
    assert (after.done, after.success, after.reward, after.reason) == (
        True,
        True,
        1.0,
        "all 3 predicates hold",
    )


def test_a_probe_that_cannot_be_read_is_an_error_naming_the_task(sandbox, env):
    raw = settings_file(sandbox.url)
    raw["probes"]["wifi"]["http"] = "http://127.0.0.1:9/refused"
    runtime = EnvironmentRuntime(environment_from_dict(raw))
    [task] = runtime.environment.as_tasks()
    obs, task = runtime.start(env, task, session="p2", seed=0, device=DEVICE_PROFILES["desktop"])
    with pytest.raises(
        VerifierError, match=r"task 'wifi-on', predicates verifier: raised ProbeError: probe 'wifi'"
    ):
        runtime.verify(env, task, obs, [], final=False, session="p2", seed=0)


def test_the_oracle_crawl_is_verified_by_predicates_and_doing_nothing_is_not(sandbox, env, tmp_path):
    raw = settings_file(sandbox.url)
    idle = {
        **raw["tasks"][0],
        "task_id": "wifi-on-idle",
        "params": {"seed": 0, "script": [{"done": "nothing"}]},
    }
    raw["tasks"].append(idle)
    store = RawStore(tmp_path / "raw")
    crawl_environment(environment_from_dict(raw), EnvCrawl(policy="oracle", retries=0), store=store, env=env)
    got = {t.task.task_id: t for t in store.iter_trajectories()}
    done = got["wifi-on"]
    assert (done.outcome, done.verified_by, done.reward, done.num_steps) == ("success", "predicates", 1.0, 1)
    assert done.verifier_reason == "all 3 predicates hold"
    idle = got["wifi-on-idle"]
    assert (idle.outcome, idle.verified_by, idle.reward) == ("failure", "predicates", 0.0), idle.error
    assert idle.verifier_reason.startswith("predicate 0 (switch 'Wi-Fi' checked=True) fails")
