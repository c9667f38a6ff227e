"""A VLM behind an OpenAI-compatible chat endpoint (vLLM, SGLang, a hosted API).

The API key is read from an environment variable when a call is made and lives
only in the short-lived client of that call: the backend object holds the
variable's name, never the key, so its repr, its config and anything that
serialises it (a Dagster resource, a log line, run metadata) cannot leak it.
"""

from __future__ import annotations

import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor

from trajforge.vlm.backends import VLMRequest, check_sampling
from trajforge.vlm.messages import to_openai_messages

log = logging.getLogger(__name__)


class OpenAIBackend:
    def __init__(
        self,
        base_url: str,
        model: str,
        api_key_env: str = "OPENAI_API_KEY",
        timeout_s: float = 120.0,
        max_concurrency: int = 8,
        max_retries: int = 2,
        max_image_pixels: int | None = None,
        max_tokens_field: str = "max_tokens",
    ):
        """`max_tokens_field`: "max_tokens" (vLLM, most servers) or
        "max_completion_tokens" (newer hosted models refuse the former)."""
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency={max_concurrency} must be >= 1")
        self.base_url = base_url
        self.model = model
        self.api_key_env = api_key_env
        self.timeout_s = timeout_s
        self.max_concurrency = max_concurrency
        self.max_retries = max_retries
        self.max_image_pixels = max_image_pixels
        self.max_tokens_field = max_tokens_field

    @property
    def model_id(self) -> str:
        return self.model

    def __repr__(self) -> str:
        return (
            f"OpenAIBackend(base_url={self.base_url!r}, model={self.model!r}, "
            f"api_key_env={self.api_key_env!r})"
        )

    def _client(self):
        from openai import OpenAI

        key = os.environ.get(self.api_key_env)
        if not key:
            # A local vLLM server without --api-key accepts any key.
            log.info("%s is not set: calling %s without an API key", self.api_key_env, self.base_url)
            key = "EMPTY"
        return OpenAI(
            base_url=self.base_url, api_key=key, timeout=self.timeout_s, max_retries=self.max_retries
        )

    def generate(
        self,
        requests: list[VLMRequest],
        max_new_tokens: int,
        *,
        temperature: float = 0.0,
        n: int = 1,
        seed: int | None = None,
    ) -> list[str] | list[list[str]]:
        """One text per request (n == 1) or n samples per request, in the caller's order."""
        check_sampling(n, temperature)
        client = self._client()

        def one(req: VLMRequest) -> list[str]:
            body = {
                "model": self.model,
                "n": n,
                "temperature": temperature,
                "messages": to_openai_messages(req.messages, self.max_image_pixels),
                self.max_tokens_field: max_new_tokens,
            }
            if seed is not None:
                body["seed"] = seed
            t0 = time.perf_counter()
            try:
                resp = client.chat.completions.create(**body)
            except Exception as exc:  # noqa: BLE001 - re-raised with the request named
                raise RuntimeError(
                    f"{self.base_url} ({self.model}): request {req.key!r} failed: {type(exc).__name__}: {exc}"
                ) from exc
            choices = sorted(resp.choices, key=lambda c: c.index)
            if len(choices) != n:
                raise RuntimeError(
                    f"{self.base_url} ({self.model}): request {req.key!r}: "
                    f"asked for {n} choices, got {len(choices)}"
                )
            log.debug("request %r answered in %.2fs", req.key, time.perf_counter() - t0)
            return [c.message.content or "" for c in choices]

        try:
            with ThreadPoolExecutor(max_workers=min(self.max_concurrency, max(1, len(requests)))) as pool:
                results = list(pool.map(one, requests))
        finally:
            client.close()
        if n == 1:
            return [r[0] for r in results]
        return results
