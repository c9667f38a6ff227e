"""Online RL: one iteration end to end (tiny model, real sandbox + Chromium), and the
GRPO update on a hand-made group of rollouts."""

from __future__ import annotations

import copy
import dataclasses
import json
import math

import pytest
import torch

from tests.vlm.helpers import screenshot
from training.checkpoint import load_policy
from training.online import (
    GRPOUpdate,
    OnlineRLConfig,
    curriculum_outcomes,
    grpo_update,
    ppo_update,
    rollout_reward,
    run_online_rl,
)
from training.policy_backend import PolicyBackend
from trajforge.store.raw import RawStore
from trajforge.vlm.backends import VLMRequest
from trajforge.vlm.messages import image_part, text_part

from .conftest import TINY_IMAGE_PIXELS
from .sandbox_fixtures import env, sandbox  # noqa: F401


def _request(label: str) -> VLMRequest:
    return VLMRequest(
        messages=[
            {"role": "system", "content": "Act."},
            {"role": "user", "content": [image_part(screenshot(64, 48, label)), text_part(f"Task {label}")]},
        ],
        metadata={"step": 0, "width": 64, "height": 48},
    )


def test_grpo_update_on_a_hand_made_group(tiny_model):
    policy, processor = load_policy(tiny_model, "cpu", "float32", False)
    ref = copy.deepcopy(policy)
    backend = PolicyBackend(policy, processor, "ck", max_image_pixels=TINY_IMAGE_PIXELS, record=True)
    group = []
    for i, (reward, success) in enumerate([(1.1, False), (0.0, False), (0.0, False)]):
        backend.generate([_request(str(i))], 4, temperature=1.0, seed=i)
        group.append({"reward": reward, "success": success, "generations": backend.take_generations()})
    before = [p.detach().clone() for p in policy.parameters()]
    how = GRPOUpdate(temperature=1.0, clip=0.2, beta=0.001, lambda0=0.5, kappa=1.5)
    stats = grpo_update(policy, ref, [group, group[:1]], how)
    # Rewards (1.1, 0, 0): advantages (sqrt 2, -1/sqrt 2, -1/sqrt 2); p_hat 0 -> negatives x 0.5.
    # On policy the ratio is 1 and the KL to an identical reference 0: loss = -mean(A).
    adv = [math.sqrt(2), -0.5 / math.sqrt(2), -0.5 / math.sqrt(2)]
    assert stats["groups"] == 1 and stats["sequences"] == 3  # a group of one has no advantage
    assert stats["loss"] == pytest.approx(-sum(adv) / 3, abs=1e-4)
    assert stats["kl"] == pytest.approx(0.0, abs=1e-6) and stats["clip_frac"] == 0.0
    grads = [p.grad for p in policy.parameters() if p.grad is not None]
    assert grads and any(float(g.abs().sum()) > 0 for g in grads)
    assert all(torch.equal(a, b) for a, b in zip(before, policy.parameters()))  # no step taken here


def test_ppo_update_epochs_move_the_ratio_and_one_epoch_is_grpo_update(tiny_model):
    policy, processor = load_policy(tiny_model, "cpu", "float32", False)
    ref = copy.deepcopy(policy)
    backend = PolicyBackend(policy, processor, "ck", max_image_pixels=TINY_IMAGE_PIXELS, record=True)
    group = []
    for i, (reward, success) in enumerate([(1.1, False), (0.0, False), (0.0, False)]):
        backend.generate([_request(str(i))], 4, temperature=1.0, seed=i)
        group.append({"reward": reward, "success": success, "generations": backend.take_generations()})
    how = GRPOUpdate(temperature=1.0, clip=0.05, beta=0.001, lambda0=0.5, kappa=1.5)
    start = copy.deepcopy(policy.state_dict())

    # One epoch, one minibatch: grpo_update's figures, then one optimiser step.
    opt = torch.optim.SGD(policy.parameters(), lr=1.0)
    once = ppo_update(policy, ref, [group], opt, how)
    stepped = copy.deepcopy(policy.state_dict())
    policy.load_state_dict(start)
    plain = grpo_update(policy, ref, [group], how)
    assert once["optimizer_steps"] == 1 and once["sequences"] == plain["sequences"] == 3
    assert once["loss"] == pytest.approx(plain["loss"], abs=1e-6) and once["clip_frac"] == 0.0
    torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
    torch.optim.SGD(policy.parameters(), lr=1.0).step()
    assert all(torch.allclose(stepped[k], v, atol=1e-6) for k, v in policy.state_dict().items())

    # Two epochs: the second sees the moved policy against the same old log-probs.
    policy.load_state_dict(start)
    opt = torch.optim.AdamW(policy.parameters(), lr=1e-2)
    twice = ppo_update(policy, ref, [group], opt, dataclasses.replace(how, ppo_epochs=2))
    first, second = twice["epochs"]
    assert twice["optimizer_steps"] == 2
    assert first["ratio_mean"] == pytest.approx(1.0, abs=1e-4) and first["clip_frac"] == 0.0
    assert abs(second["ratio_mean"] - 1.0) > 1e-2 and second["clip_frac"] > 0.0


def test_rollout_reward_is_the_envs_composite_reward_and_an_env_failure_is_none():
    from training.rollouts import Rollout, RolloutResult

    parts = {"success": True, "format_ok": True, "reflection_ok": False, "invalid": False, "reward": 1.1}
    ok = Rollout("t", 0, "r0", 1, "success", reward=parts)
    failed = Rollout("t", 1, "r1", 2, "failure", reward={**parts, "success": False, "reward": 0.0})
    lost = Rollout("t", 2, "r2", 3, "error")  # the env failed: no sample of the policy's
    assert [rollout_reward(r) for r in (ok, failed, lost)] == [pytest.approx(1.1), 0.0, None]
    # The curriculum folds in the verified rates (stored rollouts of a re-run included).
    result = RolloutResult("m", "rollouts/m", "rollouts-failed/m", 3, rates={"t": (1, 3), "u": (0, 3)})
    assert curriculum_outcomes(result) == [("t", True), ("t", False), ("t", False)] + [("u", False)] * 3


def test_one_online_iteration_records_rollouts_and_saves_a_checkpoint(tiny_model, sandbox, env, tmp_path):
    cfg = OnlineRLConfig(
        model_path=str(tiny_model),
        out_dir=str(tmp_path / "ckpt"),
        store=str(tmp_path / "raw"),
        server_url=sandbox.url,
        tasks=["settings.wifi"],
        devices=["desktop"],
        k=2,
        iterations=1,
        tasks_per_iteration=1,
        max_steps=3,
        max_new_tokens=4,
        device="cpu",
        image_max_pixels=TINY_IMAGE_PIXELS,
        lr=1e-3,
    )
    m = run_online_rl(cfg, env=env)
    cid = m["checkpoint_id"]
    assert cid.startswith("online-") and len(cid) == len("online-") + 12
    assert (m["iterations"], m["rollouts"]) == (1, 2)
    for key in ("success_rate", "reward_mean", "kl", "loss", "rollouts_per_s", "wall_s"):
        assert math.isfinite(m[key]), key
    assert m["rollouts_per_s"] > 0 and m["history"][0]["sequences"] >= 2
    saved = json.loads((tmp_path / "ckpt" / cid / "metrics.json").read_text())
    assert saved["checkpoint_id"] == cid and saved["kind"] == "online"
    assert (tmp_path / "ckpt" / cid / "config.json").is_file()
    store = RawStore(tmp_path / "raw")
    trajs = list(store.iter_trajectories())
    assert len(trajs) == 2 and set(m["collections"]) >= {c for c in store.collections()}
    for t in trajs:
        assert t.source_name == f"sandbox:agent:{cid}@it0" and t.policy == "agent" and t.source == "rollout"
        assert t.task.template_id == "settings.wifi"
        # The tiny model's noise never parses: every answer a format failure, nothing
        # executed, the budget runs out and the state verifier says failure.
        assert t.outcome == "failure" and t.num_steps == 0 and t.verified_by == "state"
    # Each rollout's max_steps answers are the update's sequences; its reward the env's.
    assert m["history"][0]["sequences"] == 2 * 3 and m["history"][0]["reward_mean"] == 0.0
    assert m["history"][0]["success_rates"] == {trajs[0].task.task_id: 0.0}
    assert store.collections() == [f"rollouts-failed/{cid}@it0"]
    # The same config again finds the finished checkpoint: nothing is trained or played.
    again = run_online_rl(cfg, env=env)
    assert again["reused"] and again["checkpoint_id"] == cid
    assert len(list(store.iter_trajectories())) == 2


def test_rollouts_on_a_local_pool_of_two_browsers_are_the_sequential_ones(tiny_model, sandbox, env, tmp_path):
    # rollout_envs: 2 -> a WebEnvPool(2) plays the iteration's 2 x 2 rollouts at once.
    base = dict(
        model_path=str(tiny_model),
        server_url=sandbox.url,
        tasks=["settings.wifi", "notes.create"],
        devices=["desktop"],
        k=2,
        iterations=1,
        tasks_per_iteration=2,
        max_steps=3,
        max_new_tokens=4,
        device="cpu",
        image_max_pixels=TINY_IMAGE_PIXELS,
        lr=1e-3,
    )
    seq = run_online_rl(
        OnlineRLConfig(out_dir=str(tmp_path / "a"), store=str(tmp_path / "a/raw"), **base), env=env
    )
    pooled = run_online_rl(
        OnlineRLConfig(out_dir=str(tmp_path / "b"), rollout_envs=2, store=str(tmp_path / "b/raw"), **base)
    )
    assert pooled["checkpoint_id"] == seq["checkpoint_id"] and seq["rollout_pool"] is None
    assert pooled["rollout_pool"]["browsers"] == 2 and pooled["rollout_pool"]["leases"] == 4

    def rollouts(root):
        store = RawStore(root)
        shots = {(s.trajectory_id, s.index): (s.action, s.screenshot) for s in store.iter_steps()}
        return {t.trajectory_id: (t.seed, t.outcome, t.device) for t in store.iter_trajectories()}, shots

    assert rollouts(tmp_path / "b/raw") == rollouts(tmp_path / "a/raw")
    figures = ("rollouts", "trained_rollouts", "sequences", "groups", "loss", "kl")
    assert {k: pooled["history"][0][k] for k in figures} == {k: seq["history"][0][k] for k in figures}
