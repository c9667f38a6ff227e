"""The SFT loss: token NLL weighted by what the token says (reasoning, action, coordinates).

    L = -[Σ log p(c) + α_a Σ log p(a) + α_g Σ log p(g)] / (|c| + α_a|a| + α_g|g|)

written per token as L = -Σ_t w_t log p_t / Σ_t w_t, with w_t = 1, α_a or α_g
(training.data puts those weights beside the labels). Coordinates are a handful
of digits among hundreds of reasoning tokens; without the weights their loss is
drowned out and the model learns to talk rather than to point.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

IGNORE = -100


def weighted_token_loss(
    logits: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor
) -> tuple[torch.Tensor, dict[str, float]]:
    """(loss, stats) for a causal LM's logits [B, T, V], labels [B, T], weights [B, T].

    Shifted as causal LMs are: logits at position t predict labels[t + 1], whose
    weight is weights[t + 1]. Positions labelled -100 (prompt, padding) count for
    nothing whatever their weight. Normalised over the whole batch: the weighted NLL
    of every sequence is summed, then divided by the batch's total weight (so a
    long answer counts more than a short one, as in the formula over one sample;
    with batch size 1 it is exactly the formula above).

    stats: tokens (trained tokens), weight (Σ w), nll (their plain mean NLL), loss.
    """
    if logits.shape[:2] != labels.shape or labels.shape != weights.shape:
        raise ValueError(
            f"shapes differ: logits {tuple(logits.shape)}, labels {tuple(labels.shape)}, "
            f"weights {tuple(weights.shape)}"
        )
    logits = logits[:, :-1, :]
    labels = labels[:, 1:]
    # Fused and in fp32: a bf16 log-softmax over 150k words loses the small probabilities.
    nll = F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]).float(),
        labels.reshape(-1),
        ignore_index=IGNORE,
        reduction="none",
    ).view_as(labels)
    return weighted_nll(nll, labels, weights[:, 1:])


def weighted_nll(
    nll: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor
) -> tuple[torch.Tensor, dict[str, float]]:
    """The reduction of `weighted_token_loss` on per-token NLL already aligned with its
    labels and weights ([B, T'], shifted): Σ w·nll / Σ w over the trained positions.
    A trainer that computes the token log-probabilities its own way (TRL's fused LM head,
    training.engines.trl_sft) reduces them here, so both paths share one definition."""
    if nll.shape != labels.shape or labels.shape != weights.shape:
        raise ValueError(
            f"shapes differ: nll {tuple(nll.shape)}, labels {tuple(labels.shape)}, weights {tuple(weights.shape)}"
        )
    weights = weights.float()
    mask = labels != IGNORE
    w = torch.where(mask, weights, torch.zeros_like(weights))
    total_weight = w.sum()
    if total_weight <= 0:
        raise ValueError("no trained token in the batch (all labels -100 or zero weight)")
    # where(), not a product with the mask: an ignored position's nll may be anything
    loss = torch.where(mask, nll.float() * w, torch.zeros_like(w)).sum() / total_weight
    n = int(mask.sum())
    stats = {
        "tokens": n,
        "weight": float(total_weight),
        "nll": float(nll.detach().float()[mask].sum() / max(n, 1)),
        "loss": float(loss.detach()),
    }
    return loss, stats


def trained_positions_loss(
    model, inputs: dict[str, torch.Tensor], labels: torch.Tensor, weights: torch.Tensor
) -> tuple[torch.Tensor, dict[str, float]]:
    """weighted_token_loss without the [B, T, V] logits: the backbone's hidden states, then
    the LM head on the positions whose next label is trained only (the answers: a few
    hundred of a sample's thousand-odd tokens, whose image and prompt logits at a 150k
    vocabulary are most of a VLM step's activation memory). The same loss, to float
    rounding (tests/training/test_packing.py). `model` is a *ForConditionalGeneration with
    `.model` (the backbone) and an output embedding; not for a DDP-wrapped model (its
    forward hooks would be skipped)."""
    hidden = model.model(**inputs, use_cache=False).last_hidden_state[:, :-1]
    shifted = labels[:, 1:]
    mask = shifted != IGNORE
    logits = model.get_output_embeddings()(hidden[mask])
    nll = torch.zeros(shifted.shape, dtype=torch.float32, device=hidden.device)
    nll[mask] = F.cross_entropy(logits.float(), shifted[mask], reduction="none")
    return weighted_nll(nll, shifted, weights[:, 1:])
