"""Fused kernels where they are installed: liger-kernel's RMSNorm, RoPE and SwiGLU.

liger-kernel is optional (a Triton package for CUDA; the CPU tests and the default venv do
not have it). `apply_liger` patches the model's modules in place when the package imports
and the model is on CUDA, and returns the line the trainer logs either way, so a run's log
says which kernels it ran. The loss's fused linear + cross-entropy is not Liger's: TRL's
fused LM head (training.engines.trl_sft) already never builds the [B, T, V] logits, and the
builtin loop's weighted loss needs per-token NLL (training.loss).
"""

from __future__ import annotations

import importlib.util

# model_type -> liger_kernel.transformers function that patches that family
_LIGER = {
    "qwen2_5_vl": "apply_liger_kernel_to_qwen2_5_vl",
    "qwen2_vl": "apply_liger_kernel_to_qwen2_vl",
    "qwen3_vl": "apply_liger_kernel_to_qwen3_vl",
}


def liger_available() -> bool:
    return importlib.util.find_spec("liger_kernel") is not None


def apply_liger(model, enabled: bool = True) -> str:
    """Patch `model` with Liger's RMSNorm/RoPE/SwiGLU kernels when possible; the log line."""
    if not enabled:
        return "liger kernels: off (liger_kernels: false)"
    if not liger_available():
        return "liger kernels: liger-kernel is not installed, using transformers' own modules"
    p = next(model.parameters())
    if p.device.type != "cuda":
        return "liger kernels: not on CUDA, using transformers' own modules"
    model_type = getattr(model.config, "model_type", "")
    name = _LIGER.get(model_type)
    if name is None:
        return f"liger kernels: no Liger patch for model type {model_type!r}"
    import liger_kernel.transformers as liger

    patch = getattr(liger, name, None)
    if patch is None:
        return f"liger kernels: this liger-kernel has no {name}"
    patch(
        model=model,
        rope=True,
        rms_norm=True,
        swiglu=True,
        cross_entropy=False,
        fused_linear_cross_entropy=False,
    )
    return f"liger kernels: {name} (RMSNorm, RoPE, SwiGLU)"


def thin_checkpointing(model, every: int) -> tuple[int, int]:
    """Keep activation checkpointing on every `every`-th text decoder layer only (the others
    keep their activations: faster, more memory); (checkpointed, layers). every=1 leaves
    each layer as load_policy set it. Checkpointing only where memory needs it: raise
    `every` until the step no longer fits, then step back."""
    inner = getattr(model, "model", model)
    layers = getattr(getattr(inner, "language_model", inner), "layers", None)
    if layers is None:
        raise ValueError(f"{type(model).__name__}: no text decoder layers to thin checkpointing on")
    if every > 1:
        for i, layer in enumerate(layers):
            if getattr(layer, "gradient_checkpointing", False):
                layer.gradient_checkpointing = i % every == 0
    return sum(bool(getattr(layer, "gradient_checkpointing", False)) for layer in layers), len(layers)
