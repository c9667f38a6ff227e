"""VLM backends: one protocol, a local transformers model or an OpenAI-compatible endpoint.

`VLMBackend.generate(requests, max_new_tokens)` answers a list of chat requests
(see `messages.py` for the message layout) with one text each, in the caller's
order. With `n > 1` it returns n samples per request (a list of n texts each).

The two backends (transformers_backend.py, openai_backend.py) import this module;
`backend_from_config` (backend_config.py) builds either from a plain dict.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from trajforge.vlm.messages import validate_messages

__all__ = ["VLMRequest", "VLMBackend", "check_sampling"]


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
