"""The one prompt a policy plays an environment with, turn by turn.

Every rollout loop over the Gym API / environment server builds its requests here:
rejection sampling, online RL and evaluation (training.agent.TextAgent, one chat request
a step), the loop against an OpenAI-compatible server (training/openai_loop.py) and
verl's agent loop (training/engines/verl_agent_loop.py, multi-turn, token ids kept as
generated). Two prompts, as the crawl's agent (crawlers.agent.AgentPolicy) has them:

- "reasoning_set": what a model trained on a reasoning set saw (schemas.set_prompt):
  the system turn of the set's mode in the model profile's coordinates, then a human
  turn of the screenshot at the profile's frame, the task, the frame's size and the
  actions executed so far, worded as synthesis words a recorded step
  (schemas.action_words, as synthesis.prompts.executed_history);
- "agent": the crawl agent's own (schemas.agent_prompt.agent_messages): the task, the
  step budget, the URL, the earlier actions' descriptions and the screen's elements
  quoted as data, the screenshot.

Both keep the same history: the actions that ran (a step whose answer did not parse,
or that the guard refused, executed nothing and gets no line), each with the element
the environment recorded as its target, as the recorded step holds it. The screenshot
is resized to the profile's frame with LANCZOS, as the set writer resizes it
(schemas.resolution.resize_image), so a trained model sees the pixels it was trained on.

The frame and coordinates are the environment's: `info["profile"]` of a reset
(`{name, frame: [w, h], coords}`) says in which frame the environment reads the
model's answer.

Only schemas/ and PIL are imported: the module loads in a trainer's venv (verl's)
where neither gymnasium nor a browser is installed.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from PIL import Image

from schemas.action_words import action_phrase
from schemas.actions import Action
from schemas.agent_prompt import agent_messages, history_line, reasoning_set_messages
from schemas.model_profiles import ModelProfile, model_profile
from schemas.records import Element
from schemas.set_prompt import MODES, human_prompt, system_prompt

IMAGE_SLOT = "<image>"
LANGUAGES = ("en", "zh")
PROMPTS = ("agent", "reasoning_set")
AGENT_COORDS = ("pixels", "grid1000")  # the agent prompt's answer frames


@dataclass
class PromptSettings:
    """How a policy is asked. prompt: "reasoning_set" or "agent"; mode: the set's
    ("direct" or "reason"); language: the prompt's (None: the task's); max_steps: the
    budget the agent prompt announces (None: the env's); history_len: the earlier
    actions the agent prompt lists (the set's prompt lists them all, as the set does)."""

    prompt: str = "reasoning_set"
    mode: str = "direct"
    language: str | None = None
    max_steps: int | None = None
    history_len: int = 8

    def __post_init__(self) -> None:
        if self.prompt not in PROMPTS or self.mode not in MODES:
            raise ValueError(
                f"prompt={self.prompt!r}, mode={self.mode!r}: expected a prompt in {PROMPTS} "
                f"and a mode in {MODES}"
            )
        if self.history_len < 0 or (self.max_steps is not None and self.max_steps < 1):
            raise ValueError(f"max_steps={self.max_steps} must be >= 1, history_len={self.history_len} >= 0")


@dataclass
class GuiPrompt:
    """One episode's prompt state: the task, the frame, the executed actions so far.

    Made from the environment's reset (`from_reset`: a GuiEnv's info, or the server's
    JSON of it); `record(info)` after each step.
    """

    instruction: str
    screen: tuple[int, int]  # (width, height) of the environment's screenshots
    profile: ModelProfile
    frame: tuple[int, int]  # (width, height) the model sees the screenshot at
    coords: str  # the frame the answer's points are in: "pixels" of `frame`, "grid1000", ...
    settings: PromptSettings = field(default_factory=PromptSettings)
    language: str = "en"
    max_steps: int = 30
    history: list[str] = field(default_factory=list)  # the set's "Step k: ..." lines
    descriptions: list[str] = field(default_factory=list)  # the agent prompt's earlier actions

    @classmethod
    def from_reset(
        cls, obs: dict, info: dict, settings: PromptSettings | None = None, **overrides: Any
    ) -> GuiPrompt:
        """The prompt of the episode a reset began. `overrides`: PromptSettings' fields
        (`GuiPrompt.from_reset(obs, info, mode="reason")`)."""
        settings = settings or PromptSettings()
        if overrides:
            settings = PromptSettings(**{**settings.__dict__, **overrides})
        width, height = _size_of(obs["screenshot"])
        given = info.get("profile") or {}
        profile = model_profile(given.get("name"))
        frame = given.get("frame") or profile.frame(width, height)
        coords = given.get("coords") or profile.coords
        task = info.get("task") or {}
        language = settings.language or task.get("language") or "en"
        if language not in LANGUAGES:
            raise ValueError(f"language={language!r}: expected one of {LANGUAGES}")
        if settings.prompt == "agent" and coords not in AGENT_COORDS:
            raise ValueError(
                f"profile {profile.name}: the agent prompt gives points in pixels or on the "
                f"0-1000 grid, not {coords!r} (ask with the reasoning set's prompt)"
            )
        return cls(
            instruction=obs.get("instruction") or task.get("instruction") or "",
            screen=(width, height),
            profile=profile,
            frame=(int(frame[0]), int(frame[1])),
            coords=coords,
            settings=settings,
            language=language,
            max_steps=settings.max_steps or int(info.get("max_steps") or 30),
        )

    @property
    def mode(self) -> str:
        return self.settings.mode

    # ------------------------------------------------------------------ the turns
    def messages(self, obs: dict, info: dict, step: int) -> list[dict]:
        """The chat messages of step `step` (from 0), the screenshot a PNG at the frame."""
        fw, fh = self.frame
        png = _png(self.framed(obs["screenshot"]))
        if self.settings.prompt == "reasoning_set":
            return reasoning_set_messages(
                task=self.instruction,
                language=self.language,
                mode=self.mode,
                history=self.history,
                screenshot=png,
                width=fw,
                height=fh,
                coords=self.coords,
            )
        keep = self.settings.history_len
        lines = [history_line(i, d) for i, d in enumerate(self.descriptions)]
        return agent_messages(
            task=self.instruction,
            language=self.language,
            step=step + 1,
            max_steps=self.max_steps,
            url=obs.get("url") or "",
            history=lines[-keep:] if keep else [],
            screenshot=png,
            width=fw,
            height=fh,
            elements=elements_of(info, *self.screen),
            coords=self.coords,
        )

    def system(self) -> str:
        """The reasoning set's system turn."""
        return system_prompt(self.mode, self.language, self.coords)

    def human_text(self) -> str:
        """The set's human turn without its image slot (the image part goes before it)."""
        text = human_prompt(self.instruction, self.history, *self.frame, self.language)
        before, slot, after = text.partition(IMAGE_SLOT)
        if not slot or before:
            raise ValueError(f"the set's human turn should open with {IMAGE_SLOT}: {text[:80]!r}")
        return after.removeprefix("\n")

    def framed(self, screenshot: Any) -> Image.Image:
        """The screenshot (H x W x 3 array or PIL image) at the profile's frame, RGB."""
        image = screenshot if isinstance(screenshot, Image.Image) else Image.fromarray(np.asarray(screenshot))
        image = image.convert("RGB")
        if image.size != self.frame:
            image = image.resize(self.frame, Image.Resampling.LANCZOS)
        return image

    def observation_parts(self, screenshot: Any) -> tuple[Image.Image, list[dict]]:
        """(the framed image, the set's human turn's content parts: the image, then the text)."""
        image = self.framed(screenshot)
        return image, [{"type": "image", "image": image}, {"type": "text", "text": self.human_text()}]

    # ------------------------------------------------------------------ after a step
    def record(self, info: dict) -> str | None:
        """Add the step's action to the history when it ran; the set's line for it."""
        if not info.get("executed") or not info.get("action"):
            return None
        action = Action.model_validate(info["action"])
        target = element_of(info.get("target"), *self.screen)
        self.descriptions.append(action.description or action.brief())
        line = set_history_line(
            len(self.history) + 1, action, target, self.screen, self.language, self.profile
        )
        self.history.append(line)
        return line


def set_history_line(
    k: int,
    action: Action,
    target: Element | None,
    screen: tuple[int, int],
    language: str,
    profile: ModelProfile | None,
) -> str:
    """Step k's line of the reasoning set's "previous actions", worded as synthesis words a
    recorded step (schemas.action_words) in the model profile's frame."""
    phrase = action_phrase(action, target, *screen, language, profile)
    return f"第{k}步：{phrase}" if language == "zh" else f"Step {k}: {phrase}"


def element_of(e: dict | None, width: int, height: int) -> Element | None:
    """An element as info gives it (`target`, each of `elements`: role, name, box in
    screenshot pixels) as a record Element, its box normalised to the screen."""
    if not e:
        return None
    box = e.get("bbox")
    bbox = None
    if box is not None and width and height:
        x0, y0, x1, y1 = (float(v) for v in box)
        bbox = (x0 / width, y0 / height, max(x1, x0) / width, max(y1, y0) / height)
    return Element(role=str(e.get("role") or ""), name=str(e.get("name") or ""), bbox=bbox)


def elements_of(info: dict, width: int, height: int) -> list[Element]:
    """info["elements"] (boxes in screenshot pixels) as normalised Elements."""
    made = (element_of(e, width, height) for e in info.get("elements") or ())
    return [e for e in made if e is not None]


def _size_of(screenshot: Any) -> tuple[int, int]:
    if isinstance(screenshot, Image.Image):
        return screenshot.size
    shape = np.asarray(screenshot).shape
    return int(shape[1]), int(shape[0])


def _png(image: Image.Image) -> bytes:
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()
