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


def adamw(params, cfg, device: str) -> torch.optim.Optimizer:
    """AdamW as the trainers configure it; the fused kernel on CUDA (one launch per step)."""
    return torch.optim.AdamW(
        params, lr=cfg.lr, weight_decay=cfg.weight_decay, fused=str(device).startswith("cuda") or None
    )
