"""GRPO pieces on hand-made groups: every expected number is worked out in a comment."""

from __future__ import annotations

import math

import pytest
import torch

from training.grpo import group_advantages, grpo_loss, kl_k3, negative_scale, scale_negatives

S11 = math.sqrt(11)


def test_group_advantages_by_hand():
    # rewards [1, 0, 0, 0.5]: mean 0.375; deviations 0.625, -0.375, -0.375, 0.125;
    # population variance (0.390625 + 0.140625*2 + 0.015625) / 4 = 0.171875 = 11/64,
    # std = sqrt(11)/8 -> advantages 5/sqrt(11), -3/sqrt(11), -3/sqrt(11), 1/sqrt(11)
    adv = group_advantages(torch.tensor([1.0, 0.0, 0.0, 0.5]))
    expected = torch.tensor([5 / S11, -3 / S11, -3 / S11, 1 / S11])  # 1.5076, -0.9045, ...
    assert torch.allclose(adv, expected, atol=1e-5)
    assert abs(float(adv.sum())) < 1e-5


def test_group_advantages_all_equal_is_zero():
    assert torch.equal(group_advantages(torch.tensor([0.1, 0.1, 0.1])), torch.zeros(3))
    with pytest.raises(ValueError, match="1-d"):
        group_advantages(torch.zeros(2, 2))


def test_negative_scaling_by_success_rate():
    # p = 0.25 (one success of four): 0.5 + 1.5*0.25 = 0.875; p = 0.5: 1.25 -> capped at 1
    assert negative_scale(0.25) == pytest.approx(0.875)
    assert negative_scale(0.5) == 1.0
    assert negative_scale(0.0) == 0.5
    adv = group_advantages(torch.tensor([1.0, 0.0, 0.0, 0.5]))
    scaled = scale_negatives(adv, 0.25)
    # only the negatives move: -3/sqrt(11) * 0.875 = -0.79147
    assert torch.allclose(scaled, torch.tensor([5 / S11, -2.625 / S11, -2.625 / S11, 1 / S11]), atol=1e-5)
    assert torch.equal(scale_negatives(adv, 0.5), adv)
    with pytest.raises(ValueError, match="success_rate"):
        negative_scale(1.5)


def test_kl_k3_against_formula():
    logp = torch.tensor([-1.0, -2.0, -0.5])
    ref = torch.tensor([-1.0, -1.5, -1.5])  # d = ref - logp = 0, 0.5, -1
    # e^0 - 0 - 1 = 0; e^0.5 - 0.5 - 1 = 0.148721; e^-1 + 1 - 1 = 0.367879
    assert torch.allclose(kl_k3(logp, ref), torch.tensor([0.0, 0.148721, 0.367879]), atol=1e-5)
    assert (kl_k3(torch.randn(50), torch.randn(50)) >= 0).all()


def _clip_case():
    logp = torch.tensor([[-1.0, -2.0, -0.5], [-1.0, -1.0, -1.0]])
    # row 0: ratio e^0.5 = 1.6487 on token 0 (above 1.2), 1 elsewhere;
    # row 1: ratio e^-0.5 = 0.6065 on token 0 (below 0.8), 1 elsewhere; its token 2 masked out.
    old = logp - torch.tensor([[0.5, 0.0, 0.0], [-0.5, 0.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    return logp, old, mask


def test_grpo_loss_clip_range_by_hand():
    logp, old, mask = _clip_case()
    adv = torch.tensor([1.0, -1.0])
    loss, stats = grpo_loss(logp, old, ref_logp=logp, advantages=adv, mask=mask, clip=0.2, beta=0.0)
    # row 0 (A=+1): min(1.6487, 1.2) = 1.2, then 1, 1 -> mean 3.2/3 = 1.066667
    # row 1 (A=-1): min(-0.6065, -0.8) = -0.8, then -1 -> mean -0.9
    # loss = -(1.066667 - 0.9)/2 = -0.083333
    assert float(loss) == pytest.approx(-0.0833333, abs=1e-5)
    assert stats["policy_loss"] == pytest.approx(-0.0833333, abs=1e-5)
    assert stats["clip_frac"] == pytest.approx(2 / 5)  # both token-0s clipped, 5 masked tokens
    assert stats["ratio_mean"] == pytest.approx((math.exp(0.5) + 3 + math.exp(-0.5)) / 5, abs=1e-5)
    assert stats["kl"] == 0.0

    # Same ratios, opposite advantages: the unclipped term is the min, nothing is clipped.
    loss2, stats2 = grpo_loss(logp, old, logp, torch.tensor([-1.0, 1.0]), mask, clip=0.2, beta=0.0)
    # row 0: -1.6487, -1, -1 -> -1.216245; row 1: 0.6065, 1 -> 0.803265
    assert float(loss2) == pytest.approx(-(-1.216245 + 0.803265) / 2, abs=1e-5)
    assert stats2["clip_frac"] == 0.0


def test_grpo_loss_kl_term_sign():
    logp = torch.tensor([[-1.0, -2.0]], requires_grad=True)
    ref = torch.tensor([[-0.5, -2.0]])  # d = 0.5 on token 0: k3 = 0.148721
    loss, stats = grpo_loss(logp, logp.detach(), ref, torch.zeros(1), torch.ones(1, 2), beta=0.1)
    # zero advantage: loss = +beta * mean k3 = 0.1 * 0.148721 / 2
    assert float(loss.detach()) == pytest.approx(0.1 * 0.148721 / 2, abs=1e-6)
    assert stats["kl"] == pytest.approx(0.148721 / 2, abs=1e-6)
    loss.backward()
    # d/dlogp beta*k3/2 = beta*(1 - e^d)/2 < 0: a descent step moves logp up, toward ref
    assert float(logp.grad[0, 0]) == pytest.approx(0.1 * (1 - math.exp(0.5)) / 2, abs=1e-6)
    assert float(logp.grad[0, 1]) == pytest.approx(0.0, abs=1e-7)


def test_grpo_gradient_sign_follows_advantage():
    logp = torch.tensor([[-1.0, -1.5, -2.0], [-0.7, -1.2, -0.3]], requires_grad=True)
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    loss, _ = grpo_loss(logp, logp.detach(), logp.detach(), torch.tensor([0.8, -0.6]), mask)
    loss.backward()
    g = logp.grad
    # on policy (ratio 1): d loss / d logp_t = -A / (|seq| * G)
    assert torch.allclose(g[0, :2], torch.full((2,), -0.8 / (2 * 2)))
    assert torch.allclose(g[1], torch.full((3,), 0.6 / (3 * 2)))
    assert g[0, 2] == 0.0  # masked out


def test_grpo_clipped_token_has_no_policy_gradient():
    logp, old, mask = _clip_case()
    logp = logp.clone().requires_grad_(True)
    loss, _ = grpo_loss(logp, old, logp.detach(), torch.tensor([1.0, -1.0]), mask, beta=0.0)
    loss.backward()
    assert logp.grad[0, 0] == 0.0 and logp.grad[1, 0] == 0.0  # both clipped
    assert logp.grad[0, 1] < 0 and logp.grad[1, 1] > 0


def test_grpo_loss_shape_errors():
    with pytest.raises(ValueError, match="advantages"):
        grpo_loss(torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(3), torch.ones(2, 3))
    with pytest.raises(ValueError, match="shape mismatch"):
        grpo_loss(torch.zeros(2, 3), torch.zeros(2, 4), torch.zeros(2, 3), torch.zeros(2), torch.ones(2, 3))
