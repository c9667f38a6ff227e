"""Rejection sampling on real Chromium and the real sandbox, with a scripted agent.

The agent's first rollout taps the wrong switch, its second the right one: the
state verifier must keep exactly one, per the task's template.
"""

from __future__ import annotations

import pytest

from sandbox.environment import SOURCE_NAME
from sandbox.rollouts import Rollouts, model_slug, rejection_sample, rollout_seed
from sandbox.tasks import build_catalog
from schemas.records import trajectory_id_for
from trajforge.store.audit import read_audit
from trajforge.store.raw import RawStore

from .test_agent import ScriptedAgent


class _Refuses:
    """A backend that must not be asked: everything is stored already."""

    model_id = "org/scripted agent"

    def generate(self, *a, **kw):
        raise AssertionError("a re-run asked the model again")


def test_k_rollouts_rates_collections_and_idempotent_rerun(sandbox, env, tmp_path):
    task = next(t for t in build_catalog(1, ("en",)) if t.template_id == "settings.wifi")
    backend = ScriptedAgent(
        [("switch", "Bluetooth"), "Terminate"],
        [("switch", "Wi-Fi"), "Terminate"],
        model_id="org/scripted agent",
    )
    store = RawStore(tmp_path / "raw")
    result = rejection_sample(
        [task],
        backend,
        Rollouts(server_url=sandbox.url, k=2, seed=7, max_steps=5, devices=["desktop"]),
        store=store,
        env=env,
    )
    slug = model_slug("org/scripted agent")
    assert slug == "org_scripted_agent"
    assert (result.collection, result.failed_collection) == (f"rollouts/{slug}", f"rollouts-failed/{slug}")
    assert result.rates == {task.task_id: (1, 2)}
    assert result.success_rates() == {task.task_id: 0.5}
    assert (result.written, result.skipped, result.outcomes) == (2, 0, {"failure": 1, "success": 1})
    assert result.steps == 4 and result.unparseable_answers == 0 and result.blocked_actions == 0

    kept = list(store.iter_trajectories(result.collection))
    failed = list(store.iter_trajectories(result.failed_collection))
    assert len(kept) == 1 and len(failed) == 1
    seeds = [rollout_seed(7, task.task_id, i) for i in range(2)]
    assert seeds[0] != seeds[1]
    assert kept[0].seed == seeds[1] and failed[0].seed == seeds[0]
    for t in kept + failed:
        assert t.policy == "agent" and t.source_name == "sandbox:agent:org/scripted agent"
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
    audit = read_audit(store.root / "audit" / f"{result.collection}.jsonl")
    assert len(audit) == 4 and {r["decision"] for r in audit} == {"allowed"}

    # Re-run: nothing is played again, the rates are read back from the store.
    again = rejection_sample(
        [task],
        _Refuses(),
        Rollouts(
            server_url=sandbox.url,
            k=2,
            seed=7,
            collection=result.collection,
            failed_collection=result.failed_collection,
        ),
        store=store,
        env=env,
    )
    assert again.rates == {task.task_id: (1, 2)}
    assert (again.written, again.skipped) == (0, 2)
    assert len(list(store.iter_trajectories(result.collection))) == 1
    assert len(list(store.iter_trajectories(result.failed_collection))) == 1


def test_rejection_sampling_refuses_tasks_without_a_verifier(tmp_path):
    task = next(t for t in build_catalog(1, ("en",)) if t.template_id == "settings.wifi")
    free = task.model_copy(update={"template_id": None})
    store = RawStore(tmp_path / "raw")
    with pytest.raises(ValueError, match="needs a known template_id"):
        rejection_sample(
            [task, free], _Refuses(), Rollouts(server_url="http://127.0.0.1:9", k=2), store=store
        )
    with pytest.raises(ValueError, match="k=0"):
        rejection_sample([task], _Refuses(), Rollouts(server_url="http://127.0.0.1:9", k=0), store=store)
    assert store.collections() == []


class _Broken:
    """A model that fails (an out-of-memory, a dead endpoint): not the env's fault."""

    model_id = "org/broken"

    def generate(self, *a, **kw):
        raise RuntimeError("CUDA out of memory (planted)")


def test_a_model_error_stops_rejection_sampling_on_a_pool_as_on_one_browser(sandbox, env, tmp_path):
    from crawlers.allowlist import Allowlist
    from crawlers.crawl_browser_pool import WebEnvPool

    task = next(t for t in build_catalog(1, ("en",)) if t.template_id == "settings.wifi")
    how = Rollouts(server_url=sandbox.url, k=2, seed=7, max_steps=3, devices=["desktop"])
    with pytest.raises(RuntimeError, match="out of memory"):
        rejection_sample([task], _Broken(), how, store=RawStore(tmp_path / "one"), env=env)
    store = RawStore(tmp_path / "pool")
    with (
        WebEnvPool(2, request_filter=Allowlist([sandbox.url])) as pool,
        pytest.raises(RuntimeError, match="out of memory"),
    ):
        rejection_sample([task], _Broken(), how, store=store, pool=pool)
    assert list(store.iter_trajectories("rollouts/org_broken")) == []  # no error rollouts kept
