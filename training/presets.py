"""The builtin kinds' settings per training mode: "tiny" (the offline tiny Qwen2-VL with
random weights, a few steps on small images: it proves the plumbing on a CPU, its
numbers mean nothing) and "full" (a real model on a GPU node). The training assets start
from them; anything set in an asset's config wins.
"""

TINY_IMAGE_PIXELS = 28 * 28 * 16  # 16 image tokens

SFT_DEFAULTS = {
    # the tiny tokenizer is byte-level with 1k words: prompts run long; over-long samples
    # are skipped and counted (metadata `skipped.*`) rather than failing the demo
    "tiny": {
        "max_steps": 8,
        "lr": 2e-3,
        "batch_size": 2,
        "max_length": 4096,
        "image_max_pixels": TINY_IMAGE_PIXELS,
        "max_samples": 32,
        "skip_bad_samples": True,
    },
    "full": {
        "max_steps": 2000,
        "lr": 1e-5,
        "batch_size": 4,
        "max_length": 4096,
        "image_max_pixels": 1280 * 28 * 28,
        "warmup_steps": 50,
    },
}
RL_DEFAULTS = {
    "tiny": {
        "max_steps": 2,
        "lr": 1e-4,
        "group_size": 4,
        "max_new_tokens": 32,
        "max_length": 4096,
        "image_max_pixels": TINY_IMAGE_PIXELS,
        "prompts_per_step": 1,
        "ppo_epochs": 2,
        "mode_filter": "direct",
    },  # direct-act prompts: 32 new tokens can hold the answer
    # 8 prompts x G 8 = 64 rollouts per step, reused PPO-style: 2 passes of 2 minibatches,
    # 4 optimiser steps per batch of rollouts (the ratio moves, the clip acts)
    "full": {
        "max_steps": 500,
        "lr": 1e-6,
        "group_size": 8,
        "batch_size": 8,
        "max_new_tokens": 256,
        "max_length": 4096,
        "image_max_pixels": 1280 * 28 * 28,
        "prompts_per_step": 8,
        "ppo_epochs": 2,
        "minibatch_size": 32,
    },
}
ONLINE_DEFAULTS = {
    "tiny": {
        "k": 2,
        "iterations": 1,
        "tasks_per_iteration": 1,
        "max_steps": 3,
        "max_new_tokens": 48,
        "max_length": 4096,
        "image_max_pixels": TINY_IMAGE_PIXELS,
        "tasks": ["notes.pin", "mobile_shop.favorite_item"],
    },
    "full": {
        "k": 8,
        "iterations": 20,
        "tasks_per_iteration": 16,
        "max_steps": 15,
        "max_new_tokens": 256,
        "max_length": 8192,
        "image_max_pixels": 1280 * 28 * 28,
        "ppo_epochs": 2,
    },
}
EVAL_DEFAULTS = {
    "tiny": {
        "max_samples": 8,
        "max_steps": 3,
        "max_new_tokens": 48,
        "image_max_pixels": TINY_IMAGE_PIXELS,
        "tasks": ["notes.pin", "mobile_shop.favorite_item"],
    },
    "full": {"max_steps": 15, "max_new_tokens": 256, "image_max_pixels": 1280 * 28 * 28},
}

PRESETS = {"sft": SFT_DEFAULTS, "rl": RL_DEFAULTS, "online": ONLINE_DEFAULTS, "eval": EVAL_DEFAULTS}
