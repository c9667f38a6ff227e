"""The weighted SFT loss against a hand-computed example and against plain cross-entropy."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from training.loss import weighted_token_loss


def _logits_for(rows: list[list[float]], shift: float = 3.0) -> torch.Tensor:
    """Logits whose softmax is exactly `rows` (plus a constant, which softmax ignores)."""
    return (torch.log(torch.tensor(rows, dtype=torch.float64)) + shift).unsqueeze(0)


def test_hand_computed_example_with_alpha_action_2_and_alpha_coord_4():
    # 3-word vocab, 5 positions; position 0 is prompt (-100). Logits at t predict labels[t+1]:
    #   t=0 -> label 0, a "c" token, p = 0.5
    #   t=1 -> label 1, an action token (w 2), p = 0.25
    #   t=2 -> label 2, a coordinate token (w 4), p = 0.125
    #   t=3 -> label 1, a "c" token, p = 0.5
    #   t=4 predicts nothing (last position).
    probs = [[0.5, 0.25, 0.25], [0.5, 0.25, 0.25], [0.75, 0.125, 0.125], [0.25, 0.5, 0.25], [1 / 3] * 3]
    labels = torch.tensor([[-100, 0, 1, 2, 1]])
    weights = torch.tensor([[9.0, 1.0, 2.0, 4.0, 1.0]])  # the prompt's weight must not count
    loss, stats = weighted_token_loss(_logits_for(probs), labels, weights)
    # [log .5 + log .5 + 2 log .25 + 4 log .125] / (1 + 1 + 2 + 4) = -(1 + 1 + 4 + 12) ln 2 / 8
    expected = 18 * math.log(2) / 8
    assert loss.item() == pytest.approx(expected, abs=1e-6)
    assert stats["tokens"] == 4 and stats["weight"] == 8.0
    # Unweighted mean NLL of the same tokens: (1 + 2 + 3 + 1) ln 2 / 4
    assert stats["nll"] == pytest.approx(7 * math.log(2) / 4, abs=1e-6)


def test_batch_is_normalised_by_its_total_weight_and_padding_counts_for_nothing():
    probs = [[0.5, 0.25, 0.25]] * 4
    a = _logits_for(probs)[0]
    logits = torch.stack([a, a])
    # Row 0: one coordinate token (p .25, w 4). Row 1: one "c" token (p .5) then padding
    # that carries a weight but label -100.
    labels = torch.tensor([[-100, -100, -100, 1], [-100, 0, -100, -100]])
    weights = torch.tensor([[0.0, 0.0, 0.0, 4.0], [0.0, 1.0, 5.0, 5.0]])
    loss, _ = weighted_token_loss(logits, labels, weights)
    assert loss.item() == pytest.approx((4 * 2 * math.log(2) + 1 * math.log(2)) / 5, abs=1e-6)


def test_weights_of_one_give_plain_cross_entropy():
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 7, 11, generator=gen)
    labels = torch.randint(0, 11, (3, 7), generator=gen)
    labels[:, :2] = -100
    labels[2, 5:] = -100
    loss, stats = weighted_token_loss(logits, labels, torch.ones(3, 7))
    reference = F.cross_entropy(logits[:, :-1].reshape(-1, 11), labels[:, 1:].reshape(-1), ignore_index=-100)
    assert loss.item() == pytest.approx(reference.item(), abs=1e-6)
    assert stats["nll"] == pytest.approx(reference.item(), abs=1e-6)


def test_gradient_flows_and_a_batch_without_trained_tokens_is_an_error():
    logits = torch.zeros(1, 3, 4, requires_grad=True)
    loss, _ = weighted_token_loss(logits, torch.tensor([[-100, 2, 3]]), torch.tensor([[0.0, 4.0, 1.0]]))
    loss.backward()
    assert logits.grad is not None and logits.grad[0, 0, 2] < 0  # raise the right word's logit
    with pytest.raises(ValueError, match="no trained token"):
        weighted_token_loss(torch.zeros(1, 3, 4), torch.full((1, 3), -100), torch.ones(1, 3))
    with pytest.raises(ValueError, match="shapes differ"):
        weighted_token_loss(torch.zeros(1, 3, 4), torch.zeros(1, 2, dtype=torch.long), torch.ones(1, 3))
