"""Offline step-level GRPO with the tiny model on the small reasoning set.

The tiny model's output is noise (its step rewards are all ~0), so the update is
driven by injected reward vectors; the real reward wiring is checked on the
recorded answers themselves.
"""

from __future__ import annotations

import io
import json
import math

import pytest
import torch
from safetensors.torch import load_file

from schemas.actions import Action, ActionType
from schemas.converters import swipe_direction
from schemas.converters.gui_libra import to_gui_libra
from tests.training.conftest import TINY_IMAGE_PIXELS
from training.checkpoint import load_policy
from training.config import RLConfig
from training.data import iter_reasoning_samples
from training.pipes_report import StdoutReporter
from training.rl import (
    CurriculumPrompts,
    is_success,
    rl_step,
    run_rl,
    sample_ground_truth,
    setup,
    step_rewards,
)

SPLITS = ("train", "val", "test")


def _cfg(model, shards, tmp_path, **kw) -> RLConfig:
    base = dict(
        model_path=str(model),
        shards=str(shards),
        out_dir=str(tmp_path / "ckpt"),
        group_size=4,
        prompts_per_step=1,
        batch_size=4,
        max_new_tokens=8,
        max_length=512,
        image_max_pixels=TINY_IMAGE_PIXELS,
        lr=1e-4,
        mode_filter="direct",
        seed=0,
    )
    return RLConfig(**{**base, **kw})


def test_step_rewards_score_recorded_answers(small_reasoning_set):
    samples = [s for split in SPLITS for s in iter_reasoning_samples(small_reasoning_set, split)]
    boxed_taps = swipes = 0
    opposite = {"up": "down", "down": "up", "left": "right", "right": "left"}
    for s in samples:
        j = s.json
        gpt = j["conversations"][-1]["value"]
        # the recorded answer (either mode) earns everything; junk earns nothing
        assert step_rewards([gpt, "I would tap somewhere"], j) == [pytest.approx(1.0), 0.0], s.key
        ref = Action.model_validate(j["action"])
        w, h = j["image"]["width"], j["image"]["height"]
        box = j.get("target_box")
        if box is not None and (
            ref.x is None or not (box[0] <= ref.x <= box[2] and box[1] <= ref.y <= box[3])
        ):
            box = None  # the reward tests the tolerance circle then
        if ref.type == ActionType.TAP and box is not None:
            boxed_taps += 1
            x0, y0, x1, y1 = box
            # inside the target box but far from the recorded point: still a hit
            inside = Action.tap(x0 + 0.02 * (x1 - x0), y0 + 0.02 * (y1 - y0))
            assert math.hypot(inside.x - ref.x, inside.y - ref.y) > 0.04
            outside = Action.tap(min(x1 + 0.05, 1.0), min(y1 + 0.05, 1.0))
            wrong_type = Action(type=ActionType.LONG_PRESS, x=ref.x, y=ref.y, duration_ms=800)
            got = step_rewards([to_gui_libra(a, w, h) for a in (inside, outside, wrong_type)], j)
            assert got == [pytest.approx(1.0), pytest.approx(0.1), pytest.approx(0.1)]
        if ref.type == ActionType.SWIPE:  # scored: direction right, start on the target
            swipes += 1
            gt = sample_ground_truth(j)
            assert gt["direction"] == swipe_direction(ref) and gt["end"] == [ref.x2, ref.y2]
            turned = ref.model_copy(update={"direction": opposite[gt["direction"]]})
            got = step_rewards([to_gui_libra(ref, w, h), to_gui_libra(turned, w, h)], j)
            assert got == [pytest.approx(1.0), pytest.approx(0.1)], s.key
        if j.get("target_box") and ref.x is not None and box is None:
            x0, y0, x1, y1 = j["target_box"]  # the box misses the recorded point: not used
            assert not (x0 <= ref.x <= x1 and y0 <= ref.y <= y1)
    assert boxed_taps > 0 and swipes > 0  # the fixture has taps on a target element, swipes
    assert is_success(1.0) and is_success(0.9) and not is_success(0.1)


def test_run_rl_two_steps_checkpoint_reloads_and_rerun_is_reused(tiny_model, small_reasoning_set, tmp_path):
    real: list[float] = []

    def reward_fn(texts, sample_json):
        real.extend(step_rewards(texts, sample_json))  # the real scores of the noise
        return [1.0, 0.0, 0.0, 0.5]  # what drives the update: p_hat 0.25

    cfg = _cfg(tiny_model, small_reasoning_set, tmp_path, max_steps=2, batch_size=2, beta=0.05)
    report = StdoutReporter(io.StringIO())
    m = run_rl(cfg, report, reward_fn=reward_fn)

    assert len(real) == 8 and all(0.0 <= r <= 1.0 for r in real)
    assert m["checkpoint_id"].startswith("rl-") and m["reused"] is False
    assert (m["steps"], m["rollouts"]) == (2, 8)
    assert m["reward_mean"] == pytest.approx(0.375) and m["success_rate"] == pytest.approx(0.25)
    assert all(math.isfinite(x) for x in m["losses"] + [m["kl"], m["rollouts_per_s"], m["wall_s"]])
    per_step = report.metrics
    assert [s["step"] for s in per_step] == [1, 2]
    assert per_step[0]["kl"] == pytest.approx(0.0, abs=1e-6)  # policy == reference before any update
    assert per_step[1]["kl"] > 0  # one update later they differ; k3 is never negative
    assert per_step[0]["lambda_mean"] == pytest.approx(0.875)

    path = tmp_path / "ckpt" / m["checkpoint_id"]
    assert json.loads((path / "metrics.json").read_text())["checkpoint_id"] == m["checkpoint_id"]
    trained, processor = load_policy(path, "cpu")
    assert processor.tokenizer.eos_token == "<|im_end|>"
    base = load_file(str(tiny_model / "model.safetensors"))
    assert not torch.equal(trained.lm_head.weight, base["lm_head.weight"])

    again = run_rl(cfg, StdoutReporter(io.StringIO()), reward_fn=reward_fn)
    assert again["reused"] is True and again["checkpoint_id"] == m["checkpoint_id"]
    assert len(real) == 8  # nothing sampled the second time


def test_update_raises_logprob_of_the_best_completion(tiny_model, small_reasoning_set, tmp_path):
    cfg = _cfg(tiny_model, small_reasoning_set, tmp_path, batch_size=8)
    state = setup(cfg)
    samples = list(iter_reasoning_samples(small_reasoning_set, "train", "direct"))
    by_len = sorted(samples, key=lambda s: len(s.json["conversations"][1]["value"]))
    pick = [by_len[0], by_len[-1]]  # prompts of different lengths: the short one is left-padded
    stats, roll, rewards = rl_step(state, pick, 1, lambda texts, j: [1.0, 0.0, 0.0, 0.0])

    assert stats["group_success_rates"] == [0.25, 0.25] and stats["lambda_mean"] == pytest.approx(0.875)
    assert stats["ratio_mean"] == pytest.approx(1.0, abs=1e-4)  # on policy: old = sampling policy
    with torch.no_grad():
        after = roll.logprobs(state.model).sum(-1)
    before = roll.old_logp.sum(-1)
    delta = after - before
    for g in range(2):  # the rewarded completion became likelier, the others less likely
        assert delta[4 * g] > 0, delta
        assert delta[4 * g + 1 : 4 * g + 4].mean() < 0, delta

    # old log-probs of a padded row = an independent, unpadded forward pass of that row
    row = next(
        r
        for r in range(roll.num_rows)
        if roll.prompts[roll.prompt_index[r]]["input_ids"].shape[1] < roll.prompt_width
    )
    prompt = roll.prompts[roll.prompt_index[row]]
    gen = roll.gen_mask[row].bool()
    answer = roll.sequences[row][gen]
    ids = torch.cat([prompt["input_ids"][0], answer])[None]
    inputs = {**prompt, "input_ids": ids, "attention_mask": torch.ones_like(ids)}
    if "mm_token_type_ids" in prompt:
        inputs["mm_token_type_ids"] = torch.cat([prompt["mm_token_type_ids"][0], torch.zeros_like(answer)])[
            None
        ]
    with torch.no_grad():  # the frozen reference is the model that sampled
        logits = state.ref_model(**inputs).logits[0, prompt["input_ids"].shape[1] - 1 : -1].float()
    expected = torch.log_softmax(logits, -1).gather(-1, answer[:, None])[:, 0]
    assert torch.allclose(roll.old_logp[row][gen], expected, atol=1e-4)


def test_curriculum_prompts_follow_the_sampler(small_reasoning_set, tmp_path):
    cfg = _cfg("unused", small_reasoning_set, tmp_path, curriculum=True, prompts_per_step=2)
    prompts = CurriculumPrompts(cfg)
    tasks = sorted(prompts.pools)
    assert len(tasks) >= 2 and all(len(p) >= 1 for p in prompts.pools.values())
    batch = prompts.next_batch(2)
    picked = [s.json["task_id"] for s in batch]
    assert len(set(picked)) == 2 and prompts.fallbacks == 0
    # every task solved every time: all become "mastered", none eligible -> uniform fallback
    for _ in range(4):
        prompts.update([(t, True) for t in tasks for _ in range(4)])
    assert prompts.sampler.eligible() == []
    assert len(prompts.next_batch(2)) == 2 and prompts.fallbacks == 1
    with pytest.raises(KeyError, match="unknown task"):
        prompts.update([("no-such-task", True)])


def test_ppo_epochs_reuse_the_rollouts_so_ratio_and_clip_act(tiny_model, small_reasoning_set, tmp_path):
    """Two passes over one batch of rollouts: the first is on policy (ratio 1, nothing
    clipped), the second sees the policy the first step moved, against the same old
    log-probs: the ratio leaves 1 and the clip acts."""
    samples = list(iter_reasoning_samples(small_reasoning_set, "train", "direct"))[:1]
    cfg = _cfg(tiny_model, small_reasoning_set, tmp_path, batch_size=2, lr=1e-2, clip=0.05, ppo_epochs=2)
    stats, roll, _ = rl_step(setup(cfg), samples, 1, lambda texts, j: [1.0, 0.0, 0.0, 0.0])
    first, second = stats["epochs"]
    assert stats["optimizer_steps"] == 2
    assert first["ratio_mean"] == pytest.approx(1.0, abs=1e-4) and first["clip_frac"] == 0.0
    assert abs(second["ratio_mean"] - 1.0) > 1e-2 and second["clip_frac"] > 0.0
    assert stats["clip_frac_last"] == second["clip_frac"]
    assert stats["clip_frac"] == pytest.approx((first["clip_frac"] + second["clip_frac"]) / 2)


def test_minibatches_take_several_steps_and_one_epoch_keeps_the_single_step(
    tiny_model, small_reasoning_set, tmp_path
):
    samples = list(iter_reasoning_samples(small_reasoning_set, "train", "direct"))[:1]
    reward = lambda texts, j: [1.0, 0.0, 0.0, 0.0]  # noqa: E731
    # minibatches of 2 of the 4 rows: two steps in one pass, the second minibatch off policy
    cfg = _cfg(tiny_model, small_reasoning_set, tmp_path, batch_size=1, lr=1e-2, clip=0.05, minibatch_size=2)
    stats, _, _ = rl_step(setup(cfg), samples, 1, reward)
    assert stats["optimizer_steps"] == 2 and len(stats["epochs"]) == 1
    assert abs(stats["ratio_mean"] - 1.0) > 1e-3
    # the defaults (ppo_epochs 1, minibatch_size None): one on-policy step, as before
    cfg = _cfg(tiny_model, small_reasoning_set, tmp_path, batch_size=2, lr=1e-2, clip=0.05)
    assert (cfg.ppo_epochs, cfg.minibatch_size) == (1, None)
    stats, _, _ = rl_step(setup(cfg), samples, 1, reward)
    assert stats["optimizer_steps"] == 1 and stats["clip_frac"] == 0.0
    assert stats["ratio_mean"] == pytest.approx(1.0, abs=1e-4)
    # left at their defaults the new fields do not change the checkpoint id
    assert "ppo_epochs" not in cfg.identity() and "minibatch_size" not in cfg.identity()
    assert _cfg("m", "s", tmp_path, ppo_epochs=2).identity()["ppo_epochs"] == 2
    with pytest.raises(ValueError):
        _cfg("m", "s", tmp_path, ppo_epochs=0)
