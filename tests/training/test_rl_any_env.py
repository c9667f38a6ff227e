"""trajforge's own RL loops on third-party apps, through the Gym API: TiddlyWiki and Datasette.

The environment files are the examples' (examples/environments/), pointed at the
apps this test run started (tests/thirdparty/apps.py). Nothing here knows the
sandbox: rejection sampling, online RL with its curriculum and online evaluation
take the files by path and play them with the tiny random-weight model (its
answers are noise, so it mostly fails: the tests check that the figures agree with
one another and with the store, not that it succeeds) or, for a verified success on
a third-party app, a scripted backend.
"""

from __future__ import annotations

from collections import Counter

import pytest

from synthesis.curriculum import CurriculumSampler
from tests.synthesis.test_agent import ScriptedAgent
from tests.thirdparty.apps import ENVIRONMENTS
from training.checkpoint import load_policy
from training.online import OnlineRLConfig, curriculum_outcomes, pick_tasks, run_online_rl
from training.policy_backend import PolicyBackend
from training.rollouts import Rollouts, rejection_sample, rollout_id, rollout_seed
from trajforge.envs import env_factories
from trajforge.store.raw import RawStore

from .conftest import TINY_IMAGE_PIXELS

TASKS = {"open-control-panel": "tiddlywiki", "open-cities": "datasette"}


@pytest.fixture(scope="module")
def env_files(tiddlywiki_url, datasette_url):
    """{name: the example environment file}, its ${..._URL} pointing at this run's app."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TIDDLYWIKI_URL", tiddlywiki_url)
        mp.setenv("DATASETTE_URL", datasette_url)
        yield {name: str(ENVIRONMENTS / f"{name}.yaml") for name in ("tiddlywiki", "datasette")}


@pytest.fixture(scope="module")
def tiny_backend(tiny_model):
    policy, processor = load_policy(tiny_model, "cpu", "float32", False)
    return PolicyBackend(policy, processor, "tiny-ck", max_image_pixels=TINY_IMAGE_PIXELS)


def _stored(store: RawStore, collections: list[str]) -> dict[str, list]:
    """task_id -> its stored trajectories (with the collection each is in)."""
    out: dict[str, list] = {}
    for c in collections:
        for t in store.iter_trajectories(c):
            out.setdefault(t.task.task_id, []).append((c, t))
    return out


def test_k8_rollouts_per_task_feed_the_curriculum(env_files, tiny_backend, tmp_path):
    store = RawStore(tmp_path / "raw")
    k = 8
    with env_factories([env_files["tiddlywiki"], env_files["datasette"]], languages=["en"]) as factories:
        assert [f.name for f in factories] == ["tiddlywiki", "datasette"]
        result = rejection_sample(
            list(TASKS),
            tiny_backend,
            Rollouts(k=k, seed=5, max_steps=1, max_new_tokens=8),
            envs=factories,
            store=store,
        )
    # K rollouts per task, each recorded once, as a rollout of the model, by verdict.
    assert set(result.rates) == set(TASKS) and result.k == k
    assert (result.written, result.skipped, len(result.rollouts)) == (2 * k, 0, 2 * k)
    stored = _stored(store, [result.collection, result.failed_collection])
    assert set(stored) == set(TASKS)
    for task_id, env_name in TASKS.items():
        mine = stored[task_id]
        assert len(mine) == k
        seeds = sorted(t.seed for _, t in mine)
        assert seeds == sorted(rollout_seed(5, task_id, i) for i in range(k))
        for collection, t in mine:
            assert (t.source, t.policy, t.source_name) == ("rollout", "agent", f"{env_name}:agent:tiny-ck")
            assert t.trajectory_id == rollout_id(env_name, task_id, "tiny-ck", t.seed)
            assert t.verified_by == "js" and t.outcome in ("success", "failure")
            assert (collection == result.collection) == (t.outcome == "success")
        # The success rate is the verifier's successes over k, as the store holds them.
        successes = sum(t.outcome == "success" for _, t in mine)
        assert result.rates[task_id] == (successes, k)
        assert result.success_rates()[task_id] == successes / k
    # Every answer either ran (a recorded step) or was a format failure (nothing ran).
    by_tid = {t.trajectory_id: t for ts in stored.values() for _, t in ts}
    for r in result.rollouts:
        assert r.answers == 1 and r.answers == r.steps + r.format_errors
        assert by_tid[r.trajectory_id].num_steps == r.steps and r.outcome == by_tid[r.trajectory_id].outcome
    assert result.unparseable_answers == sum(r.format_errors for r in result.rollouts)
    assert Counter(r.outcome for r in result.rollouts) == Counter(result.outcomes)

    # The rates feed the curriculum, whose estimates and frontier move as its rule says.
    sampler = CurriculumSampler({t: 0.5 for t in TASKS}, seed=0, batch_size=2)
    assert sampler.frontier == 0.5 and sampler.eligible() == sorted(TASKS)
    outcomes = curriculum_outcomes(result)
    assert Counter(t for t, _ in outcomes) == {t: k for t in TASKS}
    sampler.update(outcomes)
    rates = result.rates
    for task_id in TASKS:  # (successes + prior * prior_count) / (attempts + prior_count)
        assert sampler.success_estimate(task_id) == pytest.approx((rates[task_id][0] + 0.5 * 2) / (k + 2))
    mean = sum(s for s, _ in rates.values()) / (2 * k)
    assert sampler.frontier == pytest.approx(min(max(0.5 + 0.5 * (mean - 0.5), 0.0), 1.0))
    eligible = sorted(t for t in TASKS if 0.3 <= sampler.success_estimate(t) <= 0.7)
    assert sampler.eligible() == eligible
    # Nothing in the band (the tiny model's usual lot): the next batch is the tasks nearest it.
    assert sorted(pick_tasks(sampler, 2)) == sorted(TASKS)


def test_a_scripted_agent_keeps_one_verified_success_on_tiddlywiki(env_files, tmp_path):
    backend = ScriptedAgent(["Terminate"], [("button", "control panel"), "Terminate"], model_id="scripted")
    store = RawStore(tmp_path / "raw")
    result = rejection_sample(
        ["open-control-panel"],
        backend,
        Rollouts(k=2, seed=1, max_steps=3),
        envs=env_files["tiddlywiki"],
        store=store,
    )
    assert result.rates == {"open-control-panel": (1, 2)} and result.outcomes == {"failure": 1, "success": 1}
    (kept,) = store.iter_trajectories("rollouts/scripted")
    (failed,) = store.iter_trajectories("rollouts-failed/scripted")
    assert kept.verified_by == failed.verified_by == "js" and kept.source_name == "tiddlywiki:agent:scripted"
    assert [s.target.name for s in store.iter_steps("rollouts/scripted")][0].lower() == "control panel"


def test_online_rl_with_the_curriculum_on_two_environment_files(env_files, tiny_model, tmp_path):
    cfg = OnlineRLConfig(
        model_path=str(tiny_model),
        out_dir=str(tmp_path / "ckpt"),
        store=str(tmp_path / "raw"),
        envs=[env_files["tiddlywiki"], env_files["datasette"]],
        tasks=list(TASKS),
        k=2,
        iterations=2,
        tasks_per_iteration=2,
        max_steps=1,
        max_new_tokens=8,
        device="cpu",
        image_max_pixels=TINY_IMAGE_PIXELS,
        lr=1e-3,
    )
    m = run_online_rl(cfg)
    cid = m["checkpoint_id"]
    assert (m["iterations"], m["rollouts"], m["envs"]) == (2, 2 * 2 * 2, cfg.envs)
    store = RawStore(tmp_path / "raw")
    frontier = 0.5  # no crawl covers the tasks: difficulty 0.5 each, the frontier starts there
    for it, row in enumerate(m["history"]):
        collections = [f"rollouts/{cid}@it{it}", f"rollouts-failed/{cid}@it{it}"]
        stored = _stored(store, collections)
        assert set(stored) == set(TASKS) == set(row["success_rates"])
        for task_id, trajs in stored.items():
            assert len(trajs) == 2
            assert row["success_rates"][task_id] == sum(t.outcome == "success" for _, t in trajs) / 2
        # Every rollout trains (none lost its env); the frontier moves by rate * (mean - target).
        assert row["trained_rollouts"] == 4 and row["sequences"] == 4
        mean = sum(row["success_rates"].values()) / 2
        assert row["success_rate"] == pytest.approx(mean)
        frontier = min(max(frontier + 0.5 * (mean - 0.5), 0.0), 1.0)
        assert row["curriculum_frontier"] == pytest.approx(frontier)


def test_online_evaluation_on_an_environment_file(env_files, tiny_model, tmp_path):
    from training.evaluate import EvalConfig, eval_tasks, run_eval

    base = dict(model_path=str(tiny_model), store=str(tmp_path / "raw"), envs=[env_files["datasette"]])
    # An environment file's tasks have no template to hold out: name them (or "catalog").
    with pytest.raises(ValueError, match="no held-out template"):
        eval_tasks(EvalConfig(**base))
    cfg = EvalConfig(
        **base,
        tasks=["open-cities", "paris-row"],
        k=1,
        max_steps=1,
        max_new_tokens=8,
        device="cpu",
        image_max_pixels=TINY_IMAGE_PIXELS,
    )
    m = run_eval(cfg)
    store = RawStore(tmp_path / "raw")
    trajs = list(store.iter_trajectories())
    assert m["online_rollouts"] == len(trajs) == 2 and m["online_templates"] == "open-cities,paris-row"
    assert m["success_rate"] == sum(t.outcome == "success" for t in trajs) / 2
    assert {t.source_name for t in trajs} == {f"datasette:agent:{m['checkpoint_id']}"}
