"""VLM backends: one protocol, a local transformers model or an OpenAI-compatible endpoint.

`VLMBackend.generate(requests, max_new_tokens)` answers a list of chat requests
(see `messages.py` for the message layout) with one text each, in the caller's
order. With `n > 1` it returns n samples per request (a list of n texts each).

TransformersBackend (transformers_backend.py) loads torch lazily, so code that
only talks to an endpoint never imports it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from trajforge.vlm.messages import validate_messages

__all__ = ["VLMRequest", "VLMBackend", "backend_from_config"]  # + the lazy TransformersBackend, OpenAIBackend


@dataclass(frozen=True)
class VLMRequest:
    """One chat request. `messages`: OpenAI chat layout, image parts as bytes.

    `key` is the caller's label for logs and errors (e.g. a trajectory id).
    """

    messages: list[dict]
    key: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        validate_messages(self.messages, where=f"VLMRequest {self.key!r}" if self.key else "VLMRequest")


@runtime_checkable
class VLMBackend(Protocol):
    @property
    def model_id(self) -> str: ...

    def generate(
        self,
        requests: list[VLMRequest],
        max_new_tokens: int,
        *,
        temperature: float = 0.0,
        n: int = 1,
        seed: int | None = None,
    ) -> list[str] | list[list[str]]: ...


def check_sampling(n: int, temperature: float) -> None:
    """The sampling arguments every backend accepts: n >= 1, and n > 1 only when sampling."""
    if n < 1:
        raise ValueError(f"n={n} must be >= 1")
    if n > 1 and temperature <= 0:
        raise ValueError("n > 1 samples need temperature > 0 (greedy decoding gives n equal answers)")


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


def __getattr__(name: str):
    # Lazy re-exports: importing this module must not import torch.
    if name == "TransformersBackend":
        from trajforge.vlm.transformers_backend import TransformersBackend

        return TransformersBackend
    if name == "OpenAIBackend":
        from trajforge.vlm.openai_backend import OpenAIBackend

        return OpenAIBackend
    raise AttributeError(name)
