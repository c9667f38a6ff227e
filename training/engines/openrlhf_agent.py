"""OpenRLHF's agent API over `trajforge serve` (openrlhf 0.11.2, `openrlhf.utils.agent`):
OpenRLHF's multi-turn executor plays any served GUI environment.

    python -m openrlhf.cli.train_ppo_ray ... --train.agent_func_path training/engines/openrlhf_agent.py
    # with $TRAJFORGE_ENV_URL set, the repository on PYTHONPATH; each row's label names
    # its episode: {"env": "tiddlywiki", "task_id": "open-control-panel", "seed": 0}

OpenRLHF loads the file's `AgentExecutor` (here GuiAgentExecutor) and calls its
`execute(prompt, label, sampling_params, max_length, hf_tokenizer, llm_engine, images)`
for every sample. GuiAgentExecutor opens the episode first (GuiAgentInstance.reset: the
label's `env`, `task_id`, `seed`), because OpenRLHF's MultiTurnAgentExecutor takes the
first prompt's images from the row, not from a reset: the first screenshot goes in as
`images`, and the row's prompt is replaced by the episode's first turns. Then
MultiTurnAgentExecutor runs as it is, with GuiAgentInstance's `step`:

- the model's action text goes to the server as it came (the server parses it in the
  session's model profile); `rewards` is the environment's step reward (their sum,
  OpenRLHF's `reward`, is `make()`'s episode return), `scores` the episode's return so far;
- `environment_feedback` is the next human turn of the reasoning set (training/gui_prompt.py)
  rendered with the processor's chat template (the text after the model's turn: its
  end, the user turn with the image placeholder, the generation prompt), and
  `environment_images` its screenshot at the profile's frame; a tokenizer without a chat
  template gets the plain text with an `<image>` slot;
- `done` when the environment ends the episode; an episode the executor leaves (its
  token budget spent) has its session deleted: the server records a failure that says so;
- an environment that failed raises training.env_client.EnvFailed (never a reward).

Imports openrlhf.utils.agent (asyncio, aiohttp), numpy, httpx, PIL and schemas/ only: it
loads in .venv-rl. `rewards` are numpy scalars (the executor calls `.item()`).
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
from openrlhf.utils.agent import AgentInstanceBase, MultiTurnAgentExecutor

from training.engines.gui_episode import EpisodeSpec, GuiEpisode, chat_text, server_url, text_after_answer
from training.env_client import EnvClient
from training.gui_prompt import PromptSettings


class GuiAgentInstance(AgentInstanceBase):
    """One episode on `trajforge serve`. `config`: server_url (default $TRAJFORGE_ENV_URL),
    policy_id, profile, image_format, mode, language."""

    def __init__(self, tokenizer: Any = None, **config: Any):
        self.tokenizer = tokenizer
        self.config = config
        self.episode: GuiEpisode | None = None
        self.first_image = None

    async def reset(self, states: dict, **kwargs) -> dict:
        spec = EpisodeSpec.from_row(states.get("label"), where="OpenRLHF label (the dataset row's)")
        c = self.config
        self.episode = GuiEpisode(
            EnvClient(server_url(c.get("server_url"), "OpenRLHF agent")),
            spec,
            policy_id=c.get("policy_id"),
            profile=c.get("profile"),
            image_format=c.get("image_format") or "png",
            settings=PromptSettings(mode=c.get("mode") or "direct", language=c.get("language")),
        )
        await asyncio.to_thread(self.episode.reset)
        self.first_image, parts = self.episode.user_parts()
        messages = [{"role": "system", "content": self.episode.system()}, {"role": "user", "content": parts}]
        return {"observation": chat_text(self.tokenizer, messages)}

    async def step(self, states: dict, **kwargs) -> dict:
        episode = self.episode
        if episode is None:
            raise RuntimeError("reset() the agent before step()")
        answer = await asyncio.to_thread(episode.step, states["action_text"])
        result = {
            "rewards": np.float64(answer.reward),
            "scores": np.float64(episode.episode_return),
            "done": answer.done,
            "extra_logs": {"success": float(answer.info.get("outcome") == "success")},
        }
        if answer.done:
            await asyncio.to_thread(self.close)
            return {**result, "environment_feedback": "", "environment_images": None}
        image, parts = episode.user_parts()
        return {
            **result,
            "environment_feedback": text_after_answer(self.tokenizer, parts),
            "environment_images": [image],
        }

    def close(self) -> None:
        if self.episode is not None:
            self.episode.close()


class _Opened(AgentInstanceBase):
    """The instance MultiTurnAgentExecutor makes (without arguments): the opened episode's."""

    agent: GuiAgentInstance

    def __init__(self):
        pass

    async def reset(self, states: dict, **kwargs) -> dict:
        return {"observation": states["observation"]}

    async def step(self, states: dict, **kwargs) -> dict:
        return await self.agent.step(states, **kwargs)


class GuiAgentExecutor(MultiTurnAgentExecutor):
    """MultiTurnAgentExecutor on a served episode opened before its first turn."""

    def __init__(self, **config: Any):
        super().__init__(GuiAgentInstance)
        self.config = config

    async def execute(
        self, prompt, label, sampling_params, max_length: int, hf_tokenizer, llm_engine, images=None
    ):
        agent = GuiAgentInstance(tokenizer=hf_tokenizer, **self.config)
        try:
            first = await agent.reset({"observation": prompt, "label": label})
            opened = type("OpenedGuiAgent", (_Opened,), {"agent": agent})
            return await MultiTurnAgentExecutor(opened).execute(
                first["observation"],
                label,
                sampling_params,
                max_length,
                hf_tokenizer,
                llm_engine,
                images=[agent.first_image],
            )
        finally:
            await asyncio.to_thread(agent.close)


AgentExecutor = GuiAgentExecutor  # the name `--train.agent_func_path` loads
