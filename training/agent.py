"""A VLM backend as a policy of the Gym API: it reads the observation and answers in text.

`TextAgent` plays any gymnasium env of trajforge.envs (a GuiEnv over an environment
file or the sandbox, a RemoteEnv): each step it builds one chat request from the
observation with the prompt the crawl's agent uses (schemas.agent_prompt: the
task, the earlier actions, the screen's elements quoted as data, the screenshot)
or, for a backend trained on a reasoning set (`prompt = "reasoning_set"`, e.g.
training.policy_backend.PolicyBackend), that set's own prompt; it asks the backend
and hands the env the answer's text. The env parses it in its model profile
(trajforge.envs.answers) and counts what does not parse as a format failure.

The frame is the env's: the screenshot is resized to the profile's frame
(`info["profile"]`) and the prompt's points and boxes are in that frame, so the
env reads the answer in the frame the model saw. Sampling is seeded per step as
the crawl's agent seeds it (schemas.records.step_seed), and every request's
metadata carries `episode` (the rollout's trajectory id), so a recording backend
hands back one rollout's generations (PolicyBackend.take_generations(episode=...)).
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np
from PIL import Image

from schemas.actions import Action
from schemas.agent_prompt import agent_messages, history_line, reasoning_set_messages
from schemas.model_profiles import model_profile
from schemas.records import Element, step_seed
from training.gui_prompt import element_of, set_history_line
from trajforge.vlm.backends import VLMBackend, VLMRequest

PROMPTS = ("agent", "reasoning_set")
SET_MODES = ("direct", "reason")


class TextAgent:
    """Asks `backend` for each answer of one episode (see the module docstring).

    Call it with each step's observation and info (the reset's first: training.episode's
    answer_fn), or `begin(obs, info)` after `env.reset`, `answer(obs, info)` for each
    step's text and `observe(info)` with each step's info. max_steps: the budget the
    agent prompt announces (None: the env's, `info["max_steps"]`); history_len:
    earlier actions the agent prompt lists; prompt / set_mode: as the backend's
    attributes say (else "agent" / "direct").
    """

    def __init__(
        self,
        backend: VLMBackend,
        *,
        max_steps: int | None = None,
        history_len: int = 8,
        max_new_tokens: int = 256,
        temperature: float = 0.0,
        seed: int | None = None,
        prompt: str | None = None,
        set_mode: str | None = None,
        episode: str | None = None,
    ):
        prompt = prompt or getattr(backend, "prompt", None) or "agent"
        set_mode = set_mode or getattr(backend, "set_mode", None) or "direct"
        if prompt not in PROMPTS or set_mode not in SET_MODES:
            raise ValueError(
                f"prompt={prompt!r}, set_mode={set_mode!r}: expected a prompt in {PROMPTS} "
                f"and a set_mode in {SET_MODES}"
            )
        if history_len < 0 or (max_steps is not None and max_steps < 1):
            raise ValueError(f"max_steps={max_steps} must be >= 1, history_len={history_len} >= 0")
        self.backend = backend
        self.prompt, self.set_mode = prompt, set_mode
        self.max_steps, self.history_len = max_steps, history_len
        self.max_new_tokens, self.temperature, self.seed = max_new_tokens, temperature, seed
        self.episode = episode
        self.steps = 0
        self.history: list[str] = []  # the agent prompt's earlier actions
        self.set_history: list[str] = []  # the reasoning set's "Step k: ..." lines
        self.answers: list[str] = []
        self.begun = False

    @property
    def model_id(self) -> str:
        return self.backend.model_id

    # ------------------------------------------------------------------ the episode
    def __call__(self, obs: dict, info: dict) -> str:
        """This step's answer: the reset's info begins the episode, a step's joins the history."""
        if self.begun:
            self.observe(info)
        else:
            self.begin(obs, info)
        return self.answer(obs, info)

    def begin(self, obs: dict, info: dict) -> None:
        """A new episode: its task and frame from the reset's info."""
        task = info.get("task") or {}
        self.task_id = str(task.get("task_id", ""))
        self.language = task.get("language") or "en"
        self.instruction = obs.get("instruction") or task.get("instruction", "")
        self.budget = self.max_steps or int(info.get("max_steps") or 30)
        self.height, self.width = obs["screenshot"].shape[:2]
        profile = info.get("profile") or {}
        self.profile = model_profile(profile.get("name"))
        self.coords = profile.get("coords") or self.profile.coords
        if self.prompt == "agent" and self.coords not in ("pixels", "grid1000"):
            raise ValueError(
                f"profile {self.profile.name}: the agent prompt gives points in pixels or on the "
                f"0-1000 grid, not {self.coords!r} (use a reasoning-set backend)"
            )
        self.steps, self.begun = 0, True
        self.history, self.set_history, self.answers = [], [], []

    def request(self, obs: dict, info: dict) -> VLMRequest:
        """The chat request of this step."""
        height, width = obs["screenshot"].shape[:2]
        fw, fh = self.profile.frame(width, height)
        image = _png(obs["screenshot"], (fw, fh))
        if self.prompt == "reasoning_set":
            messages = reasoning_set_messages(
                task=self.instruction,
                language=self.language,
                mode=self.set_mode,
                history=self.set_history,
                screenshot=image,
                width=fw,
                height=fh,
                coords=self.coords,
            )
        else:
            start = max(0, len(self.history) - self.history_len)
            shown = (
                [history_line(i, h) for i, h in enumerate(self.history)][start:] if self.history_len else []
            )
            messages = agent_messages(
                task=self.instruction,
                language=self.language,
                step=self.steps + 1,
                max_steps=self.budget,
                url=obs.get("url") or "",
                history=shown,
                screenshot=image,
                width=fw,
                height=fh,
                elements=elements_of(info, width, height),
                coords=self.coords,
            )
        return VLMRequest(
            messages=messages,
            key=f"{self.task_id}#{self.steps}",
            metadata={
                "task_id": self.task_id,
                "step": self.steps,
                "width": fw,
                "height": fh,
                "prompt": self.prompt,
                "coords": self.coords,
                **({"episode": self.episode} if self.episode else {}),
            },
        )

    def answer(self, obs: dict, info: dict) -> str:
        """The model's answer to this step (an exception of the model's is raised as is)."""
        req = self.request(obs, info)
        seed = None if self.seed is None else step_seed(self.seed, self.steps)
        self.steps += 1
        raw = self.backend.generate([req], self.max_new_tokens, temperature=self.temperature, seed=seed)[0]
        if not isinstance(raw, str):  # a backend that ignored n=1
            raw = raw[0]
        self.answers.append(raw)
        return raw

    def observe(self, info: dict) -> None:
        """The step's outcome: an action the env parsed joins the history."""
        if not info.get("action"):
            return
        action = Action.model_validate(info["action"])
        self.history.append(action.description or action.brief())
        target = element_of(info.get("target"), self.width, self.height)
        profile = self.profile if self.prompt == "reasoning_set" else None
        k = len(self.set_history) + 1
        self.set_history.append(
            set_history_line(k, action, target, (self.width, self.height), self.language, profile)
        )


def elements_of(info: dict, width: int, height: int) -> list[Element]:
    """info["elements"] (boxes in screenshot pixels) as normalised Elements."""
    out = []
    for e in info.get("elements") or ():
        made = element_of(e, width, height)
        if made is not None:
            out.append(made)
    return out


def _png(pixels: Any, size: tuple[int, int]) -> bytes:
    """The screenshot as PNG at `size` (LANCZOS, as the set writer resizes: schemas.resolution)."""
    image = Image.fromarray(np.asarray(pixels, dtype=np.uint8)).convert("RGB")
    if image.size != tuple(size):
        image = image.resize(size, Image.Resampling.LANCZOS)
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()
