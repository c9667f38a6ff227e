"""Rollouts of a policy served behind any OpenAI-compatible endpoint (vLLM, SGLang, a hosted
API), on environments through the Gym API: many episodes in flight, each recorded.

    from training.openai_loop import OpenAIPolicy, play_openai
    import trajforge.envs as tf_envs

    policy = OpenAIPolicy("http://127.0.0.1:8000/v1", "my-checkpoint")
    results = play_openai(
        lambda: tf_envs.make("examples/environments/tiddlywiki.yaml", record_to="data", policy_id="ckpt-1200"),
        [{"task_id": "open-control-panel", "seed": s} for s in range(16)],
        policy,
        concurrency=4,
    )

`make_env` opens one environment per worker thread (`trajforge.envs.make`, or
`RemoteEnv(url, name)` on a `trajforge serve` server): `concurrency` sessions play at
once, each on its own thread (Playwright's sync API is bound to the thread that
launched the browser), while the policy server batches their requests. Each episode
plays through training.episode.play_episode; each step is one chat request with the
reasoning set's prompt (training/gui_prompt.py): the system turn of `mode` in the environment's model profile, then the screenshot at the
profile's frame as an `image_url` data URI (PNG) and the task with the actions so far.
The answer text goes to `env.step` as it came: the environment parses it in the
profile's frame (a format failure is the policy's, counted, not an error).

Every episode is recorded where the environment records (`make(..., record_to=...)`,
`trajforge serve --record-to`); `EpisodeResult` (training.episode) says which
trajectory it became.
An episode the environment or the policy server failed has `error` set and
`reward` None, never 0; the next episode on that thread starts on a fresh reset.

The API key is read from `api_key_env` when `play_openai` starts and lives only in
that call's client: an `OpenAIPolicy` holds the variable's name, never your key. Only a
key a proxy hands one rollout (AReaL's, docs/rl-environments.md) is held, as `api_key`,
out of its repr.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from schemas.records import step_seed
from training.episode import EpisodeResult, play_episode
from training.gui_prompt import GuiPrompt, PromptSettings
from trajforge.vlm.messages import to_openai_messages

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OpenAIPolicy:
    """Where the policy is served and how to ask it. `temperature` > 0 samples, with step
    k of an episode seeded schemas.records.step_seed(seed, k) when the episode has a seed.
    `language` is the prompt's (default: the task's); `mode` the reasoning set's
    ("direct" or "reason"). `extra_body`: server-specific fields (vLLM's `top_k`, ...)."""

    base_url: str
    model: str
    api_key_env: str = "OPENAI_API_KEY"
    max_tokens: int = 256
    temperature: float = 0.0
    mode: str = "direct"
    language: str | None = None
    timeout_s: float = 120.0
    max_retries: int = 2
    max_tokens_field: str = "max_tokens"
    extra_body: dict | None = None
    # A per-rollout key a proxy hands out (AReaL's proxy routes a rollout's requests by it),
    # used instead of api_key_env's; never printed.
    api_key: str | None = field(default=None, repr=False)

    def client(self):
        from openai import OpenAI

        key = self.api_key or os.environ.get(self.api_key_env)
        if not key:  # a local vLLM server without --api-key takes any key
            log.info("%s is not set: calling %s without an API key", self.api_key_env, self.base_url)
            key = "EMPTY"
        return OpenAI(
            base_url=self.base_url, api_key=key, timeout=self.timeout_s, max_retries=self.max_retries
        )


def play_openai(
    make_env: Callable[[], Any],
    episodes: int | Sequence[dict],
    policy: OpenAIPolicy,
    *,
    concurrency: int = 4,
    max_steps: int | None = None,
) -> list[EpisodeResult]:
    """Play `episodes` (a count, or dicts of `task_id` / `seed`) with `policy`,
    `concurrency` at a time, each worker thread on its own `make_env()`; the results in
    the episodes' order. `max_steps`: a cap of this loop's own on steps per episode
    (the environment's max_steps still ends it first)."""
    if concurrency < 1:
        raise ValueError(f"concurrency={concurrency} must be >= 1")
    specs = [{} for _ in range(episodes)] if isinstance(episodes, int) else [dict(e) for e in episodes]
    todo: queue.Queue = queue.Queue()
    for i, spec in enumerate(specs):
        todo.put((i, spec))
    results: list[EpisodeResult | None] = [None] * len(specs)
    failures: list[BaseException] = []
    client = policy.client()

    def worker() -> None:
        env = None
        try:
            env = make_env()
            while True:
                try:
                    i, spec = todo.get_nowait()
                except queue.Empty:
                    return
                results[i] = _play_one(env, i, spec, policy, client, max_steps)
        except BaseException as e:  # noqa: BLE001 - make_env failed: reported below
            failures.append(e)
        finally:
            if env is not None:
                env.close()

    threads = [
        threading.Thread(target=worker, name=f"openai-loop-{k}", daemon=True)
        for k in range(min(concurrency, max(1, len(specs))))
    ]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        client.close()
    if failures and any(r is None for r in results):
        raise RuntimeError(f"{len(failures)} worker(s) could not play: {failures[0]!r}") from failures[0]
    return [r for r in results if r is not None]


def _play_one(
    env, index: int, spec: dict, policy: OpenAIPolicy, client, max_steps: int | None
) -> EpisodeResult:
    task_id, seed = spec.get("task_id"), spec.get("seed")
    settings = PromptSettings(mode=policy.mode, language=policy.language)
    prompt: GuiPrompt | None = None
    step = 0

    def answer(obs: dict, info: dict) -> str:
        nonlocal prompt, step
        if prompt is None:
            prompt = GuiPrompt.from_reset(obs, info, settings)
        else:
            prompt.record(info)
        step += 1
        return _ask(client, policy, prompt.messages(obs, info, step - 1), seed, step - 1)

    result = play_episode(
        env, answer, max_steps, seed=seed, options={"task_id": task_id} if task_id else None
    )
    result.index = index
    return result


def _ask(client, policy: OpenAIPolicy, messages: list[dict], seed: int | None, step: int) -> str:
    body: dict[str, Any] = {
        "model": policy.model,
        "messages": to_openai_messages(messages),
        "temperature": policy.temperature,
        policy.max_tokens_field: policy.max_tokens,
    }
    if seed is not None and policy.temperature > 0:
        body["seed"] = step_seed(seed, step)
    if policy.extra_body:
        body["extra_body"] = policy.extra_body
    response = client.chat.completions.create(**body)
    return response.choices[0].message.content or ""
