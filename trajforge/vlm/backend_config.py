"""A VLM backend from a plain dict (a Dagster resource's or the CLI's config).

The transformers backend is imported only when asked for, so code that only
talks to an endpoint never imports torch.
"""

from __future__ import annotations

from trajforge.vlm.backends import VLMBackend


def backend_from_config(config: dict) -> VLMBackend:
    """Build a backend from a plain dict, e.g. a Dagster resource's config.

    {"kind": "transformers", "path": ..., "device": "auto", "dtype": "auto", "batch_size": 8,
     "max_image_pixels": ...} or {"kind": "openai", "base_url": ..., "model": ...,
     "api_key_env": "OPENAI_API_KEY", "timeout_s": 60, "max_concurrency": 8}.
    The API key itself is never part of a config: only the variable's name.
    """
    cfg = dict(config)
    kind = cfg.pop("kind", None)
    if "api_key" in cfg:
        raise ValueError("backend config: pass api_key_env (the variable's name), never the key itself")
    if kind == "transformers":
        from trajforge.vlm.transformers_backend import TransformersBackend

        return TransformersBackend(**cfg)
    if kind == "openai":
        from trajforge.vlm.openai_backend import OpenAIBackend

        return OpenAIBackend(**cfg)
    raise ValueError(f"backend config: kind={kind!r} is not 'transformers' or 'openai'")
