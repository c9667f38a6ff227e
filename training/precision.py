"""Mixed precision for the trainers: fp32 master weights, bf16 matmuls on CUDA.

Why not train bf16 weights in place: bf16 keeps 8 significant bits, so a weight of
0.02 moves in steps of 1.2e-4, and AdamW's first updates are about the learning
rate (1e-5 for a 7B SFT): most of them round away and the model barely moves
(tests/training/test_cuda.py measures it). So `dtype: auto` trains fp32 weights
and runs forward passes under torch.autocast(bfloat16) on CUDA (the usual
"bf16 mixed precision"); `dtype: bfloat16` is still allowed, for memory, with a
warning. Inference (evaluation, the flywheel's rollouts) loads bf16 directly.
"""

from __future__ import annotations

import contextlib

import torch


def training_dtype(dtype: str) -> str:
    """The weights' dtype for training: `auto` -> float32 (master weights) on every device."""
    return "float32" if dtype == "auto" else dtype


def forward_context(model, enabled: bool = True):
    """torch.autocast for a forward pass of `model`: bf16 (fp16 for fp16 weights) on CUDA
    when `enabled`; a no-op on CPU (the tests' fp32 path stays exact)."""
    p = next(model.parameters())
    if not enabled or p.device.type != "cuda":
        return contextlib.nullcontext()
    return torch.autocast("cuda", dtype=torch.float16 if p.dtype == torch.float16 else torch.bfloat16)


def low_precision_warning(model, lr: float) -> str | None:
    """A sentence for the log when the weights themselves are 16-bit and updates near `lr`
    fall below half a unit in the last place of typical weights (rounded away)."""
    p = next(model.parameters())
    if p.dtype not in (torch.bfloat16, torch.float16):
        return None
    typical = float(
        torch.stack(
            [q.detach().float().abs().median() for q in model.parameters() if q.ndim >= 2][:64]
        ).median()
    )
    ulp = typical * (2.0**-7 if p.dtype == torch.bfloat16 else 2.0**-10)
    if lr >= ulp / 2:
        return None
    return (
        f"training {str(p.dtype)[6:]} weights in place: a typical weight ({typical:.3g}) moves "
        f"in steps of {ulp:.2g}, updates near lr={lr:g} round away; use dtype: auto "
        f"(fp32 master weights + bf16 autocast)"
    )


class MasterWeightsAdamW(torch.optim.AdamW):
    """AdamW over fp32 master copies of 16-bit weights: the model computes in bf16 (half the
    weight and gradient memory, no autocast casts), the optimiser adds each small update to
    the fp32 copy and writes the rounded result back, so updates below the bf16 step are
    kept rather than lost. 4 bytes a parameter more than bf16 in place, 4 fewer than fp32
    weights with autocast (whose gradients are fp32 too)."""

    def __init__(self, params, **kwargs):
        self.model_params = [p for p in params if p.requires_grad]
        masters = [p.detach().float().clone().requires_grad_(True) for p in self.model_params]
        super().__init__(masters, **kwargs)

    @torch.no_grad()
    def step(self, closure=None):
        masters = self.param_groups[0]["params"]
        for p, m in zip(self.model_params, masters):
            m.grad = None if p.grad is None else p.grad.float()
        loss = super().step(closure)
        for p, m in zip(self.model_params, masters):
            p.copy_(m)
        return loss

    def zero_grad(self, set_to_none: bool = True):
        super().zero_grad(set_to_none)
        for p in self.model_params:
            p.grad = None if set_to_none else (p.grad.zero_() if p.grad is not None else None)


def adamw(params, cfg, device: str, master_weights: bool = False) -> torch.optim.Optimizer:
    """AdamW as the trainers configure it; the fused kernel on CUDA (one launch per step).
    master_weights: fp32 master copies of 16-bit weights (MasterWeightsAdamW); fp32 weights
    need none and train as they are."""
    params = list(params)
    kwargs = dict(lr=cfg.lr, weight_decay=cfg.weight_decay, fused=str(device).startswith("cuda") or None)
    if master_weights and any(p.dtype in (torch.bfloat16, torch.float16) for p in params):
        return MasterWeightsAdamW(params, **kwargs)
    return torch.optim.AdamW(params, **kwargs)
