"""A VLM agent as a crawl policy: the model sees the screen and answers in GUI-Libra's format.

`AgentPolicy.act(obs)` builds one chat request (schemas/agent_prompt.py: the
task, the last few actions, the screen's elements quoted as data, the
screenshot), asks the backend, and parses the answer into a unified Action with
schemas.converters.gui_libra.from_gui_libra. It is driven by the runner like
any other policy, so the SafetyGuard judges its actions exactly as it judges the
oracle's and the random walk's, and the app's state decides the outcome.

An answer that does not parse is counted (`stats["unparseable"]`) and ends
the episode with a `done` described as "unparseable answer": never a guessed
or random action. The model's reasoning of the last answer is `last_thought`,
which the runner stores as the step's thought.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from schemas.action_words import action_phrase
from schemas.actions import Action, ActionType
from schemas.agent_prompt import agent_messages, history_line, reasoning_set_messages
from schemas.converters.gui_libra import Coords, from_gui_libra
from schemas.errors import SchemaError
from schemas.model_profiles import ModelProfile, model_profile
from schemas.observation import Observation
from schemas.records import Element, Task, Trajectory, step_seed
from schemas.resolution import resize_image
from trajforge.vlm.backends import VLMBackend, VLMRequest

from .episode import element_at
from .guard import ACTIVATABLE_ROLES

log = logging.getLogger(__name__)

UNPARSEABLE = "unparseable answer"
PROMPTS = ("agent", "reasoning_set")
SET_MODES = ("direct", "reason")
# What a point can act on: the recorded target is the innermost of these under
# the point (a tap on a link's label is a tap on the link), else the innermost element.
TARGET_ROLES = ACTIVATABLE_ROLES | {"textbox", "searchbox", "slider", "spinbutton"}


@dataclass(frozen=True)
class AgentSettings:
    """How an AgentPolicy asks its model.

    language: of the prompt (default: the task's). max_steps: the step budget
    the prompt announces (give the runner the same one). coords: the frame of
    the model's points ("pixels" of the screenshot, or "grid1000").
    history_len: how many earlier actions the prompt lists. max_new_tokens,
    temperature: the generation's. seed: with temperature > 0, step k samples
    with (seed * 1009 + k) mod 2^31, so rollouts with different seeds differ and
    each is reproducible.
    prompt: "agent" or "reasoning_set" (None: the backend's `prompt` attribute, else
    "agent"); set_mode: the reasoning set's mode ("direct" or "reason", None: the
    backend's `set_mode`, else "direct"). The reasoning-set prompt lists the whole
    history (as the set does: history_len is ignored) and needs coords="pixels".
    profile: the model profile of the reasoning-set prompt (schemas.model_profiles; None:
    the backend's `profile`, which training.flywheel reads from the set's manifest, else
    the default): the screenshot is resized to its frame as the set's images are, the
    prompt gives that size, and the answer is read in its frame and coordinates.
    episode: a key put in every request's metadata ("episode"), so that a backend that
    records its generations can hand back one episode's when several play at once
    (training.policy_backend.PolicyBackend.take_generations(episode=...)).
    """

    language: str | None = None
    max_steps: int = 30
    coords: Coords = "pixels"
    history_len: int = 8
    max_new_tokens: int = 256
    temperature: float = 0.0
    seed: int | None = None
    prompt: str | None = None
    set_mode: str | None = None
    profile: ModelProfile | str | None = None
    episode: str | None = None


class AgentPolicy:
    """Asks `backend` for each action of `task`, as `settings` say (AgentSettings).

    A policy plays one episode: a replay from scratch takes a fresh one with the
    same settings (`AgentPolicy(p.backend, p.task, p.settings)`).
    """

    name = "agent"

    def __init__(self, backend: VLMBackend, task: Task, settings: AgentSettings = AgentSettings()):
        prompt = settings.prompt or getattr(backend, "prompt", None) or "agent"
        set_mode = settings.set_mode or getattr(backend, "set_mode", None) or "direct"
        coords, max_steps, history_len = settings.coords, settings.max_steps, settings.history_len
        if prompt not in PROMPTS or set_mode not in SET_MODES:
            raise ValueError(
                f"prompt={prompt!r}, set_mode={set_mode!r}: expected a prompt in "
                f"{PROMPTS} and a set_mode in {SET_MODES}"
            )
        if prompt == "reasoning_set" and coords != "pixels":
            raise ValueError("the reasoning-set prompt gives points in pixels: coords must be 'pixels'")
        if max_steps < 1 or history_len < 0:
            raise ValueError(f"max_steps={max_steps} must be >= 1, history_len={history_len} >= 0")
        if coords not in ("pixels", "grid1000"):
            raise ValueError(f"coords={coords!r}: expected 'pixels' or 'grid1000'")
        self.backend = backend
        self.task = task
        self.settings = settings
        self.language = settings.language or task.language
        self.max_steps = max_steps
        self.coords: Coords = coords
        self.history_len = history_len
        self.max_new_tokens = settings.max_new_tokens
        self.temperature = settings.temperature
        self.seed = settings.seed
        self.episode = settings.episode
        self.prompt = prompt
        self.set_mode = set_mode
        self.profile = model_profile(settings.profile or getattr(backend, "profile", None))
        self.steps = 0
        self.history: list[str] = []
        self.set_history: list[str] = []  # the reasoning set's "Step k: ..." lines
        self.stats = {"requests": 0, "parsed": 0, "unparseable": 0}
        self.answers: list[str] = []  # raw answers, in order (for inspection)
        self.last_thought: str | None = None
        self.last_error: str | None = None
        self.last_target: Element | None = None

    @property
    def model_id(self) -> str:
        return self.backend.model_id

    def request(self, obs: Observation) -> VLMRequest:
        if self.prompt == "reasoning_set":
            fw, fh = self.profile.frame(obs.width, obs.height)
            messages = reasoning_set_messages(
                task=self.task.instruction,
                language=self.language,
                mode=self.set_mode,
                history=self.set_history,
                screenshot=self._framed(obs),
                width=fw,
                height=fh,
                coords=self.profile.coords,
            )
            return self._request(messages, obs, (fw, fh))
        start = max(0, len(self.history) - self.history_len)
        shown = [history_line(i, h) for i, h in enumerate(self.history)][start:] if self.history_len else []
        messages = agent_messages(
            task=self.task.instruction,
            language=self.language,
            step=self.steps + 1,
            max_steps=self.max_steps,
            url=obs.url,
            history=shown,
            screenshot=obs.screenshot,
            width=obs.width,
            height=obs.height,
            elements=obs.elements,
            coords=self.coords,
        )
        return self._request(messages, obs)

    def _framed(self, obs: Observation) -> bytes:
        """The screenshot at the profile's frame, resized as the set writer resizes it."""
        size = self.profile.frame(obs.width, obs.height)
        if size == (obs.width, obs.height):
            return obs.screenshot
        return resize_image(obs.screenshot, obs.image_format, size, source=self.task.task_id)

    def _request(
        self, messages: list[dict], obs: Observation, frame: tuple[int, int] | None = None
    ) -> VLMRequest:
        """`frame`: the size the answer's pixels refer to (metadata width/height)."""
        w, h = frame or (obs.width, obs.height)
        return VLMRequest(
            messages=messages,
            key=f"{self.task.task_id}#{self.steps}",
            metadata={
                "task_id": self.task.task_id,
                "step": self.steps,
                "width": w,
                "height": h,
                "prompt": self.prompt,
                "coords": self.profile.coords if frame else self.coords,
                **({"episode": self.episode} if self.episode else {}),
            },
        )

    def act(self, obs: Observation) -> Action:
        req = self.request(obs)
        seed = None if self.seed is None else step_seed(self.seed, self.steps)
        self.steps += 1
        self.stats["requests"] += 1
        raw = self.backend.generate([req], self.max_new_tokens, temperature=self.temperature, seed=seed)[0]
        if not isinstance(raw, str):  # a backend that ignored n=1
            raw = raw[0]
        self.answers.append(raw)
        try:
            if self.prompt == "reasoning_set":
                fw, fh = self.profile.frame(obs.width, obs.height)
                action, thought = from_gui_libra(raw, fw, fh, coords=self.profile.coords)
            else:
                action, thought = from_gui_libra(raw, obs.width, obs.height, coords=self.coords)
        except (SchemaError, ValueError) as e:  # pydantic's errors are ValueErrors too
            self.stats["unparseable"] += 1
            self.last_error = f"{req.key}: {e}"
            self.last_thought = None
            self.last_target = None
            log.info("%s: unparseable answer from %s: %s", req.key, self.model_id, e)
            return Action(type=ActionType.DONE, description=UNPARSEABLE, text=f"{UNPARSEABLE}: {e}"[:300])
        self.stats["parsed"] += 1
        self.last_error = None
        self.last_thought = thought.strip() if thought else None
        self.last_target = target_of(action, obs.elements)
        self.history.append(action.description or action.brief())
        # As synthesis.prompts.history_text words a recorded step (the runner records
        # last_target as the step's target).
        phrase = action_phrase(
            action,
            self.last_target,
            obs.width,
            obs.height,
            self.language,
            self.profile if self.prompt == "reasoning_set" else None,
        )
        k = len(self.set_history) + 1
        self.set_history.append(f"第{k}步：{phrase}" if self.language == "zh" else f"Step {k}: {phrase}")
        return action


def target_of(action: Action, elements: list[Element]) -> Element | None:
    """The element a point action acts on (None without a point: the runner records none)."""
    if action.x is None:
        return None
    actionable = [e for e in elements if e.role in TARGET_ROLES]
    return element_at(actionable, action.x, action.y) or element_at(elements, action.x, action.y)


def settle_unparseable(traj: Trajectory, policy: AgentPolicy) -> Trajectory:
    """The trajectory as a failure when the agent's last answer did not parse.

    Its `done` was no decision of the model's, so whatever the state shows,
    the episode is not one to learn from.
    """
    if policy.last_error is None:
        return traj
    return traj.model_copy(
        update={"outcome": "failure", "verified_by": "none", "error": f"agent: {policy.last_error}"}
    )
