"""GRPO's pieces as small pure-torch functions, each checkable by hand.

- `group_advantages`: (r - mean) / (std + eps) within one group (population std);
- `negative_scale` / `scale_negatives`: success-adaptive scaling of negative
  advantages, lambda = min(lambda0 + kappa * p_hat, 1): while the group mostly fails
  (p_hat small) the failures are pushed down less hard, so that a policy that
  rarely succeeds is not driven away from everything it does;
- `kl_k3`: the low-variance, always non-negative KL estimator
  exp(ref - logp) - (ref - logp) - 1 (Schulman's k3), per token;
- `grpo_loss`: the clipped surrogate minus beta * k3, averaged over each
  sequence's generated tokens, then over the group;
- `sequence_logprobs`: the model's log-probabilities of the generated tokens;
- `ppo_passes`: the epoch-and-minibatch loop of offline and online RL.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

import torch


def group_advantages(rewards: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """(r - mean) / (std + eps), std the population std; all-equal rewards give zeros."""
    r = rewards.float()
    if r.ndim != 1 or r.numel() == 0:
        raise ValueError(f"rewards must be a non-empty 1-d tensor (one group), got shape {tuple(r.shape)}")
    centred = r - r.mean()
    std = r.std(unbiased=False)
    # Exactly zero when all rewards are equal: such a group carries no signal.
    return torch.where(std > 0, centred / (std + eps), torch.zeros_like(centred))


def negative_scale(success_rate: float, lambda0: float = 0.5, kappa: float = 1.5) -> float:
    """lambda = min(lambda0 + kappa * p_hat, 1)."""
    if not 0.0 <= success_rate <= 1.0:
        raise ValueError(f"success_rate={success_rate} must be in [0, 1]")
    return min(lambda0 + kappa * success_rate, 1.0)


def scale_negatives(
    adv: torch.Tensor, success_rate: float, lambda0: float = 0.5, kappa: float = 1.5
) -> torch.Tensor:
    """`adv` with every negative entry multiplied by `negative_scale(success_rate, ...)`."""
    lam = negative_scale(success_rate, lambda0, kappa)
    return torch.where(adv < 0, adv * lam, adv)


def kl_k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimate of KL(policy || reference): exp(d) - d - 1, d = ref_logp - logp."""
    d = ref_logp - logp
    return torch.exp(d) - d - 1.0


def _masked_group_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over each sequence's masked tokens, then over the sequences (empty rows count 0)."""
    per_seq = (values * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)
    return per_seq.mean()


def grpo_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    ref_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip: float = 0.2,
    beta: float = 0.001,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The GRPO loss of one group (or several groups stacked: rows are sequences).

    Shapes: logp, old_logp, ref_logp, mask [G, T]; advantages [G]. Per token,
    ratio = exp(logp - old_logp), surrogate = min(ratio*A, clip(ratio, 1-eps, 1+eps)*A),
    loss_t = -(surrogate - beta * k3(logp, ref_logp)); averaged over each sequence's
    masked tokens, then over the sequences. Gradients flow through `logp` only.

    stats: policy_loss (the -surrogate part, same averaging), kl (mean k3, same
    averaging), clip_frac (share of masked tokens whose clipped term is the one
    taken, i.e. ratio > 1+eps with A > 0 or ratio < 1-eps with A < 0: their
    gradient is zero), ratio_mean (over masked tokens).
    """
    if not (logp.shape == old_logp.shape == ref_logp.shape == mask.shape):
        raise ValueError(
            f"shape mismatch: logp {tuple(logp.shape)}, old_logp {tuple(old_logp.shape)}, "
            f"ref_logp {tuple(ref_logp.shape)}, mask {tuple(mask.shape)}"
        )
    if advantages.shape != logp.shape[:1]:
        raise ValueError(f"advantages shape {tuple(advantages.shape)} != ({logp.shape[0]},)")
    mask = mask.to(logp.dtype)
    adv = advantages.to(logp.dtype).unsqueeze(-1)
    old_logp, ref_logp = old_logp.detach(), ref_logp.detach()
    ratio = torch.exp(logp - old_logp)
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1.0 - clip, 1.0 + clip) * adv
    surrogate = torch.minimum(unclipped, clipped)
    k3 = kl_k3(logp, ref_logp)
    loss = _masked_group_mean(-(surrogate - beta * k3), mask)
    with torch.no_grad():
        n_tok = mask.sum().clamp(min=1.0)
        is_clipped = ((ratio > 1.0 + clip) & (adv > 0)) | ((ratio < 1.0 - clip) & (adv < 0))
        stats = {
            "policy_loss": float(_masked_group_mean(-surrogate, mask)),
            "kl": float(_masked_group_mean(k3, mask)),
            "clip_frac": float((is_clipped.to(mask.dtype) * mask).sum() / n_tok),
            "ratio_mean": float((ratio * mask).sum() / n_tok),
        }
    return loss, stats


def token_logprobs(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """log softmax(logits)[target] per position, in float32 (logits [B, T, V], targets [B, T])."""
    logits = logits.float()
    picked = torch.gather(logits, -1, targets.unsqueeze(-1)).squeeze(-1)
    return picked - torch.logsumexp(logits, dim=-1)


def sequence_logprobs(
    model, batch: dict[str, torch.Tensor], gen_mask: torch.Tensor, temperature: float = 1.0
) -> torch.Tensor:
    """Log-probs of the generated tokens under `model`: a [G, T] tensor aligned with
    batch["input_ids"] (T its length), log p(token_t | tokens < t) where gen_mask
    is 1, 0 elsewhere. The logits are divided by `temperature`, the one the
    completions were sampled at, so old, new and reference log-probs describe the
    same distribution.

    Only the positions from the first generated column on go through the LM head
    (`logits_to_keep`): prompts with images are long, completions short.
    """
    input_ids = batch["input_ids"]
    if gen_mask.shape != input_ids.shape:
        raise ValueError(f"gen_mask shape {tuple(gen_mask.shape)} != input_ids {tuple(input_ids.shape)}")
    cols = gen_mask.any(0).nonzero()
    out = torch.zeros(input_ids.shape, dtype=torch.float32, device=input_ids.device)
    if cols.numel() == 0:
        return out
    start = int(cols[0])
    if start == 0:
        raise ValueError("gen_mask marks the first token as generated: it has no context")
    keep = input_ids.shape[1] - start + 1  # logits at start-1 .. T-1 predict start .. T
    logits = model(**batch, logits_to_keep=keep, use_cache=False).logits[:, :-1]
    if temperature != 1.0:
        logits = logits / temperature
    lp = token_logprobs(logits, input_ids[:, start:])
    out = torch.cat([out[:, :start], lp], dim=1)
    return out * gen_mask.to(out.dtype)


def ppo_passes(
    n: int,
    backward: Callable[[list[int]], dict[str, float]],
    optimizer: torch.optim.Optimizer,
    params: list[torch.nn.Parameter],
    *,
    epochs: int,
    minibatch_size: int | None,
    max_grad_norm: float,
    seed: int,
) -> tuple[list[dict[str, float]], list[float]]:
    """The PPO/GRPO epoch-and-minibatch loop of offline (training.rl) and online
    (training.online) RL over a batch of `n` rows: `epochs` passes, each in shuffled
    minibatches of `minibatch_size` rows (None: all, in order), one optimiser step per
    minibatch after `backward(rows)` has accumulated its loss's gradient and returned its
    figures. Returns (each pass's figures summed over its minibatches, the gradient norm
    before each step's clipping)."""
    mb = min(minibatch_size or n, n)
    shuffle = torch.Generator().manual_seed(seed)
    passes: list[dict[str, float]] = []
    grad_norms: list[float] = []
    for _ in range(epochs):
        # Minibatches of shuffled rows; one minibatch of all rows keeps the batch's order.
        order = torch.randperm(n, generator=shuffle).tolist() if mb < n else list(range(n))
        totals: dict[str, float] = defaultdict(float)
        for start in range(0, n, mb):
            optimizer.zero_grad(set_to_none=True)
            for key, value in backward(order[start : start + mb]).items():
                totals[key] += value
            grad_norms.append(float(torch.nn.utils.clip_grad_norm_(params, max_grad_norm)))
            optimizer.step()
        passes.append(dict(totals))
    optimizer.zero_grad(set_to_none=True)
    return passes, grad_norms
