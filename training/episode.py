"""One episode of a gymnasium env of trajforge.envs, played by a policy that answers in text.

`play_episode` is the one episode loop of training: rejection sampling
(training/rollouts.py, hence online RL and online evaluation) and the loop against an
OpenAI-compatible server (training/openai_loop.py) play through it. The env is reset
with the caller's seed and options; then `answer_fn(obs, info)` (the reset's info at
the first step, the last step's after) gives the text that goes to `env.step` as it is:
the env parses it in its model profile, plays it and its verifier decides the episode.

Failures are told apart, never raised: an env that failed (`env_failed`, at `reset` or
`step`) and a policy that failed (`policy_failed`) set `error` and keep the exception
for callers that replay or stop; a reward is only ever the env's.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

AnswerFn = Callable[[dict, dict], str]


@dataclass
class EpisodeResult:
    """One episode as played. `reward` is the env's (its verifier's), None when the episode
    did not end through the env (`error` says why). `index` / `seed`: the caller's."""

    index: int | None = None
    task_id: str | None = None
    seed: int | None = None
    reward: float | None = None
    reward_parts: dict | None = None  # info["episode_reward_parts"] (the composite reward)
    outcome: str | None = None
    terminated: bool = False
    truncated: bool = False
    steps: int = 0  # answers the env took
    executed: int = 0  # actions it executed (a format failure executes nothing)
    format_failures: int = 0
    blocked: int = 0  # actions the safety guard refused
    reopened: int = 0  # extra tries the env took to open the episode
    environment: str | None = None
    trajectory_id: str | None = None
    recorded: bool = False
    reason: str | None = None  # the env's (info["reason"])
    episode_error: str | None = None  # the env's account of an episode it failed
    error: str | None = None  # why the episode did not end through the env
    answers: list[str] = field(default_factory=list)
    seconds: float = 0.0
    exception: BaseException | None = field(default=None, repr=False)
    failed_at: str | None = None  # reset, step (the env's) or policy

    @property
    def env_failed(self) -> bool:
        return self.failed_at in ("reset", "step")

    @property
    def policy_failed(self) -> bool:
        return self.failed_at == "policy"


def play_episode(
    env: Any,
    answer_fn: AnswerFn,
    max_steps: int | None = None,
    *,
    seed: int | None = None,
    options: dict | None = None,
) -> EpisodeResult:
    """Reset `env` (with `seed`, `options`) and play one episode with `answer_fn` until the
    env ends it, or `max_steps` answers (a cap of the caller's; the env's own max_steps
    still ends it first) run out. An episode the loop leaves (the cap, a policy failure)
    is ended as an error where the env can say so."""
    task_id = (options or {}).get("task_id")
    result = EpisodeResult(task_id=task_id, seed=seed)
    t0 = time.perf_counter()
    try:
        obs, info = env.reset(seed=seed, options=options)
    except Exception as e:  # noqa: BLE001 - the env's failure: the caller replays or reports it
        _fail(result, "reset", e)
        result.seconds = time.perf_counter() - t0
        return result
    result.environment = info.get("environment")
    result.task_id = (info.get("task") or {}).get("task_id", task_id)
    result.trajectory_id = info.get("trajectory_id")
    result.reopened = max(int(info.get("attempts") or 1) - 1, 0)
    while True:
        if max_steps is not None and result.steps >= max_steps:
            result.error = (
                f"the loop's max_steps={max_steps} ran out before the environment ended the episode"
            )
            _end_with_error(env, result.error)
            break
        try:
            answer = answer_fn(obs, info)
        except Exception as e:  # noqa: BLE001 - the policy's failure: the caller stops or reports it
            _fail(result, "policy", e)
            _end_with_error(env, result.error)
            break
        result.answers.append(answer)
        try:
            obs, reward, terminated, truncated, info = env.step(answer)
        except Exception as e:  # noqa: BLE001 - the env's failure (recorded as an error there)
            _fail(result, "step", e)
            break
        result.steps += 1
        result.executed += info.get("action") is not None
        result.format_failures += info.get("format_error") is not None
        result.blocked += info.get("guard") is not None
        if terminated or truncated:
            _end(result, float(reward), bool(terminated), bool(truncated), info)
            break
    result.seconds = time.perf_counter() - t0
    return result


def _end(result: EpisodeResult, reward: float, terminated: bool, truncated: bool, info: dict) -> None:
    result.reward, result.terminated, result.truncated = reward, terminated, truncated
    result.outcome, result.reason = info.get("outcome"), info.get("reason")
    result.reward_parts = info.get("episode_reward_parts")
    result.trajectory_id = info.get("trajectory_id") or result.trajectory_id
    result.recorded = bool(info.get("recorded"))
    result.episode_error = info.get("episode_error")


def _fail(result: EpisodeResult, where: str, e: Exception) -> None:
    result.failed_at, result.exception = where, e
    result.error = f"{where}: {type(e).__name__}: {e}"


def _end_with_error(env: Any, reason: str) -> None:
    """End the episode in play as an error where the env can say so (GuiEnv); elsewhere the
    next reset (or close) ends it."""
    end = getattr(getattr(env, "unwrapped", env), "end_with_env_failure", None)
    if callable(end):
        try:
            end(reason)
        except Exception as e:  # noqa: BLE001 - the episode is already lost
            log.warning("could not end the episode: %s", e)
