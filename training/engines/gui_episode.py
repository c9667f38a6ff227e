"""One served GUI episode as a text policy's turns: what the SkyRL-Gym, GEM and OpenRLHF
adapters (skyrl_gym_env.py, gem_env.py, openrlhf_agent.py beside this) share.

    with GuiEpisode(EnvClient(url), EpisodeSpec("tiny", task_id="press-add", seed=0)) as episode:
        episode.reset()
        messages = episode.first_messages()          # the system turn, then the screenshot + task
        answer = episode.step("<answer>{...}</answer>")  # the model's text, parsed by the server
        answer.reward, answer.done, episode.user_turn()

The turns are the reasoning set's (training/gui_prompt.py, as the verl and OpenAI loops
ask): the screenshot at the model profile's frame (a PIL image, as a processor's
chat template takes it: `{"type": "image", "image": PIL}`) and the task with the actions
so far. The answer text goes to the server as it came; it parses it in the session's
profile (a format failure is the policy's, `info["format_error"]`, not an error). An
environment that failed raises training.env_client.EnvFailed: never a reward.

Imports httpx, PIL and schemas/ only (no gymnasium, no browser): it loads in .venv-rl.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from PIL import Image

from training.env_client import Answer, EnvClient, EnvServerError
from training.gui_prompt import IMAGE_SLOT, GuiPrompt, PromptSettings

URL_ENV = "TRAJFORGE_ENV_URL"  # where `trajforge serve` answers, when a config does not say
_ANSWER = "\x00trajforge-answer\x00"  # where the model's text sits in a rendered template


@dataclass(frozen=True)
class EpisodeSpec:
    """Which served environment, task and seed an episode plays (a dataset row's fields)."""

    env: str
    task_id: str | None = None
    seed: int | None = None

    @classmethod
    def from_row(cls, *fields: Any, where: str) -> EpisodeSpec:
        """The spec from the first of `fields` (dicts, or JSON objects as text) naming `env`;
        `where` names the fields in the error."""
        for value in fields:
            if isinstance(value, str) and value.strip().startswith("{"):
                try:
                    value = json.loads(value)
                except ValueError as e:
                    raise ValueError(f"{where}: not a JSON object ({e})") from None
            if isinstance(value, dict) and value.get("env"):
                seed = value.get("seed")
                return cls(str(value["env"]), value.get("task_id"), None if seed is None else int(seed))
        raise ValueError(f"{where}: no `env` (the name a `trajforge serve` server serves)")


def server_url(given: str | None, where: str) -> str:
    url = given or os.environ.get(URL_ENV)
    if not url:
        raise ValueError(f"{where}: no server_url, and ${URL_ENV} is not set (`trajforge serve`'s URL)")
    return url


class GuiEpisode:
    """One session of `trajforge serve`, reset as often as the caller plays episodes."""

    def __init__(
        self,
        client: EnvClient,
        spec: EpisodeSpec,
        *,
        policy_id: str | None = None,
        profile: str | None = None,
        image_format: str = "png",
        settings: PromptSettings | None = None,
    ):
        self.client, self.spec = client, spec
        self.policy_id, self.profile, self.image_format = policy_id, profile, image_format
        self.settings = settings or PromptSettings()
        self.session: str | None = None
        self.prompt: GuiPrompt | None = None
        self.last: Answer | None = None
        self.episode_return = 0.0

    def __enter__(self) -> GuiEpisode:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def reset(self, *, task_id: str | None = None, seed: int | None = None) -> Answer:
        """The next episode (the spec's task and seed unless given): the session's first reset
        opens it."""
        task_id = task_id or self.spec.task_id
        seed = self.spec.seed if seed is None else seed
        if self.session is None:
            self.session, answer = self.client.open(
                self.spec.env,
                task_id=task_id,
                seed=seed,
                policy_id=self.policy_id,
                profile=self.profile,
                image_format=self.image_format,
            )
        else:
            answer = self.client.reset(self.session, task_id=task_id, seed=seed)
        self.prompt = GuiPrompt.from_reset(answer.observation, answer.info, self.settings)
        self.last, self.episode_return = answer, 0.0
        return answer

    def step(self, text: str) -> Answer:
        """The model's answer, as it came; the prompt's history gets the action when it ran."""
        if self.session is None or self.prompt is None:
            raise RuntimeError("reset() the episode before step()")
        answer = self.client.step(self.session, text)
        self.prompt.record(answer.info)
        self.last = answer
        self.episode_return += answer.reward
        return answer

    def first_messages(self) -> list[dict]:
        """The episode's first turns: the set's system turn, then `user_turn()`."""
        return [
            {"role": "system", "content": self.system()},
            {"role": "user", "content": self.user_parts()[1]},
        ]

    def system(self) -> str:
        return self._prompt().system()

    def user_parts(self) -> tuple[Image.Image, list[dict]]:
        """(the framed screenshot, the set's human turn: the image part, then the text)."""
        return self._prompt().observation_parts(self.last.observation["screenshot"])

    def user_turn(self) -> dict:
        return {"role": "user", "content": self.user_parts()[1]}

    def verdict(self) -> dict:
        """The last answer's outcome fields (what a framework's metadata carries)."""
        info = self.last.info if self.last else {}
        return {
            "trajectory_id": info.get("trajectory_id"),
            "task_id": (info.get("task") or {}).get("task_id") or self.spec.task_id,
            "outcome": info.get("outcome"),
            "reason": info.get("reason"),
            "format_error": info.get("format_error"),
            "episode_return": self.episode_return,
        }

    def close(self) -> None:
        """Delete the session (an episode left open is recorded as a failure that says so)."""
        session, self.session = self.session, None
        try:
            if session is not None:
                self.client.close(session)
        except EnvServerError:
            pass  # reaped meanwhile: the episode's record stands
        finally:
            self.client.disconnect()

    def _prompt(self) -> GuiPrompt:
        if self.prompt is None or self.last is None:
            raise RuntimeError("reset() the episode first")
        return self.prompt


# ---------------------------------------------------------------- turns as a token stream's text
def chat_text(tokenizer: Any, messages: list[dict]) -> str:
    """The first turns as the model reads them: the processor's chat template with the
    generation prompt; without a template, the plain text with an image slot per image."""
    if hasattr(tokenizer, "apply_chat_template"):
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return "\n".join(_plain(m["content"]) for m in messages) + "\n"


def text_after_answer(tokenizer: Any, parts: list[dict]) -> str:
    """What follows the model's text in the stream: its turn's end, the next user turn
    (`parts`), the generation prompt. So the first turns + answer + this + answer + ... are
    what the chat template makes of the whole conversation."""
    if hasattr(tokenizer, "apply_chat_template"):
        turns = [
            {"role": "user", "content": "."},
            {"role": "assistant", "content": _ANSWER},
            {"role": "user", "content": parts},
        ]
        text = tokenizer.apply_chat_template(turns, tokenize=False, add_generation_prompt=True)
        return text.split(_ANSWER, 1)[1]
    return "\n" + _plain(parts) + "\n"


def _plain(content: str | list[dict]) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(IMAGE_SLOT if p.get("type") == "image" else p.get("text", "") for p in content)
