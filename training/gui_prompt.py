"""The prompt a policy plays an environment with: the reasoning set's own, turn by turn.

Both rollout loops over the Gym API / environment server use it: verl's agent loop
(training/engines/verl_agent_loop.py, multi-turn, token ids kept as generated) and the loop
against an OpenAI-compatible server (training/openai_loop.py, one request per step).
A model trained on a reasoning set sees at every step the prompt it was trained on
(schemas.set_prompt, as crawlers.agent.AgentPolicy's "reasoning_set" prompt): the
system turn of the set's mode in the model profile's coordinates, then a human turn
of the screenshot at the profile's frame, the task, the screenshot's size and the
actions executed so far, worded as synthesis words a recorded step
(schemas.action_words).

The frame and coordinates are the environment's: `info["profile"]` of a reset
(`{name, frame: [w, h], coords}`) says in which frame the environment reads the
model's answer, so the screenshot is fed at exactly that size.

Only schemas/ and PIL are imported: the module loads in a trainer's venv (verl's)
where neither gymnasium nor a browser is installed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from PIL import Image

from schemas.action_words import action_phrase
from schemas.actions import Action
from schemas.model_profiles import ModelProfile, model_profile
from schemas.records import Element
from schemas.set_prompt import MODES, human_prompt, system_prompt

IMAGE_SLOT = "<image>"
LANGUAGES = ("en", "zh")


@dataclass
class GuiPrompt:
    """One episode's prompt state: the task, the frame, the executed actions so far.

    `info` is the environment's reset info (a GuiEnv's, or the server's JSON of it);
    `language` defaults to the task's, `mode` is the set's ("direct" or "reason").
    """

    instruction: str
    screen: tuple[int, int]  # (width, height) of the environment's screenshots
    profile: ModelProfile
    frame: tuple[int, int]  # (width, height) the model sees the screenshot at
    language: str = "en"
    mode: str = "direct"
    history: list[str] = field(default_factory=list)

    @classmethod
    def from_reset(
        cls,
        obs: dict,
        info: dict,
        *,
        language: str | None = None,
        mode: str = "direct",
    ) -> GuiPrompt:
        shot = obs["screenshot"]
        width, height = _size_of(shot)
        named = (info.get("profile") or {}).get("name")
        profile = model_profile(named)
        frame = tuple((info.get("profile") or {}).get("frame") or profile.frame(width, height))
        task = info.get("task") or {}
        language = language or task.get("language") or "en"
        if language not in LANGUAGES or mode not in MODES:
            raise ValueError(f"language={language!r}, mode={mode!r}: expected one of {LANGUAGES} and {MODES}")
        return cls(
            instruction=obs.get("instruction") or task.get("instruction") or "",
            screen=(width, height),
            profile=profile,
            frame=(int(frame[0]), int(frame[1])),
            language=language,
            mode=mode,
        )

    # ------------------------------------------------------------------ the turns
    def system(self) -> str:
        return system_prompt(self.mode, self.language, self.profile.coords)

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
            image = image.resize(self.frame, Image.Resampling.BICUBIC)
        return image

    def observation_parts(self, screenshot: Any) -> tuple[Image.Image, list[dict]]:
        """(the framed image, the human turn's content parts: the image, then the text)."""
        image = self.framed(screenshot)
        return image, [{"type": "image", "image": image}, {"type": "text", "text": self.human_text()}]

    # ------------------------------------------------------------------ after a step
    def record(self, info: dict) -> str | None:
        """Add the step's action to the history when it ran (a step whose answer did not
        parse, or that the guard refused, executed nothing and gets no line); the line."""
        if not info.get("executed") or not info.get("action"):
            return None
        action = Action.model_validate(info["action"])
        target = info.get("target")
        target = element_of(target, *self.screen) if target and target.get("role") else None
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


def _size_of(screenshot: Any) -> tuple[int, int]:
    if isinstance(screenshot, Image.Image):
        return screenshot.size
    shape = np.asarray(screenshot).shape
    return int(shape[1]), int(shape[0])


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
