"""Online RL (UI-TARS-2's last stage): the policy plays environments, GRPO over each task's group.

What it plays is named in `envs`: environment files (examples/environments/*.yaml,
yours) and/or "sandbox" (the embedded sandbox at `server_url`, else started in
the process), reached only through the Gym API (trajforge.envs.env_factories);
`tasks` picks among their tasks (task ids, template ids, or "catalog": all).

One iteration:
1. the curriculum (synthesis.curriculum.CurriculumSampler; difficulty from
   synthesis.difficulty over the store's crawls where they cover a task, else
   the prior 0.5) picks `tasks_per_iteration` tasks;
2. each is played k times by the current policy through
   training.rollouts.rejection_sample (a training.agent.TextAgent over a recording
   PolicyBackend with the reasoning set's prompt, its text answers parsed by the
   env in its model profile), with the policy id "<checkpoint id>@it<i>": the env's
   verifier decides each rollout, and every rollout lands in the raw store, verified
   successes in rollouts/<id>, the rest in rollouts-failed/<id> (the flywheel's routing);
3. trajectory reward = the env's composite reward (info["episode_reward_parts"]:
   synthesis.rewards.composite_reward of the verifier's success, format = every
   answer parsed, reflection = a reflection that corrected a step, invalid = a guard
   block); a rollout whose env failed (outcome error) is no sample of the policy's
   and stays out of the update;
4. GRPO per task group (training.grpo): advantages normalised in the group,
   negatives scaled by lambda = min(lambda0 + kappa * p_hat, 1); every answer
   token of every step of a rollout shares its advantage; each step's answer is
   one sequence of the group's loss (per-step mean, then mean over the group's
   steps, then over groups), k3 KL to the frozen reference model; `ppo_epochs`
   passes over the sequences in minibatches of `minibatch_size`, one optimiser step
   per minibatch (default 1 x all: one on-policy step, ratio 1; more steps make the
   ratio move from the policy's pre-update log-probs and the clip act);
5. the sampler folds in each task's verified successes out of k.
The trained policy is saved as checkpoint "online-<12 hex>".

`python -m training.online --config X.yaml` runs it (see examples/train/online_tiny.yaml).
One learner, one device; the update runs between iterations (bf16 + gradient
checkpointing on cuda via training.checkpoint.load_policy). An iteration's k x tasks
rollouts play one after another on one env per environment (`rollout_envs: 1`, the
default: a headless Chromium each), or at once on a pool (trajforge.envs.browser_pool):
`rollout_envs: N` local browsers, or, with `ray_address`, N Ray actors holding one
browser each (placed on nodes declaring the `browser` resource; the environments
must be reachable from them). `run_online_rl(cfg, pool=...)` takes a pool built by
the caller. The model stays here: every generation is made on this process (one at a
time, seeded per step), so a rollout's answers, and hence its trajectory, ids and
the update, are the sequential path's whatever the pool; each rollout's generations
are taken by its trajectory id. A rollout whose env failed is replayed whole.
A rollout that is already stored (a re-run of an interrupted run) is not
played again and so has no log-probs: it counts for the curriculum, not the gradient.
"""

from __future__ import annotations

import logging
import math
import time
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal

import torch
from pydantic import field_validator

from schemas.records import Task
from synthesis.curriculum import CurriculumSampler, CurriculumSettings
from training.config import PPOReuse, resolve_model_path
from training.rollouts import (
    FAILED_PREFIX,
    SUCCESS_PREFIX,
    Rollout,
    RolloutResult,
    Rollouts,
    rejection_sample,
    resolve_tasks,
)
from trajforge.envs import SANDBOX, browser_pool, env_factories, source_tasks
from trajforge.store.raw import RawStore

log = logging.getLogger(__name__)


class OnlineRLConfig(PPOReuse):
    """Online GRPO in environments. `max_steps` is the agent's step budget per episode."""

    ref_model_path: str | None = None  # None = model_path
    store: str  # raw store root: the rollouts are recorded there
    # Environment files and/or "sandbox" (trajforge.envs.env_factories).
    envs: list[str] = [SANDBOX]
    server_url: str | None = None  # the sandbox's; None = start it in this process
    # Task ids or template ids of the envs' tasks, or "catalog" (all of them).
    tasks: list[str] | Literal["catalog"] = "catalog"
    languages: list[str] = ["en"]  # tasks in these languages (the sandbox's catalog too)
    # The screen: the first profile named of the right family (None: each env's own;
    # the sandbox's phone apps on a phone).
    devices: list[str] | None = None
    k: int = 8
    iterations: int = 1
    tasks_per_iteration: int = 4
    max_steps: int = 15
    max_new_tokens: int = 128
    beta: float = 0.001
    clip: float = 0.2
    lambda0: float = 0.5
    kappa: float = 1.5
    temperature: float = 1.0
    set_mode: Literal["direct", "reason"] = "direct"
    curriculum_low: float = 0.3
    curriculum_high: float = 0.7
    # Where the rollouts play (see the module docstring): 1 = one browser, in turn;
    # N = N envs at once, local browsers or, with ray_address ("auto", "ray://head:10001",
    # "host:6379"), Ray actors on nodes with the `browser` resource.
    rollout_envs: int = 1
    ray_address: str | None = None
    # ppo_epochs / minibatch_size (PPOReuse): passes over each iteration's answer sequences.

    @field_validator("k")
    @classmethod
    def _group(cls, v: int) -> int:
        if v < 2:
            raise ValueError("must be >= 2 (advantages compare the rollouts of one task)")
        return v

    @field_validator("iterations", "tasks_per_iteration", "rollout_envs")
    @classmethod
    def _positive_count(cls, v: int) -> int:
        if v < 1:
            raise ValueError("must be >= 1")
        return v

    def identity(self) -> dict[str, Any]:
        # Where the rollouts go and which server and envs play them do not change what is
        # trained (the rollouts are the same on a pool as in one browser).
        return {
            k: v
            for k, v in super().identity().items()
            if k not in ("store", "server_url", "rollout_envs", "ray_address")
        }


def task_difficulty(store: RawStore, tasks: list[Task]) -> dict[str, float]:
    """task_id -> difficulty in [0, 1]: synthesis.difficulty's score over the store's
    crawls (rollout collections left out) where they hold the task, else the difficulty
    its task file declares (a synthesised task's, params.difficulty), else 0.5."""
    from synthesis.difficulty import difficulty_rows

    crawls = [c for c in store.collections() if not c.startswith((SUCCESS_PREFIX, FAILED_PREFIX))]
    scores = {}
    if crawls:
        scores = {r["task_id"]: r["score"] for r in difficulty_rows(store, collections=crawls)}
    return {
        t.task_id: min(max(float(scores.get(t.task_id, t.params.get("difficulty", 0.5))), 0.0), 1.0)
        for t in tasks
    }


def pick_tasks(sampler: CurriculumSampler, n: int) -> list[str]:
    """The curriculum's batch; when no task is in the band, the n tasks whose success
    estimate is nearest its middle (the run goes on rather than stalling)."""
    batch = sampler.epoch(n)
    if batch:
        return batch
    mid = (sampler.low + sampler.high) / 2
    return sorted(sampler.difficulty, key=lambda t: (abs(sampler.success_estimate(t) - mid), t))[:n]


def _rollout_generations(gens: list) -> list:
    """The generations of the last attempt (a retried episode replays from step 0)."""
    starts = [i for i, g in enumerate(gens) if g.request.metadata.get("step") == 0]
    return gens[starts[-1] :] if starts else gens


def _sequences(groups: list[list[dict]], lambda0: float, kappa: float) -> tuple[list[tuple], list, float]:
    """(sequences, usable groups, mean |advantage|): one (generation, answer ids, advantage,
    weight) per answer of every step of every rollout of a group of two or more; the
    weights (1 / (the group's sequences x the groups)) add up to 1."""
    from training.grpo import group_advantages, scale_negatives

    usable = [g for g in groups if len(g) >= 2]
    seqs, adv_abs = [], 0.0
    for group in usable:
        rewards = torch.tensor([r["reward"] for r in group], dtype=torch.float32)
        p_hat = sum(r["success"] for r in group) / len(group)
        adv = scale_negatives(group_advantages(rewards), p_hat, lambda0, kappa)
        mine = [
            (gen, ids, float(a))
            for r, a in zip(group, adv)
            for gen in r["generations"]
            for ids in gen.answer_ids
            if len(ids)
        ]
        seqs += [(gen, ids, a, 1.0 / (len(mine) * len(usable))) for gen, ids, a in mine]
        adv_abs += float(adv.abs().mean()) / len(usable)
    return seqs, usable, adv_abs


@dataclass(frozen=True)
class GRPOUpdate:
    """How one iteration's rollouts update the policy (OnlineRLConfig's fields of that name;
    ppo_epochs / minibatch_size as training.config.PPOReuse)."""

    temperature: float
    clip: float
    beta: float
    lambda0: float
    kappa: float
    ppo_epochs: int = 1
    minibatch_size: int | None = None
    max_grad_norm: float = 1.0
    mixed_precision: bool = True

    @classmethod
    def of(cls, cfg: OnlineRLConfig) -> GRPOUpdate:
        return cls(**{f.name: getattr(cfg, f.name) for f in fields(cls)})


UPDATE_FIGURES = ("loss", "kl", "policy_loss", "clip_frac", "ratio_mean")


def _accumulate(
    policy,
    ref,
    seqs: list[tuple],
    how: GRPOUpdate,
    ids: list[int] | None = None,
    *,
    old: dict[int, torch.Tensor] | None = None,
    ref_cache: dict[int, torch.Tensor] | None = None,
    scale: float = 1.0,
) -> dict[str, float]:
    """Backward of the GRPO loss of `seqs[i]` for i in `ids` (all by default), each scaled by
    its weight x `scale`; figures weighted by the sequences' weights. `old` (by index): the
    old log-probs, else this pass's own (detached: ratio 1); `ref_cache` keeps the
    reference's log-probs between passes."""
    from training.grpo import grpo_loss
    from training.policy_backend import answer_logprobs
    from training.precision import forward_context

    totals: dict[str, float] = defaultdict(float)
    for i in range(len(seqs)) if ids is None else ids:
        gen, answer, a, weight = seqs[i]
        with forward_context(policy, how.mixed_precision):
            logp = answer_logprobs(policy, gen.prompt, answer, how.temperature)[None]
        ref_logp = None if ref_cache is None else ref_cache.get(i)
        if ref_logp is None:
            with torch.no_grad(), forward_context(ref, how.mixed_precision):
                ref_logp = answer_logprobs(ref, gen.prompt, answer, how.temperature)[None]
            if ref_cache is not None:
                ref_cache[i] = ref_logp
        old_logp = logp.detach() if old is None else old[i].to(logp.device)
        loss, stats = grpo_loss(
            logp,
            old_logp,
            ref_logp,
            torch.tensor([a], device=logp.device),
            torch.ones_like(logp),
            clip=how.clip,
            beta=how.beta,
        )
        (loss * weight * scale).backward()
        totals["loss"] += float(loss.detach()) * weight
        for key in ("kl", "policy_loss", "clip_frac", "ratio_mean"):
            totals[key] += stats[key] * weight
        totals["sequences"] += 1
    return totals


def grpo_update(policy, ref, groups: list[list[dict]], how: GRPOUpdate) -> dict[str, float]:
    """Accumulate the GRPO gradient of `groups` (rollouts of one task each: dicts with
    reward, success, generations) into `policy`; returns loss/kl/... averaged. No step.

    Each step's answer is one sequence: its loss is the per-token GRPO loss averaged
    over its tokens (training.grpo.grpo_loss on a group of one), the group's loss the
    mean over its sequences, the total the mean over groups. Backward runs per
    sequence (scaled), so memory holds one sequence's graph at a time. On policy:
    the old log-probs are this pass's own, the ratio is 1.
    """
    seqs, usable, adv_abs = _sequences(groups, how.lambda0, how.kappa)
    totals = _accumulate(policy, ref, seqs, how)
    return {
        "groups": len(usable),
        "sequences": len(seqs),
        "advantage_abs": adv_abs,
        **{k: totals.get(k, 0.0) for k in ("loss", "kl", "policy_loss", "clip_frac")},
    }


def ppo_update(
    policy, ref, groups: list[list[dict]], optimizer, how: GRPOUpdate, seed: int = 0
) -> dict[str, Any]:
    """GRPO over `groups` with PPO-style reuse: `how.ppo_epochs` passes over the sequences,
    each in shuffled minibatches of `how.minibatch_size` sequences (None: all), one
    optimiser step per minibatch (training.grpo.ppo_passes). The old log-probs are the
    policy's before the first step (computed once when there is more than one step; with
    one step they are that pass's own), so the ratio moves and the clip acts from the
    second step on. One epoch, one minibatch: exactly grpo_update plus one step. Returns
    grpo_update's figures averaged over the passes, plus epochs (per pass),
    clip_frac_last, ratio_mean_last, optimizer_steps."""
    from training.grpo import ppo_passes
    from training.policy_backend import answer_logprobs
    from training.precision import forward_context

    seqs, usable, adv_abs = _sequences(groups, how.lambda0, how.kappa)
    n = len(seqs)
    base = {"groups": len(usable), "sequences": n, "advantage_abs": adv_abs}
    if n == 0:
        optimizer.zero_grad(set_to_none=True)
        return {
            **base,
            **{k: 0.0 for k in UPDATE_FIGURES},
            "epochs": [],
            "clip_frac_last": 0.0,
            "ratio_mean_last": 0.0,
            "optimizer_steps": 0,
        }
    old = None
    if how.ppo_epochs * -(-n // min(how.minibatch_size or n, n)) > 1:  # the policy moves before some are seen
        with torch.no_grad(), forward_context(policy, how.mixed_precision):
            old = {
                i: answer_logprobs(policy, g.prompt, ids, how.temperature)[None].detach()
                for i, (g, ids, _, _) in enumerate(seqs)
            }
    ref_cache: dict[int, torch.Tensor] = {}

    def backward(ids: list[int]) -> dict[str, float]:
        share = sum(seqs[i][3] for i in ids)  # the minibatch's loss: a weighted mean
        totals = _accumulate(policy, ref, seqs, how, ids, old=old, ref_cache=ref_cache, scale=1.0 / share)
        return {k: totals.get(k, 0.0) for k in UPDATE_FIGURES}

    epochs, grad_norms = ppo_passes(
        n,
        backward,
        optimizer,
        [p for p in policy.parameters() if p.requires_grad],
        epochs=how.ppo_epochs,
        minibatch_size=how.minibatch_size,
        max_grad_norm=how.max_grad_norm,
        seed=seed,
    )
    return {
        **base,
        **{k: sum(e[k] for e in epochs) / len(epochs) for k in UPDATE_FIGURES},
        "epochs": epochs,
        "clip_frac_last": epochs[-1]["clip_frac"],
        "ratio_mean_last": epochs[-1]["ratio_mean"],
        "optimizer_steps": len(grad_norms),
    }


def run_online_rl(cfg: OnlineRLConfig, report=None, *, env=None, pool=None) -> dict:
    """Train by online GRPO in cfg.envs; returns the metrics (see the module docstring).

    `env`: a browser (a WebEnv) or phone every rollout plays on, in turn (default: each
    environment's GuiEnv launches a headless Chromium allowed only its origins);
    `pool`: a pool of envs (WebEnvPool, RayEnvPool) whose free envs play the rollouts at
    once (default: the one `cfg.rollout_envs` / `cfg.ray_address` describe).
    Idempotent: a finished checkpoint with the same id is returned without training.
    """
    from training.checkpoint import (
        checkpoint_id,
        finished_checkpoint,
        load_policy,
        model_fingerprint,
        save_checkpoint,
    )
    from training.policy_backend import PolicyBackend
    from training.precision import adamw, training_dtype

    if env is not None and pool is not None:
        raise ValueError("run_online_rl: give env= or pool=, not both")
    started = time.perf_counter()
    torch.manual_seed(cfg.seed)
    model_path = cfg.resolved_model_path()
    ref_path = resolve_model_path(cfg.ref_model_path or cfg.model_path)
    available = [t for s in cfg.envs for t in source_tasks(s, languages=cfg.languages, catalog_seed=cfg.seed)]
    tasks = resolve_tasks(cfg.tasks, available)
    by_id = {t.task_id: t for t in tasks}
    cid = checkpoint_id(
        "online",
        cfg.identity(),
        f"{model_fingerprint(model_path)}/{model_fingerprint(ref_path)}/{','.join(sorted(by_id))}",
    )
    out = Path(cfg.out_dir) / cid
    done = finished_checkpoint(out)
    if done is not None:
        _say(report, f"online RL: checkpoint {cid} already finished at {out}")
        return {**done, "checkpoint_path": str(out), "reused": True}

    store = RawStore(Path(cfg.store))
    dtype = training_dtype(cfg.dtype)
    policy, processor = load_policy(model_path, cfg.device, dtype, cfg.gradient_checkpointing)
    ref, _ = load_policy(ref_path, cfg.device, dtype, False)
    ref.requires_grad_(False)
    backend = PolicyBackend(
        policy,
        processor,
        cid,
        max_image_pixels=cfg.image_max_pixels,
        set_mode=cfg.set_mode,
        record=True,
        mixed_precision=cfg.mixed_precision,
    )
    optimizer = adamw(
        [p for p in policy.parameters() if p.requires_grad], cfg, str(next(policy.parameters()).device)
    )
    sampler = CurriculumSampler(
        task_difficulty(store, tasks),
        CurriculumSettings(low=cfg.curriculum_low, high=cfg.curriculum_high),
        seed=cfg.seed,
        batch_size=cfg.tasks_per_iteration,
    )
    history, collections = [], []
    rollouts = successes = 0
    rollout_s = 0.0
    with (
        env_factories(
            cfg.envs,
            server_url=cfg.server_url,
            languages=cfg.languages,
            catalog_seed=cfg.seed,
            devices=cfg.devices,
            **({"env": env} if env is not None else {}),
        ) as factories,
        rollout_pool(cfg, factories, pool) as envs_pool,
    ):
        for it in range(cfg.iterations):
            batch = pick_tasks(sampler, cfg.tasks_per_iteration)
            backend.model_id = f"{cid}@it{it}"
            backend.take_generations()
            t0 = time.perf_counter()
            how = Rollouts(
                k=cfg.k,
                seed=cfg.seed + 7919 * it,
                max_steps=cfg.max_steps,
                temperature=cfg.temperature,
                max_new_tokens=cfg.max_new_tokens,
            )
            result = rejection_sample(batch, backend, how, envs=factories, store=store, pool=envs_pool)
            it_rollout_s = time.perf_counter() - t0
            rollout_s += it_rollout_s
            collections += [result.collection, result.failed_collection]
            groups = _groups(result, backend)
            policy.train()
            stats = ppo_update(
                policy,
                ref,
                list(groups.values()),
                optimizer,
                GRPOUpdate.of(cfg),
                seed=cfg.seed * 1_000_003 + it,
            )
            policy.eval()
            outcomes = curriculum_outcomes(result)
            sampler.update(outcomes)
            n_it = len(outcomes)
            ok_it = sum(ok for _, ok in outcomes)
            rollouts += n_it
            successes += ok_it
            rewards = [r["reward"] for g in groups.values() for r in g]
            row = {
                "iteration": it,
                "tasks": len(batch),
                "rollouts": n_it,
                "rollout_s": round(it_rollout_s, 3),
                "rollout_retries": result.retries,
                "success_rate": ok_it / n_it if n_it else 0.0,
                "success_rates": result.success_rates(),
                "reward_mean": sum(rewards) / len(rewards) if rewards else 0.0,
                "trained_rollouts": len(rewards),
                "curriculum_frontier": sampler.frontier,
                **stats,
            }
            history.append(row)
            if report is not None:
                report.metric(
                    it, **{k: v for k, v in row.items() if k not in ("iteration", "epochs", "success_rates")}
                )
        pool_stats = envs_pool.stats() if envs_pool is not None else None
    metrics = {
        "kind": "online",
        "checkpoint_id": cid,
        "base_model": str(model_path),
        "ref_model": str(ref_path),
        "envs": list(cfg.envs),
        "steps": cfg.iterations,
        "iterations": cfg.iterations,
        "rollouts": rollouts,
        "success_rate": successes / rollouts if rollouts else 0.0,
        "reward_mean": _mean([h["reward_mean"] for h in history]),
        "reward_first": history[0]["reward_mean"],
        "reward_last": history[-1]["reward_mean"],
        "kl": _mean([h["kl"] for h in history]),
        "loss": history[-1]["loss"],
        "rollouts_per_s": rollouts / rollout_s if rollout_s > 0 else 0.0,
        "rollout_pool": pool_stats,
        "collections": sorted(set(collections)),
        "store": str(store.root),
        "history": history,
        "wall_s": round(time.perf_counter() - started, 3),
    }
    path = save_checkpoint(policy, processor, out, metrics)
    return {**metrics, "checkpoint_path": str(path)}


def curriculum_outcomes(result: RolloutResult) -> list[tuple[str, bool]]:
    """(task id, success) for each of the k rollouts of each task, from the verified rates
    (stored rollouts of a re-run included): what the curriculum folds in."""
    return [(t, i < s) for t, (s, n) in result.rates.items() for i in range(n)]


@contextmanager
def rollout_pool(cfg: OnlineRLConfig, factories, pool=None):
    """The pool the rollouts play on at once: the caller's, else None (rollout_envs 1, no
    ray_address: in turn), else cfg.rollout_envs browsers (Ray actors with ray_address)
    allowed only the environments' origins, closed after."""
    if pool is not None or (cfg.ray_address is None and cfg.rollout_envs == 1):
        yield pool
        return
    with browser_pool(cfg.rollout_envs, factories, ray_address=cfg.ray_address) as made:
        yield made


def rollout_reward(rollout: Rollout) -> float | None:
    """A rollout's trajectory reward: the env's composite reward over the episode
    (info["episode_reward_parts"]); None for a rollout whose env failed (no sample of the
    policy's: never a reward of 0)."""
    if rollout.outcome == "error" or rollout.reward is None:
        return None
    return float(rollout.reward["reward"])


def _groups(result: RolloutResult, backend) -> dict[str, list[dict]]:
    """task_id -> the rollouts played now that the update learns from (with their
    generations and rewards)."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in sorted(result.rollouts, key=lambda r: r.trajectory_id):
        gens = _rollout_generations(backend.take_generations(episode=r.trajectory_id))
        reward = rollout_reward(r)
        if not gens or reward is None:  # no answer sampled, or the env failed
            continue
        groups[r.task_id].append(
            {
                "reward": reward,
                "success": r.outcome == "success",
                "trajectory_id": r.trajectory_id,
                "generations": gens,
            }
        )
    return groups


def _mean(values: list[float]) -> float:
    values = [v for v in values if v is not None and math.isfinite(v)]
    return sum(values) / len(values) if values else 0.0


def _say(report, msg: str) -> None:
    if report is not None:
        report.log(msg)
    log.info(msg)


def main(argv: list[str] | None = None) -> dict:
    from training.entry import entry_point

    return entry_point(
        argv,
        prog="python -m training.online",
        doc=__doc__,
        config_cls=OnlineRLConfig,
        run=run_online_rl,
        final=lambda m: {k: v for k, v in m.items() if k != "history"},
    )


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    main()
