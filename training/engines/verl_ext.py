"""trajforge's GRPO in verl 0.9.1, through its registries (imported in .venv-trainers only).

- advantage estimator `trajforge_gui_grpo` (algorithm.adv_estimator): per prompt group
  (verl's `uid`), training.grpo.group_advantages (population std) with the negatives scaled
  by min(lambda0 + kappa * p_hat, 1), p_hat the share of the group whose reward earned the
  step reward's match term (synthesis.gui_reward.W_MATCH);
- policy loss `trajforge_gui_grpo` (actor_rollout_ref.actor.policy_loss.loss_mode): the
  clipped surrogate of training.grpo.grpo_loss (no dual clip), aggregated by verl's
  agg_loss. The KL term is verl's own KL loss (use_kl_loss, kl_loss_type=low_var_kl: k3).

verl imports this module in every process that imports verl (the driver, the TaskRunner
and every Ray worker) when VERL_USE_EXTERNAL_MODULES names it; training.engines.verl
sets that variable, with PYTHONPATH, in the Ray runtime_env of the generated command.
lambda0 and kappa come from TRAJFORGE_GRPO_LAMBDA0 / TRAJFORGE_GRPO_KAPPA (the same
runtime_env), defaults those of training.config.RLConfig.
"""

from __future__ import annotations

import os
from typing import Any

import torch
from verl.trainer.ppo.core_algos import agg_loss, register_adv_est, register_policy_loss

from synthesis.gui_reward import W_MATCH
from training.grpo import group_advantages, scale_negatives

NAME = "trajforge_gui_grpo"


def _knob(name: str, default: float) -> float:
    return float(os.environ.get(f"TRAJFORGE_GRPO_{name.upper()}", default))


@register_adv_est(NAME)
def gui_grpo_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index,
    epsilon: float = 1e-6,
    config: Any = None,
    **_: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(advantages, returns), both [B, T]: each response's scaled group advantage on its tokens."""
    lambda0, kappa = _knob("lambda0", 0.5), _knob("kappa", 1.5)
    scores = token_level_rewards.sum(dim=-1).float()
    adv = torch.zeros_like(scores)
    groups: dict[Any, list[int]] = {}
    for i, uid in enumerate(index):
        groups.setdefault(uid, []).append(i)
    for rows in groups.values():
        r = scores[rows]
        p_hat = float((r >= W_MATCH - 1e-9).float().mean())
        adv[rows] = scale_negatives(group_advantages(r, epsilon), p_hat, lambda0, kappa)
    adv = adv.unsqueeze(-1) * response_mask
    return adv, adv


@register_policy_loss(NAME)
def gui_grpo_policy_loss(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "seq-mean-token-mean",
    config: Any = None,
    rollout_is_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, Any]]:
    """-min(ratio * A, clip(ratio, 1 - eps_low, 1 + eps_high) * A) per token, aggregated."""
    eps_low = config.clip_ratio_low if config.clip_ratio_low is not None else config.clip_ratio
    eps_high = config.clip_ratio_high if config.clip_ratio_high is not None else config.clip_ratio
    ratio = torch.exp(log_prob - old_log_prob.detach())
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high) * advantages
    losses = -torch.minimum(unclipped, clipped)
    if rollout_is_weights is not None:
        losses = losses * rollout_is_weights
    info = dict(config.get("global_batch_info", None) or {})
    loss = agg_loss(loss_mat=losses, loss_mask=response_mask, loss_agg_mode=loss_agg_mode, **info)
    with torch.no_grad():
        mask = response_mask.float()
        n = mask.sum().clamp(min=1.0)
        took_clip = ((ratio > 1.0 + eps_high) & (advantages > 0)) | (
            (ratio < 1.0 - eps_low) & (advantages < 0)
        )
        metrics = {
            "actor/pg_clipfrac": float((took_clip.float() * mask).sum() / n),
            "actor/ppo_kl": float(((old_log_prob - log_prob) * mask).sum() / n),
        }
    return loss, metrics
