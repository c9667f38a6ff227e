"""Rejection sampling through the Gym API, on real Chromium and the real sandbox, with a scripted agent.

The agent's first rollout taps the wrong switch, its second the right one: the
sandbox's state verifier (the env's) must keep exactly one. The env is made by
trajforge.envs.make_sandbox, the model's answers go to `env.step` as text.
"""

from __future__ import annotations

import functools

import gymnasium
import pytest

import trajforge.envs as tf_envs
from sandbox.environment import SOURCE_NAME
from sandbox.tasks import build_catalog
from schemas.environment import Environment, TaskSpec
from schemas.records import trajectory_id_for
from tests.synthesis.test_agent import ScriptedAgent
from training.rollouts import Rollouts, rejection_sample, rollout_seed
from trajforge.store.audit import read_audit
from trajforge.store.raw import RawStore, model_slug

from .sandbox_fixtures import env, sandbox  # noqa: F401


class _Refuses:
    """A backend that must not be asked: everything is stored already."""

    model_id = "org/scripted agent"

    def generate(self, *a, **kw):
        raise AssertionError("a re-run asked the model again")


def _wifi():
    return next(t for t in build_catalog(1, ("en",)) if t.template_id == "settings.wifi")


def _sandbox(url: str, tasks, env=None, wrap=None):
    """A factory of sandbox envs playing `tasks` on the desktop profile (the shared browser)."""

    def make(**kw):
        made = tf_envs.make_sandbox(url, tasks=list(tasks), **{"env": env, "device": "desktop", **kw})
        return wrap(made) if wrap else made

    return make


def test_k_rollouts_rates_collections_and_idempotent_rerun(sandbox, env, tmp_path):
    task = _wifi()
    backend = ScriptedAgent(
        [("switch", "Bluetooth"), "Terminate"],
        [("switch", "Wi-Fi"), "Terminate"],
        model_id="org/scripted agent",
    )
    store = RawStore(tmp_path / "raw")
    result = rejection_sample(
        [task.task_id],
        backend,
        Rollouts(k=2, seed=7, max_steps=5),
        envs=_sandbox(sandbox.url, [task], env),
        store=store,
    )
    slug = model_slug("org/scripted agent")
    assert slug == "org_scripted_agent"
    assert (result.collection, result.failed_collection) == (f"rollouts/{slug}", f"rollouts-failed/{slug}")
    assert result.rates == {task.task_id: (1, 2)}
    assert result.success_rates() == {task.task_id: 0.5}
    assert (result.written, result.skipped, result.outcomes) == (2, 0, {"failure": 1, "success": 1})
    assert result.steps == 4 and result.unparseable_answers == 0 and result.blocked_actions == 0
    assert [(r.index, r.outcome, r.attempts) for r in result.rollouts] == [
        (0, "failure", 1),
        (1, "success", 1),
    ]
    # The env's composite reward: success + alpha for answers that all parsed.
    assert [r.reward["reward"] for r in result.rollouts] == [pytest.approx(0.1), pytest.approx(1.1)]

    kept = list(store.iter_trajectories(result.collection))
    failed = list(store.iter_trajectories(result.failed_collection))
    assert len(kept) == 1 and len(failed) == 1
    seeds = [rollout_seed(7, task.task_id, i) for i in range(2)]
    assert seeds[0] != seeds[1]
    assert kept[0].seed == seeds[1] and failed[0].seed == seeds[0]
    for t in kept + failed:
        assert t.policy == "agent" and t.source == "rollout"
        assert t.source_name == "sandbox:agent:org/scripted agent"
        assert t.verified_by == "state" and t.task == task and t.device.name == "desktop"
        assert t.trajectory_id == trajectory_id_for(
            SOURCE_NAME, task.task_id, "agent", "org/scripted agent", t.seed
        )
    assert kept[0].outcome == "success" and failed[0].outcome == "failure"
    steps = {s.trajectory_id: s for s in store.iter_steps(result.collection) if s.index == 0}
    assert steps[kept[0].trajectory_id].target.name == "Wi-Fi"
    assert steps[kept[0].trajectory_id].thought == "scripted"
    # Each rollout sampled with its own seed, at the default temperature.
    assert {c["temperature"] for c in backend.calls} == {1.0}
    assert [c["seed"] for c in backend.calls] == [(s * 1009 + step) % 2**31 for s in seeds for step in (0, 1)]
    # The requests: the env's frame (qwen2.5-vl's for 1280 x 800), the rollout's id as its episode.
    req = backend.requests[0]
    assert (req.metadata["width"], req.metadata["height"]) == (1260, 784)
    assert req.metadata["episode"] == failed[0].trajectory_id
    audit = read_audit(store.root / "audit" / f"{result.collection}.jsonl")
    assert len(audit) == 4 and {r["decision"] for r in audit} == {"allowed"}

    # Re-run: nothing is played again, the rates are read back from the store.
    again = rejection_sample(
        [task],
        _Refuses(),
        Rollouts(k=2, seed=7, collection=result.collection, failed_collection=result.failed_collection),
        envs=_sandbox(sandbox.url, [task], env),
        store=store,
    )
    assert again.rates == {task.task_id: (1, 2)}
    assert (again.written, again.skipped, again.rollouts) == (0, 2, [])
    assert len(list(store.iter_trajectories(result.collection))) == 1
    assert len(list(store.iter_trajectories(result.failed_collection))) == 1


def test_rejection_sampling_refuses_tasks_without_a_verifier(tmp_path):
    plain = Environment(
        name="plain",
        start_url="http://127.0.0.1:9/",
        tasks=[TaskSpec(task_id="free", instruction="Look around", language="en")],
    )
    store = RawStore(tmp_path / "raw")
    with pytest.raises(ValueError, match="task free of environment 'plain' has no verifier"):
        rejection_sample(["free"], _Refuses(), Rollouts(k=2), envs=plain, store=store)
    with pytest.raises(ValueError, match="'nope': no task of that id"):
        rejection_sample(["nope"], _Refuses(), Rollouts(k=2), envs=plain, store=store)
    with pytest.raises(ValueError, match="k=0"):
        rejection_sample(["free"], _Refuses(), Rollouts(k=0), envs=plain, store=store)
    assert store.collections() == []


class _Broken:
    """A model that fails (an out-of-memory, a dead endpoint): not the env's fault."""

    model_id = "org/broken"

    def generate(self, *a, **kw):
        raise RuntimeError("CUDA out of memory (planted)")


def test_a_model_error_stops_rejection_sampling_on_a_pool_as_on_one_browser(sandbox, env, tmp_path):
    from crawlers.allowlist import Allowlist
    from crawlers.crawl_browser_pool import WebEnvPool

    task = _wifi()
    how = Rollouts(k=2, seed=7, max_steps=3)
    with pytest.raises(RuntimeError, match="out of memory"):
        rejection_sample(
            [task.task_id],
            _Broken(),
            how,
            envs=_sandbox(sandbox.url, [task], env),
            store=RawStore(tmp_path / "one"),
        )
    store = RawStore(tmp_path / "pool")
    with (
        WebEnvPool(2, request_filter=Allowlist([sandbox.url])) as pool,
        pytest.raises(RuntimeError, match="out of memory"),
    ):
        rejection_sample(
            [task.task_id], _Broken(), how, envs=_sandbox(sandbox.url, [task]), store=store, pool=pool
        )
    for root in ("one", "pool"):  # no rollout the model broke off is kept (a re-run plays it)
        assert RawStore(tmp_path / root).collections() == []


class _LosesTheEnv(gymnasium.Wrapper):
    """An env whose first `fail` step() calls fail as a crashed browser's would."""

    fails = 0

    def __init__(self, env, fail: int):
        super().__init__(env)
        self.fail = fail

    def step(self, action):
        if _LosesTheEnv.fails < self.fail:
            _LosesTheEnv.fails += 1
            raise ConnectionError("the browser went away (planted)")
        return self.env.step(action)


def test_a_rollout_whose_env_fails_is_replayed_whole_then_recorded_as_an_error(sandbox, env, tmp_path):
    task = _wifi()
    backend = ScriptedAgent([("switch", "Wi-Fi"), "Terminate"], model_id="org/scripted agent")
    store = RawStore(tmp_path / "raw")
    _LosesTheEnv.fails = 0
    once = rejection_sample(
        [task.task_id],
        backend,
        Rollouts(k=1, seed=3, max_steps=4, retries=1),
        envs=_sandbox(sandbox.url, [task], env, wrap=functools.partial(_LosesTheEnv, fail=1)),
        store=store,
    )
    # The first attempt lost its env at its first step: replayed whole, recorded once.
    assert (once.retries, once.outcomes, once.written) == (1, {"success": 1}, 1)
    assert once.rollouts[0].attempts == 2 and once.rates == {task.task_id: (1, 1)}
    assert [t.outcome for t in store.iter_trajectories()] == ["success"]

    _LosesTheEnv.fails = 0
    lost = rejection_sample(
        [task.task_id],
        backend,
        Rollouts(k=1, seed=4, max_steps=4, retries=1),
        envs=_sandbox(sandbox.url, [task], env, wrap=functools.partial(_LosesTheEnv, fail=2)),
        store=store,
    )
    # Out of attempts: an error (never a failure of the policy's), in the failure pool.
    assert (lost.retries, lost.outcomes, lost.written, lost.rates) == (
        1,
        {"error": 1},
        1,
        {task.task_id: (0, 1)},
    )
    (error,) = store.iter_trajectories(lost.failed_collection)
    assert error.outcome == "error" and error.num_steps == 0 and "went away" in error.error
    assert error.trajectory_id == lost.rollouts[0].trajectory_id and error.source == "rollout"


class _CrashesTheBrowser(gymnasium.Wrapper):
    """Closes the env's Chromium under its first step, as a crash would."""

    crashed = 0

    def step(self, action):
        if not _CrashesTheBrowser.crashed:
            _CrashesTheBrowser.crashed += 1
            self.env.unwrapped.browser.browser.close()
        return self.env.step(action)


def test_a_crashed_browser_records_nothing_of_the_lost_attempt(sandbox, tmp_path):
    task = _wifi()
    backend = ScriptedAgent([("switch", "Wi-Fi"), "Terminate"], model_id="org/scripted agent")
    store = RawStore(tmp_path / "raw")
    _CrashesTheBrowser.crashed = 0
    result = rejection_sample(
        [task.task_id],
        backend,
        Rollouts(k=1, seed=5, max_steps=4, retries=1),
        envs=_sandbox(sandbox.url, [task], wrap=_CrashesTheBrowser),  # a browser of its own
        store=store,
    )
    # The env recorded the crashed attempt as an error; the loop had it left out and
    # replayed the rollout whole on the restarted browser: one trajectory, the success.
    assert _CrashesTheBrowser.crashed == 1
    assert (result.retries, result.outcomes, result.written) == (1, {"success": 1}, 1)
    (traj,) = store.iter_trajectories()
    assert traj.outcome == "success" and traj.num_steps == 2
