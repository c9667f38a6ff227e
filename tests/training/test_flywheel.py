"""One flywheel turn on the real sandbox and Chromium: a checkpoint's rollouts land in the
raw store by verdict, with its id, and only the successes are offered to the next SFT."""

from __future__ import annotations

from tests.export.shard_fixtures import build_store
from tests.synthesis.test_agent import ScriptedAgent
from training.checkpoint import load_policy, save_checkpoint
from training.flywheel import Turn, failure_pool, flywheel_turn, sft_sources
from training.rollouts import resolve_tasks
from trajforge.envs import source_tasks
from trajforge.store.raw import RawStore

from .conftest import TINY_IMAGE_PIXELS
from .sandbox_fixtures import env, sandbox  # noqa: F401

SCRIPTED_ID = "sft-5c71f7ed0a11"
TINY_ID = "online-9e0d4b2c6a77"


def test_one_turn_routes_rollouts_by_verdict_with_the_checkpoint_id(sandbox, env, tiny_model, tmp_path):
    store = RawStore(tmp_path / "raw")
    crawl = build_store(tmp_path / "crawl", n_traj=1, collections=("web",))
    with store.writer("web") as w:  # a crawl collection beside the rollouts
        for tid, traj in crawl.trajectories.items():
            w.add(traj, crawl.steps[tid])
    tasks = resolve_tasks(["settings.wifi"], source_tasks("sandbox", languages=["en"]))
    assert [t.task_id for t in tasks] == ["settings.wifi:en:0"]

    # Success route: a scripted policy taps the wrong switch in rollout 1, the right one in 2.
    scripted = ScriptedAgent(
        [("switch", "Bluetooth"), "Terminate"], [("switch", "Wi-Fi"), "Terminate"], model_id=SCRIPTED_ID
    )
    how = Turn(k=2, server_url=sandbox.url, env=env, max_steps=3, devices=["desktop"], seed=3)
    turn = flywheel_turn(scripted, store, tasks, how)
    assert (turn["rollouts"], turn["verdicts"]) == (2, {"success": 1, "not_success": 1})
    assert (turn["collection"], turn["failed_collection"]) == (
        f"rollouts/{SCRIPTED_ID}",
        f"rollouts-failed/{SCRIPTED_ID}",
    )
    assert turn["success_rate"] == 0.5 and turn["checkpoint_id"] == SCRIPTED_ID

    # Failure route: the tiny model, saved as a checkpoint, acts through online evaluation.
    model, processor = load_policy(tiny_model, "cpu", "float32", False)
    ckpt = save_checkpoint(
        model,
        processor,
        tmp_path / "ckpt" / TINY_ID,
        {"kind": "online", "checkpoint_id": TINY_ID, "base_model": str(tiny_model), "steps": 1},
    )
    evaluation = Turn(
        server_url=sandbox.url,
        env=env,
        max_steps=3,
        devices=["desktop"],
        max_new_tokens=4,
        device="cpu",
        image_max_pixels=TINY_IMAGE_PIXELS,
    )
    ev = flywheel_turn(ckpt, store, ["settings.wifi"], evaluation)
    assert ev["checkpoint_id"] == TINY_ID and ev["success_rate"] == 0.0
    assert ev["verdicts"] == {"success": 0, "not_success": 1}

    by_collection = {c: list(store.iter_trajectories(c)) for c in store.collections()}
    assert sorted(by_collection) == sorted(
        ["web", f"rollouts/{SCRIPTED_ID}", f"rollouts-failed/{SCRIPTED_ID}", f"rollouts-failed/{TINY_ID}"]
    )
    for collection, trajs in by_collection.items():
        if collection == "web":
            continue
        owner = SCRIPTED_ID if SCRIPTED_ID in collection else TINY_ID
        assert len(trajs) == 1
        for t in trajs:
            assert t.source_name == f"sandbox:agent:{owner}" and t.policy == "agent" and t.source == "rollout"
            assert (t.outcome == "success") == collection.startswith("rollouts/")
            assert t.task.template_id == "settings.wifi"
    success = by_collection[f"rollouts/{SCRIPTED_ID}"][0]
    assert success.verified_by == "state"
    steps = [s for s in store.iter_steps(f"rollouts/{SCRIPTED_ID}")]
    assert steps[0].target.name == "Wi-Fi"

    # The next SFT takes crawls and verified successes, never the failure pool.
    assert sft_sources(store) == [f"rollouts/{SCRIPTED_ID}", "web"]
    assert failure_pool(store) == sorted([f"rollouts-failed/{SCRIPTED_ID}", f"rollouts-failed/{TINY_ID}"])
    # A second turn with the same seed finds everything stored: nothing is played again.
    again = flywheel_turn(scripted, store, tasks, how)
    assert (again["written"], again["skipped"], again["verdicts"]["success"]) == (0, 2, 1)
