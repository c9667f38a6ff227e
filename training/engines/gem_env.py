"""GEM's environment over `trajforge serve` (gem-llm 0.1.0, `gem.Env`): ROLL's agentic
pipeline, or any GEM loop, plays a served GUI environment as one of GEM's.

    import training.engines.gem_env  # registers "trajforge:gui" with gem
    env = gem.make("trajforge:gui", server_url="http://envs:8700", env="tiddlywiki",
                   task_id="open-control-panel")
    obs, info = env.reset(seed=0)          # obs: the task turn's text; the screenshot in info
    obs, reward, terminated, truncated, info = env.step(model_text)
    env.close()

ROLL makes its environments with `gem.make(env_id=env_config["env_type"],
**env_config["config"])`: `env_type: trajforge:gui`, and `config` carries `server_url`
(default $TRAJFORGE_ENV_URL), `env`, `task_id`, `seed`, `policy_id`, `profile`,
`image_format`, `mode`, `language`. One env object keeps one session; each `reset(seed)`
starts the next episode on it (the seed given, else the config's).

- The observation is the reasoning set's human turn as text (the task, the frame's size,
  the actions so far); `info["image"]` is the screenshot at the model profile's frame
  (a PIL image; `render()` gives it as an RGB array), `info["env_instruction"]` the set's
  system turn (ROLL's env managers put it in the first prompt), `info["env_info"]` the
  server's info;
- `step(text)` sends the model's text to the server, which parses it in the profile; the
  reward is the environment's step reward (their sum is `make()`'s episode return),
  terminated / truncated as the environment says (truncated at its max_steps);
- an environment that failed raises training.env_client.EnvFailed (never a reward).

Imports gem, httpx, PIL and schemas/ only: it loads in .venv-rl.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gem.core import Env
from gem.envs.registration import ENV_REGISTRY, register

from training.engines import gui_episode
from training.engines.gui_episode import EpisodeSpec, GuiEpisode
from training.env_client import Answer, EnvClient
from training.gui_prompt import PromptSettings

ENV_ID = "trajforge:gui"


class GuiGemEnv(Env):
    def __init__(
        self,
        env: str | None = None,
        *,
        server_url: str | None = None,
        task_id: str | None = None,
        seed: int | None = None,
        policy_id: str | None = None,
        profile: str | None = None,
        image_format: str = "png",
        mode: str = "direct",
        language: str | None = None,
        **config: Any,
    ):
        super().__init__()
        url = gui_episode.server_url(server_url, "GEM env config")
        if config:
            raise ValueError(f"GEM env config: unknown fields {sorted(config)}")
        spec = EpisodeSpec.from_row({"env": env, "task_id": task_id, "seed": seed}, where="GEM env config")
        self.episode = GuiEpisode(
            EnvClient(url),
            spec,
            policy_id=policy_id,
            profile=profile,
            image_format=image_format,
            settings=PromptSettings(mode=mode, language=language),
        )

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed)
        answer = self.episode.reset(seed=seed)
        return self._observed(answer)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        answer = self.episode.step(action)
        obs, info = self._observed(answer)
        return obs, answer.reward, answer.terminated, answer.truncated, info

    def render(self, mode: str = "rgb_array") -> np.ndarray:
        return np.asarray(self.episode.user_parts()[0])

    def close(self) -> None:
        self.episode.close()

    def _observed(self, answer: Answer) -> tuple[str, dict[str, Any]]:
        image, _ = self.episode.user_parts()
        info = {
            **self.episode.verdict(),
            "image": image,
            "env_instruction": self.episode.system(),
            "env_info": answer.info,
        }
        return self.episode.prompt.human_text(), info


if ENV_ID not in ENV_REGISTRY:
    register(ENV_ID, entry_point=f"{__name__}:GuiGemEnv")
