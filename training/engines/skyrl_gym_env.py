"""SkyRL-Gym's text environment over `trajforge serve`: SkyRL's generator plays any served
GUI environment as one of its own (skyrl-gym 0.4.0, `BaseTextEnv`).

    import training.engines.skyrl_gym_env  # registers "trajforge_gui" with skyrl_gym
    env = skyrl_gym.make("trajforge_gui", env_config={"server_url": "http://envs:8700"},
                         extras={"env": "tiddlywiki", "task_id": "open-control-panel", "seed": 0})
    messages, meta = env.init(prompt)     # the row's prompt is replaced by the episode's turns
    out = env.step(model_text)            # {observations, reward, done, metadata}
    env.close()

SkyRL's generator makes one env per trajectory (`skyrl_gym.make(row["env_class"],
env_config=cfg.environment.skyrl_gym[env_class], extras=<the row's other fields>)`), so a
dataset row names `env_class: trajforge_gui` and its episode as `env`, `task_id`, `seed`
(top-level fields, or inside `extra_info`); `env_config` may give `server_url` (default
$TRAJFORGE_ENV_URL), `policy_id`, `profile`, `image_format`, `mode`, `language`.

- `init` opens the session; the observations are the reasoning set's system turn and
  human turn (the screenshot at the profile's frame as `{"type": "image", "image": PIL}`,
  then the task), as training/engines/gui_episode.py builds them;
- `step(text)` sends the model's text to the server, which parses it in the profile;
  the reward is the environment's step reward (their sum is `make()`'s episode return),
  `done` when the environment ends the episode or SkyRL's `max_turns` runs out (the
  session is then deleted: the server records a failure that says so); the next
  observation is the next human turn (none once done); `metadata` carries the outcome,
  reason, trajectory id and any format error;
- an environment that failed raises training.env_client.EnvFailed (never a reward).

Imports skyrl_gym, httpx, PIL and schemas/ only: it loads in .venv-rl.
"""

from __future__ import annotations

from typing import Any

import skyrl_gym
from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput

from training.engines.gui_episode import EpisodeSpec, GuiEpisode, server_url
from training.env_client import EnvClient
from training.gui_prompt import PromptSettings

ENV_CLASS = "trajforge_gui"
_PROMPT_KEYS = ("mode", "language")


class GuiTextEnv(BaseTextEnv):
    def __init__(self, env_config: Any = None, extras: dict[str, Any] | None = None):
        super().__init__()
        config = dict(env_config or {})
        extras = dict(extras or {})
        spec = EpisodeSpec.from_row(extras, extras.get("extra_info"), where="SkyRL extras (the dataset row)")
        self.max_turns = int(extras.get("max_turns") or config.get("max_turns") or 30)
        self.episode = GuiEpisode(
            EnvClient(server_url(config.get("server_url"), "SkyRL env_config")),
            spec,
            policy_id=config.get("policy_id"),
            profile=config.get("profile"),
            image_format=config.get("image_format") or "png",
            settings=PromptSettings(**{k: config[k] for k in _PROMPT_KEYS if config.get(k)}),
        )

    def init(self, prompt: list[dict]) -> tuple[list[dict], dict[str, Any]]:
        self.episode.reset()
        return self.episode.first_messages(), self.episode.verdict()

    def step(self, action: str) -> BaseTextEnvStepOutput:
        self.turns += 1
        answer = self.episode.step(action)
        done = answer.done or self.turns >= self.max_turns
        return BaseTextEnvStepOutput(
            observations=[] if done else [self.episode.user_turn()],
            reward=answer.reward,
            done=done,
            metadata={
                **self.episode.verdict(),
                "terminated": answer.terminated,
                "truncated": answer.truncated,
            },
        )

    def close(self) -> None:
        self.episode.close()


def register() -> None:
    """Make `skyrl_gym.make(ENV_CLASS, ...)` build a GuiTextEnv (once per process)."""
    if ENV_CLASS not in skyrl_gym.registry:
        skyrl_gym.register(id=ENV_CLASS, entry_point=f"{__name__}:GuiTextEnv")


register()
