"""Offline step-level GRPO on a reasoning set (issue 7, part 2).

    python -m training.rl --config examples/train/rl_tiny.yaml [--set max_steps=4 ...]

Each step takes `prompts_per_step` samples of the split (their system + human
turns, mode "direct" or "reason" by `mode_filter`; None takes both), samples
`group_size` completions of each from the policy (training.generation), and
scores every completion with synthesis.gui_reward (the reward verl and EasyR1 load
too) against the sample's ground truth: 0.1 for a parsable answer + 0.9 when type,
value and point all match (point in the target element's box when it holds the
recorded point, else within the tolerance of the recorded point). A completion "succeeds" when it earns the 0.9
term. Per group: advantages (r - mean) / std, negatives scaled by
lambda = min(lambda0 + kappa * p_hat, 1) with p_hat the group's success rate; the
loss is GRPO's clipped surrogate with beta * k3 KL to the frozen reference model
(ref_model_path, default the starting model). PPO-style: `ppo_epochs` passes over
the step's rollouts, each in shuffled minibatches of `minibatch_size` rows, one
AdamW step per minibatch; the old log-probs stay the sampling policy's, so the
ratio moves and the clip acts from the second step on (ppo_epochs 1 with
minibatch_size None: one on-policy step, ratio 1).

`batch_size` is the number of rows (completions) per forward/backward pass: a
minibatch's rows are split into micro-batches whose losses add up to exactly the
loss of the whole minibatch, so a large model fits.

With `curriculum: true` the prompts are chosen per task by
synthesis.curriculum.CurriculumSampler (tasks the policy solves sometimes, near
a moving difficulty frontier), updated with every group's successes; a bounded
pool of samples per task (POOL_PER_TASK) is kept in memory for it.

The checkpoint lands in <out_dir>/<rl-id>; the id hashes the config, the data's
manifest, the policy and the reference model, so a re-run returns the finished
checkpoint without training. Single process; for several GPUs run one job per
GPU on different seeds (no DDP or FSDP wrapping here).
"""

from __future__ import annotations

import itertools
import random
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from schemas.errors import SchemaError
from synthesis import gui_reward
from synthesis.curriculum import CurriculumSampler

from .checkpoint import (
    checkpoint_id,
    finished_checkpoint,
    load_policy,
    model_fingerprint,
    save_checkpoint,
    shards_fingerprint,
)
from .config import RLConfig
from .data import ReasoningSample, iter_reasoning_samples, shuffled
from .entry import entry_point
from .generation import Rollouts, encode_prompt, sample_completions
from .grpo import group_advantages, grpo_loss, negative_scale, ppo_passes, scale_negatives
from .pipes_report import Reporter, StdoutReporter
from .precision import adamw, forward_context, low_precision_warning, training_dtype

KIND = "rl"
SHUFFLE_BUFFER = 64  # samples held to shuffle the stream (adjacent samples are one trajectory's)
POOL_PER_TASK = 16  # curriculum mode: samples kept per task (reservoir)
DEFAULT_DIFFICULTY = 0.5  # curriculum mode: for samples without a "difficulty" field

RewardFn = Callable[[list[str], dict], list[float]]


# -- rewards ----------------------------------------------------------------------------


def sample_ground_truth(sample_json: dict) -> dict:
    """The sample's ground truth for synthesis.gui_reward: its recorded GUI-Libra answer,
    action, frame and target box (what `trajforge convert --format verl` writes)."""
    try:
        answer = sample_json["answer"]
        size = [int(sample_json["image"]["width"]), int(sample_json["image"]["height"])]
        return gui_reward.ground_truth(
            answer["action_type"],
            answer.get("point_2d"),
            answer.get("value"),
            coords=sample_json.get("coords", "pixels"),  # the set's model profile's coordinates
            size=size,
            target_box=sample_json.get("target_box"),
            action=sample_json["action"],
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise SchemaError(f"cannot read the recorded answer or image size: {exc}", field="answer") from None


def step_rewards(texts: list[str], sample_json: dict) -> list[float]:
    """synthesis.gui_reward's score of each completion against the sample's ground truth."""
    gt = sample_ground_truth(sample_json)
    return [gui_reward.score(t, gt)["score"] for t in texts]


def is_success(reward: float) -> bool:
    """The step reward's match term (0.9) was earned: type, value and point all right."""
    return reward >= gui_reward.W_MATCH - 1e-9


# -- prompts ----------------------------------------------------------------------------


class PromptStream:
    """`next_batch(n)`: the next n samples, passes over the split forever (reshuffled per pass)."""

    def __init__(self, cfg: RLConfig):
        self.cfg = cfg
        self._it = self._forever()

    def _forever(self) -> Iterator[ReasoningSample]:
        for epoch in itertools.count():
            produced = False
            stream = iter_reasoning_samples(self.cfg.shards, self.cfg.split, self.cfg.mode_filter)
            for sample in shuffled(stream, SHUFFLE_BUFFER, self.cfg.seed + epoch):
                produced = True
                yield sample
            if not produced:
                raise ValueError(
                    f"{self.cfg.shards}: no sample in split {self.cfg.split!r} (mode {self.cfg.mode_filter})"
                )

    def next_batch(self, n: int) -> list[ReasoningSample]:
        return list(itertools.islice(self._it, n))

    def update(self, results: list[tuple[str, bool]]) -> None:
        pass


class CurriculumPrompts:
    """Prompts chosen per task by CurriculumSampler; falls back to uniformly drawn tasks
    when none is eligible (all mastered or all failing), and says so in `fallbacks`."""

    def __init__(self, cfg: RLConfig):
        rng = random.Random(cfg.seed)
        pools: dict[str, list[ReasoningSample]] = defaultdict(list)
        seen: dict[str, int] = defaultdict(int)
        difficulty: dict[str, list[float]] = defaultdict(list)
        for sample in iter_reasoning_samples(cfg.shards, cfg.split, cfg.mode_filter):
            task = str(sample.json.get("task_id") or sample.json["trajectory_id"])
            seen[task] += 1
            difficulty[task].append(float(sample.json.get("difficulty", DEFAULT_DIFFICULTY)))
            if len(pools[task]) < POOL_PER_TASK:
                pools[task].append(sample)
            else:  # reservoir sampling: every sample of the task equally likely to stay
                j = rng.randrange(seen[task])
                if j < POOL_PER_TASK:
                    pools[task][j] = sample
        if not pools:
            raise ValueError(f"{cfg.shards}: no sample in split {cfg.split!r} (mode {cfg.mode_filter})")
        self.pools = dict(pools)
        self.sampler = CurriculumSampler(
            {t: min(max(sum(d) / len(d), 0.0), 1.0) for t, d in difficulty.items()},
            seed=cfg.seed,
            batch_size=cfg.prompts_per_step,
        )
        self.rng = rng
        self.fallbacks = 0

    def next_batch(self, n: int) -> list[ReasoningSample]:
        tasks = self.sampler.epoch(n)
        if not tasks:
            self.fallbacks += 1
            ids = sorted(self.pools)
            tasks = self.rng.sample(ids, min(n, len(ids)))
        return [self.rng.choice(self.pools[t]) for t in tasks]

    def update(self, results: list[tuple[str, bool]]) -> None:
        self.sampler.update(results)


def task_of(sample: ReasoningSample) -> str:
    return str(sample.json.get("task_id") or sample.json["trajectory_id"])


# -- one step ---------------------------------------------------------------------------


@dataclass
class RLState:
    cfg: RLConfig
    model: Any
    ref_model: Any | None  # None when beta == 0: no KL term, no reference forward
    processor: Any
    optimizer: torch.optim.Optimizer
    scheduler: Any
    params: list[torch.nn.Parameter]


def _encode(state: RLState, samples: list[ReasoningSample]) -> list[dict[str, torch.Tensor]]:
    cfg = state.cfg
    out = []
    for s in samples:
        try:
            enc = encode_prompt(state.processor, s.json, s.image, cfg.image_max_pixels)
            n = enc["input_ids"].shape[1]
            if n + cfg.max_new_tokens > cfg.max_length:
                raise SchemaError(
                    f"{n} prompt tokens + max_new_tokens={cfg.max_new_tokens} exceed "
                    f"max_length={cfg.max_length}",
                    field="max_length",
                )
        except SchemaError as exc:
            raise exc.located(source=s.source, record=s.key) from None
        out.append(enc)
    return out


def rl_step(
    state: RLState, samples: list[ReasoningSample], step: int, reward_fn: RewardFn = step_rewards
) -> tuple[dict[str, Any], Rollouts, torch.Tensor]:
    """One GRPO update on `samples` (one group of cfg.group_size completions each).

    The update makes cfg.ppo_epochs passes over the rollouts, each in minibatches of
    cfg.minibatch_size rows (None: all of them), one optimiser step per minibatch; the
    old log-probs stay those of the sampling policy, so from the second optimiser step on
    the ratio moves away from 1 and the clip acts. ppo_epochs 1 with minibatch_size None
    is one on-policy step (ratio 1).

    Returns (stats, rollouts, rewards [N]): stats hold loss, policy_loss, kl,
    clip_frac, ratio_mean (averaged over the passes; each pass's figures are measured
    on its minibatches before their own step), clip_frac_last / ratio_mean_last (the
    last pass), epochs (per pass), optimizer_steps, reward_mean, success_rate,
    lambda_mean, grad_norm (mean over the optimiser steps), completion_tokens and the
    per-group success rates.
    """
    cfg, model = state.cfg, state.model
    G = cfg.group_size
    with forward_context(model, cfg.mixed_precision):
        rollouts = sample_completions(
            model,
            state.processor,
            _encode(state, samples),
            G,
            temperature=cfg.temperature,
            max_new_tokens=cfg.max_new_tokens,
            seed=cfg.seed * 100_003 + step,
            logprob_batch=cfg.batch_size,
        )
    rewards, advantages, group_rates, lambdas = [], [], [], []
    for g, sample in enumerate(samples):
        try:
            r = torch.tensor(reward_fn(rollouts.texts[g * G : (g + 1) * G], sample.json), dtype=torch.float32)
        except SchemaError as exc:
            raise exc.located(source=sample.source, record=sample.key) from None
        if r.shape != (G,):
            raise ValueError(f"reward_fn returned {tuple(r.shape)} rewards for a group of {G}")
        p_hat = sum(is_success(float(x)) for x in r) / G
        advantages.append(scale_negatives(group_advantages(r), p_hat, cfg.lambda0, cfg.kappa))
        rewards.append(r)
        group_rates.append(p_hat)
        lambdas.append(negative_scale(p_hat, cfg.lambda0, cfg.kappa))
    rewards_t, adv = torch.cat(rewards), torch.cat(advantages)

    model.train()
    n = rollouts.num_rows
    tokens = float(rollouts.gen_mask.sum())
    # The reference does not move: its log-probs are taken once and serve every pass.
    ref_all = None
    if state.ref_model is not None:
        with torch.no_grad(), forward_context(state.ref_model, cfg.mixed_precision):
            ref_all = torch.cat(
                [
                    rollouts.logprobs(state.ref_model, list(range(s, min(s + cfg.batch_size, n))))
                    .float()
                    .cpu()
                    for s in range(0, n, cfg.batch_size)
                ]
            )

    def backward(m_rows: list[int]) -> dict[str, float]:
        totals: dict[str, float] = defaultdict(float)
        for start in range(0, len(m_rows), cfg.batch_size):
            rows = m_rows[start : start + cfg.batch_size]
            idx = torch.tensor(rows)
            with forward_context(model, cfg.mixed_precision):
                logp = rollouts.logprobs(model, rows)
            device = logp.device
            old = rollouts.old_logp[idx].to(device)
            ref = old if ref_all is None else ref_all[idx].to(device)
            mask = rollouts.gen_mask[idx].to(device)
            loss, st = grpo_loss(logp, old, ref, adv[idx].to(device), mask, clip=cfg.clip, beta=cfg.beta)
            # grpo_loss averages over its rows: weight each micro-batch by its share of
            # the minibatch's rows (the gradient), and of the batch's (the epoch's figures).
            (loss * len(rows) / len(m_rows)).backward()
            chunk_tokens = float(mask.sum())
            totals["loss"] += float(loss.detach()) * len(rows) / n
            totals["policy_loss"] += st["policy_loss"] * len(rows) / n
            totals["kl"] += st["kl"] * len(rows) / n
            totals["clip_frac"] += st["clip_frac"] * chunk_tokens / max(tokens, 1.0)
            totals["ratio_mean"] += st["ratio_mean"] * chunk_tokens / max(tokens, 1.0)
        return totals

    epochs, grad_norms = ppo_passes(
        n,
        backward,
        state.optimizer,
        state.params,
        epochs=cfg.ppo_epochs,
        minibatch_size=cfg.minibatch_size,
        max_grad_norm=cfg.max_grad_norm,
        seed=cfg.seed * 1_000_003 + step,
    )
    state.scheduler.step()  # the schedule counts RL steps (batches of rollouts), not minibatches
    model.eval()
    # The figures of every pass, averaged (one pass: exactly that pass's); per pass in
    # `epochs`, the last pass's as *_last.
    keys = ("loss", "policy_loss", "kl", "clip_frac", "ratio_mean")
    mean = {k: sum(e[k] for e in epochs) / len(epochs) for k in keys}
    stats = {
        **mean,
        "clip_frac_last": epochs[-1]["clip_frac"],
        "ratio_mean_last": epochs[-1]["ratio_mean"],
        "epochs": epochs,
        "optimizer_steps": float(len(grad_norms)),
        "reward_mean": float(rewards_t.mean()),
        "success_rate": sum(is_success(float(x)) for x in rewards_t) / n,
        "lambda_mean": sum(lambdas) / len(lambdas),
        "grad_norm": sum(grad_norms) / len(grad_norms),
        "completion_tokens": tokens,
        "group_success_rates": group_rates,
    }
    return stats, rollouts, rewards_t


# -- the run ----------------------------------------------------------------------------


def rl_checkpoint_id(cfg: RLConfig) -> tuple[str, str, str]:
    """(checkpoint id, policy fingerprint, reference fingerprint)."""
    base = model_fingerprint(cfg.resolved_model_path())
    ref = model_fingerprint(cfg.resolved_ref_model_path())
    ident = {**cfg.identity(), "model_path": base, "ref_model_path": ref, "shards": None}
    return checkpoint_id(KIND, ident, shards_fingerprint(cfg.shards, cfg.split)), base, ref


def setup(cfg: RLConfig) -> RLState:
    """Policy (trainable), frozen reference (unless beta == 0), AdamW with linear warm-up."""
    dtype = training_dtype(cfg.dtype)
    model, processor = load_policy(cfg.resolved_model_path(), cfg.device, dtype, cfg.gradient_checkpointing)
    device = str(next(model.parameters()).device)
    ref_model = None
    if cfg.beta > 0:  # the policy's dtype: KL is 0 before the first update
        ref_model, _ = load_policy(cfg.resolved_ref_model_path(), device, dtype, False)
        ref_model.requires_grad_(False)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = adamw(params, cfg, device)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / cfg.warmup_steps) if cfg.warmup_steps else 1.0
    )
    return RLState(cfg, model, ref_model, processor, optimizer, scheduler, params)


def run_rl(
    cfg: RLConfig, report: Reporter | None = None, reward_fn: RewardFn = step_rewards
) -> dict[str, Any]:
    """Train (or find the finished checkpoint) and return its metrics: checkpoint_id,
    checkpoint_path, steps, reward_mean, reward_first, reward_last, kl, success_rate,
    loss, rollouts, rollouts_per_s, wall_s (plus per-step rewards, kl_mean, reused...)."""
    report = report or StdoutReporter()
    cid, base_id, ref_id = rl_checkpoint_id(cfg)
    out = Path(cfg.out_dir) / cid
    done = finished_checkpoint(out)
    if done is not None:
        report.log(f"{cid}: finished checkpoint at {out}, not training again")
        return {**done, "reused": True}

    random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    state = setup(cfg)
    device = str(next(state.model.parameters()).device)
    prompts = CurriculumPrompts(cfg) if cfg.curriculum else PromptStream(cfg)
    report.log(
        f"{cid}: GRPO of {cfg.resolved_model_path()} on {cfg.shards}/{cfg.split}, "
        f"{cfg.max_steps} steps x {cfg.prompts_per_step} prompts x {cfg.group_size} "
        f"completions, device {device}"
    )
    warning = low_precision_warning(state.model, cfg.lr)
    if warning:
        report.log(f"{cid}: warning: {warning}")

    per_step: list[dict[str, Any]] = []
    all_rewards: list[float] = []
    t0 = time.perf_counter()
    for step in range(1, cfg.max_steps + 1):
        samples = prompts.next_batch(cfg.prompts_per_step)
        stats, _, rewards = rl_step(state, samples, step, reward_fn)
        G = cfg.group_size
        prompts.update(
            [
                (task_of(s), is_success(float(r)))
                for g, s in enumerate(samples)
                for r in rewards[g * G : (g + 1) * G]
            ]
        )
        all_rewards += rewards.tolist()
        per_step.append(stats)
        if step % cfg.log_every == 0 or step == cfg.max_steps:
            report.metric(step, **{k: v for k, v in stats.items() if isinstance(v, float)})
    wall = time.perf_counter() - t0

    rollouts = len(all_rewards)
    metrics = {
        "kind": KIND,
        "checkpoint_id": cid,
        "checkpoint_path": str(out),
        "base_model": str(cfg.resolved_model_path()),
        "base_model_id": base_id,
        "ref_model_id": ref_id,
        "steps": cfg.max_steps,
        "reward_mean": sum(all_rewards) / rollouts,
        "reward_first": per_step[0]["reward_mean"],
        "reward_last": per_step[-1]["reward_mean"],
        "rewards": [s["reward_mean"] for s in per_step],
        "kl": per_step[-1]["kl"],
        "kl_mean": sum(s["kl"] for s in per_step) / len(per_step),
        "success_rate": sum(is_success(r) for r in all_rewards) / rollouts,
        "loss": per_step[-1]["loss"],
        "losses": [s["loss"] for s in per_step],
        "clip_frac": per_step[-1]["clip_frac"],
        "clip_frac_per_epoch": [e["clip_frac"] for e in per_step[-1]["epochs"]],
        "ratio_mean_per_epoch": [e["ratio_mean"] for e in per_step[-1]["epochs"]],
        "ppo_epochs": cfg.ppo_epochs,
        "minibatch_size": cfg.minibatch_size,
        "rollouts": rollouts,
        "rollouts_per_s": rollouts / wall if wall > 0 else 0.0,
        "wall_s": wall,
        "device": device,
        "curriculum_fallbacks": getattr(prompts, "fallbacks", 0),
        "data": {
            "shards": str(cfg.shards),
            "split": cfg.split,
            "fingerprint": shards_fingerprint(cfg.shards, cfg.split),
        },
        "config": cfg.model_dump(mode="json"),
    }
    save_checkpoint(state.model, state.processor, out, metrics)
    report.log(
        f"{cid}: saved {out} (reward {metrics['reward_first']:.3f} -> "
        f"{metrics['reward_last']:.3f}, kl {metrics['kl']:.2e})"
    )
    return {**metrics, "reused": False}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    return entry_point(argv, prog="python -m training.rl", doc=__doc__, config_cls=RLConfig, run=run_rl)


if __name__ == "__main__":
    main()
