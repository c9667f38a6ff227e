"""verl's multi-turn GUI agent loop: a policy plays a trajforge environment through the
environment server, its token ids kept exactly as generated.

    # agent_loop.yaml, named by actor_rollout_ref.rollout.agent.agent_loop_config_path
    - name: trajforge_gui
      _target_: training.engines.verl_agent_loop.GuiAgentLoop
      server_url: http://envs.internal:8700     # `trajforge serve ...`; or $TRAJFORGE_ENV_URL

A row of the RL dataset names the loop (`agent_name: trajforge_gui`, or
`rollout.agent.default_agent_loop`) and its episode in `extra_info`: `env` (a name the
server serves), `task_id` and `seed` (optional). training/engines/env_tasks.py writes such a
parquet from the server's own list of environments and tasks.

One `run` is one episode (docs/rl-environments.md, "verl"):

1. `POST /v1/sessions` opens the episode; the first observation becomes the prompt: the
   reasoning set's system turn and human turn (training/gui_prompt.py), the screenshot
   at the frame the environment reads answers in (`info["profile"]`), tokenised once by
   verl's Continuous Token builder through the processor (image pads expanded);
2. each turn, verl's server manager generates from the token ids so far (all the
   episode's screenshots as `image_data`); the generated ids are appended verbatim
   (mask 1, their log-probs kept), their decoded text is the action sent to
   `POST /v1/sessions/{id}/step` (the environment parses it in the profile's frame; an
   answer that does not parse is the policy's format failure, not an error);
3. the next screenshot and the set's human turn (the actions so far) are appended as a
   user message, tokenised alone by the builder's incremental path (mask 0: no loss on
   observations), the screenshot added to the multimodal data;
4. until the environment ends the episode (terminated, or truncated at its max_steps),
   or the response budget (`rollout.response_length`) or `max_turns` runs out (the
   session is then deleted: the server records a failure that says so, the reward is 0).

The reward is the environment's episode reward (its verifier's), or with
`reward: shaped` the composite of `info["episode_reward_parts"]`. An environment that
fails (HTTP 503, a lost connection) is never a reward: the episode is played again
from scratch up to `env_retries` times, then the error is raised.

Imports verl, httpx (training/env_client.py), PIL and schemas/ only: put the repository on the workers'
PYTHONPATH (Ray's runtime_env) so that `_target_` resolves.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, fields
from typing import Any
from uuid import uuid4

from verl.experimental.agent_loop.agent_loop import (
    AgentLoopBase,
    AgentLoopOutput,
    _agent_loop_registry,
    register,
)
from verl.utils.profiler import simple_timer
from verl.utils.rollout_trace import rollout_trace_op

from training.env_client import Answer, AsyncEnvClient, EnvFailed, EnvServerError
from training.gui_prompt import GuiPrompt

log = logging.getLogger(__name__)

AGENT_NAME = "trajforge_gui"
URL_ENV = "TRAJFORGE_ENV_URL"
REWARDS = ("task", "shaped")


class _Retry(Exception):
    """The environment failed mid-episode: play the episode again."""


@dataclass(frozen=True)
class LoopSettings:
    """The agent-loop YAML entry's own keys (GuiAgentLoop's docstring says what each means)."""

    server_url: str | None = None
    env: str | None = None
    mode: str = "direct"
    language: str | None = None
    max_turns: int | None = None
    max_tokens_per_turn: int = 512
    reward: str = "task"
    policy_id: str | None = None
    image_format: str = "png"
    profile: str | None = None
    request_timeout: float = 120.0
    open_timeout: float = 600.0
    env_retries: int = 1


class GuiAgentLoop(AgentLoopBase):
    """See the module docstring. Keyword arguments (from the agent-loop YAML entry,
    LoopSettings):

    server_url: the environment server (default $TRAJFORGE_ENV_URL); a row's
    `extra_info.server_url` wins. env: the environment when a row names none.
    mode / language: the set's prompt mode ("direct", "reason") and language (default
    the task's). max_turns: model turns per episode (default
    `multi_turn.max_assistant_turns`, else the environment's max_steps).
    max_tokens_per_turn: the cap of one generation. reward: "task" or "shaped".
    policy_id: the policy the server records (default "verl:<experiment_name>").
    image_format: how screenshots travel ("png" lossless, "jpeg"). profile: the model
    profile the server reads answers in (qwen2.5-vl, qwen3-vl, open-autoglm, ...;
    default the environment's).
    """

    def __init__(self, *args: Any, **kwargs: Any):
        # verl's hydra passes the YAML entry's keys and AgentLoopBase's own arguments together.
        settings = LoopSettings(
            **{f.name: kwargs.pop(f.name) for f in fields(LoopSettings) if f.name in kwargs}
        )
        super().__init__(*args, **kwargs)
        if settings.reward not in REWARDS:
            raise ValueError(f"reward={settings.reward!r}: expected one of {REWARDS}")
        if settings.max_tokens_per_turn < 1 or settings.env_retries < 0:
            raise ValueError(
                f"max_tokens_per_turn={settings.max_tokens_per_turn} >= 1, env_retries={settings.env_retries} >= 0"
            )
        self.server_url = settings.server_url or os.environ.get(URL_ENV)
        self.env_name = settings.env
        self.mode, self.language = settings.mode, settings.language
        self.max_turns = settings.max_turns or self.rollout_config.multi_turn.get("max_assistant_turns")
        self.max_tokens_per_turn = settings.max_tokens_per_turn
        self.reward = settings.reward
        experiment = self.config.get("trainer", {}).get("experiment_name")
        self.policy_id = settings.policy_id or (f"verl:{experiment}" if experiment else "verl")
        self.image_format, self.profile = settings.image_format, settings.profile
        self.request_timeout, self.open_timeout = settings.request_timeout, settings.open_timeout
        self.env_retries = settings.env_retries
        self.prompt_length = self.rollout_config.prompt_length
        self.response_length = self.rollout_config.response_length

    @rollout_trace_op
    async def run(self, sampling_params: dict[str, Any], priority: int = 0, **kwargs: Any) -> AgentLoopOutput:
        extra = dict(kwargs.get("extra_info") or {})
        env = extra.get("env") or self.env_name
        url = extra.get("server_url") or self.server_url
        if not env or not url:
            raise ValueError(
                f"{AGENT_NAME}: a row needs extra_info.env (or the loop's env=) and a server "
                f"(server_url=, extra_info.server_url or ${URL_ENV}); got env={env!r}, url={url!r}"
            )
        seed = extra.get("seed")
        episode = {
            "env": str(env),
            "task_id": extra.get("task_id") or None,
            "seed": None if seed is None else int(seed),
        }
        async with AsyncEnvClient(
            url, timeout=self.request_timeout, open_timeout=self.open_timeout
        ) as client:
            for attempt in range(self.env_retries + 1):
                try:
                    return await self._episode(client, episode, sampling_params, int(priority))
                except _Retry as failed:
                    if attempt == self.env_retries:
                        raise failed.__cause__ from None
                    log.warning(
                        "%s: the environment failed (%s); playing the episode again", env, failed.__cause__
                    )
        raise AssertionError("unreachable")

    async def _episode(
        self, client: AsyncEnvClient, episode: dict, sampling_params: dict[str, Any], priority: int
    ) -> AgentLoopOutput:
        metrics: dict[str, Any] = {}
        with simple_timer("tool_calls", metrics):
            session, first = await _env_call(
                client.open(
                    episode["env"],
                    task_id=episode["task_id"],
                    seed=episode["seed"],
                    policy_id=self.policy_id,
                    profile=self.profile,
                    image_format=self.image_format,
                )
            )
        try:
            return await self._play(
                client, session, first, episode["env"], sampling_params, priority, metrics
            )
        finally:
            try:
                await client.close(session)
            except EnvServerError as e:  # the episode's outcome stands
                log.warning("could not delete session %s: %s", session, e)

    async def _play(
        self,
        client: AsyncEnvClient,
        session: str,
        first: Answer,
        env: str,
        sampling_params: dict[str, Any],
        priority: int,
        metrics: dict[str, Any],
    ) -> AgentLoopOutput:
        prompt = GuiPrompt.from_reset(first.observation, first.info, language=self.language, mode=self.mode)
        image, parts = prompt.observation_parts(first.observation["screenshot"])
        messages: list[dict] = [
            {"role": "system", "content": prompt.system()},
            {"role": "user", "content": parts},
        ]
        images = [image]
        mm_kwargs = self._get_mm_processor_kwargs()
        self._assert_mm_supported(True)
        token_ids = await self.ct_build_initial_tokens(messages, images=images)
        mask: list[int] = []
        logprobs: list[float] | None = None
        extra: dict[str, Any] = {}
        request_id = uuid4().hex
        last, turns, format_failures, end, preempted = first, 0, 0, None, None
        while end is None:
            room = self.response_length - len(mask)
            if room <= 0:
                end = "response_length"
                break
            if self.max_turns and turns >= self.max_turns:
                end = "max_turns"
                break
            params = {**sampling_params, "max_tokens": min(self.max_tokens_per_turn, room)}
            with simple_timer("generate_sequences", metrics):
                out = await self.server_manager.generate(
                    request_id=request_id,
                    prompt_ids=token_ids,
                    sampling_params=params,
                    image_data=images,
                    mm_processor_kwargs=mm_kwargs,
                    priority=priority,
                )
            if out.num_preempted is not None:
                preempted = (preempted or 0) + out.num_preempted
            _merge_server_fields(extra, out.extra_fields)
            turns += 1
            if logprobs is None and out.log_probs:
                logprobs = [0.0] * len(mask)
            merged, mask, logprobs = await self.ct_merge_assistant_token(
                token_ids,
                out.token_ids,
                mask,
                logprobs,
                assistant_logprobs=out.log_probs if logprobs is not None else None,
            )
            token_ids = merged.token_ids
            text = self.tokenizer.decode(out.token_ids, skip_special_tokens=True)
            messages.append({"role": "assistant", "content": text})
            with simple_timer("tool_calls", metrics):
                last = await _env_call(client.step(session, text))
            format_failures += last.info.get("format_error") is not None
            prompt.record(last.info)
            if last.done:
                end = "terminated" if last.terminated else "truncated"
                break
            # The next observation: a user turn of its own, tokenised alone (mask 0).
            image, parts = prompt.observation_parts(last.observation["screenshot"])
            before = list(messages)
            messages.append({"role": "user", "content": parts})
            merged, new_mask, new_logprobs = await self.ct_merge_context_msg(
                before, messages, token_ids, mask, logprobs
            )
            if len(new_mask) >= self.response_length:  # no room left to answer it
                messages.pop()
                end = "response_length"
                break
            token_ids, mask, logprobs = merged.token_ids, new_mask, new_logprobs
            images.append(image)

        n = len(mask)
        info = last.info if last.done else {}
        extra.update(
            {
                "turn_scores": [],
                "tool_rewards": [],
                "env": first.info.get("environment") or env,
                "task_id": (first.info.get("task") or {}).get("task_id"),
                "trajectory_id": info.get("trajectory_id") or first.info.get("trajectory_id"),
                "outcome": info.get("outcome") or "failure",
                "reason": info.get("reason") or (None if last.done else f"episode left at {end}"),
                "episode_end": end,
                "env_steps": turns,
                "format_failures": format_failures,
                "screenshots": len(images),
            }
        )
        metrics["num_preempted"] = -1 if preempted is None else preempted
        return AgentLoopOutput(
            prompt_ids=token_ids[: len(token_ids) - n],
            response_ids=token_ids[len(token_ids) - n :],
            response_mask=mask,
            response_logprobs=logprobs,
            multi_modal_data={"images": images},
            mm_processor_kwargs=mm_kwargs,
            reward_score=self._reward(last),
            num_turns=len(messages) - 1,
            metrics=metrics,
            extra_fields=extra,
        )

    def _reward(self, last: Answer) -> float:
        """The environment's episode reward; 0 for an episode the loop left unfinished."""
        if not last.done:
            return 0.0
        if self.reward == "shaped":
            return float(last.info["episode_reward_parts"]["reward"])
        return float(last.reward)


async def _env_call(call):
    """The server's answer; an environment that failed (EnvFailed) asks for a replay."""
    try:
        return await call
    except EnvFailed as e:
        raise _Retry() from e


def _merge_server_fields(extra: dict[str, Any], fields: dict[str, Any]) -> None:
    """The rollout server's extra fields (global steps), as verl's ToolAgentLoop keeps them."""
    if not extra:
        extra.update(fields)
        return
    if fields.get("max_global_steps") is not None:
        extra["max_global_steps"] = fields["max_global_steps"]


# verl's AgentLoopWorker reads the agent_loop_config_path entries (with their arguments)
# into its registry before hydra imports this module to build the first loop; a plain
# @register(AGENT_NAME) would then replace the entry named so by one without arguments,
# and every later episode would lose server_url and the rest. Register only a name the
# YAML did not take.
if AGENT_NAME not in _agent_loop_registry:
    register(AGENT_NAME)(GuiAgentLoop)
