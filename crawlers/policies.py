"""Policies: what picks the next action from an observation.

- OraclePolicy follows a task template's plan (sandbox.tasks.base.PlanOracle).
- RandomWalkPolicy explores the visible controls at random, in the manner of
  OS-Genesis' reverse task synthesis: record interactions first, name the
  task later.
- ReplayPolicy plays back a recorded list of actions.

A policy may expose `last_target`, the element its last action aimed at; the
runner records it as the step's target.
"""
from __future__ import annotations

import random
from typing import Protocol, runtime_checkable

from schemas.actions import Action, ActionType
from schemas.observation import Observation
from schemas.records import Element, Task

from sandbox.distractions import DISMISS_NAMES
from sandbox.tasks.base import VISIBLE_MAX, VISIBLE_MIN, PlanOracle, TaskTemplate

from .guard import SafetyGuard


@runtime_checkable
class Policy(Protocol):
    name: str

    def act(self, obs: Observation) -> Action: ...


class OraclePolicy:
    """The template's plan, resolved against the live tree at every step."""

    name = "oracle"

    def __init__(self, template: TaskTemplate, task: Task):
        self.template = template
        self.task = task
        self.oracle: PlanOracle = template.oracle(task)

    def act(self, obs: Observation) -> Action:
        return self.oracle.next_action(obs)  # OracleError ends the episode

    @property
    def last_target(self) -> Element | None:
        return self.oracle.last_target


# Roles the random walk may activate; comboboxes are left out because the
# tree does not say which options a closed <select> holds.
EXPLORE_ROLES = {"link", "button", "tab", "checkbox", "switch", "radio", "textbox",
                 "searchbox", "menuitem"}
TEXT_ROLES = {"textbox", "searchbox"}

VOCABULARY = {
    "en": ["hello", "coffee", "meeting", "weekend", "blue", "book", "test", "price",
           "travel", "photo"],
    "zh": ["你好", "咖啡", "会议", "周末", "蓝色", "书", "测试", "价格", "旅行", "照片"],
}


class RandomWalkPolicy:
    """Taps, types, scrolls and goes back at random; `done` after max_steps.

    Controls the guard would refuse are never chosen, so a walk is not cut
    short by a guard block. Controls tapped less often are preferred, so the
    walk spreads over the app instead of bouncing between two links.
    """

    name = "random_walk"

    def __init__(self, seed: int, max_steps: int = 20, *, lang: str = "en",
                 guard: SafetyGuard | None = None, p_scroll: float = 0.12,
                 p_back: float = 0.06, p_enter: float = 0.5):
        if max_steps < 1:
            raise ValueError(f"max_steps={max_steps} must be at least 1")
        self.rng = random.Random(f"random_walk:{seed}")
        self.max_steps = max_steps
        self.vocabulary = VOCABULARY.get(lang, VOCABULARY["en"])
        self.guard = guard or SafetyGuard()
        self.p_scroll, self.p_back, self.p_enter = p_scroll, p_back, p_enter
        self.steps = 0
        self.pending: list[Action] = []
        self.visits: dict[tuple[str, str], int] = {}
        self.last_target: Element | None = None

    def act(self, obs: Observation) -> Action:
        self.last_target = None
        self.steps += 1
        if self.steps >= self.max_steps:
            self.pending.clear()
            return Action(type=ActionType.DONE, text="random walk finished",
                          description=f"Stop after {self.max_steps} steps")
        if self.pending:
            return self.pending.pop(0)
        candidates = self.candidates(obs)
        dismiss = [e for e in candidates if e.role == "button" and e.name.strip() in DISMISS_NAMES]
        if dismiss and self.rng.random() < 0.8:
            return self._tap(dismiss[0], f"Dismiss '{dismiss[0].name}'")
        r = self.rng.random()
        if r < self.p_back and self.steps > 1:
            return Action(type=ActionType.BACK, description="Go back")
        if r < self.p_back + self.p_scroll or not candidates:
            direction = "down" if self.rng.random() < 0.75 else "up"
            return Action.scroll(direction, 0.5, 0.5, description=f"Scroll {direction}")
        el = self._pick(candidates)
        if el.role in TEXT_ROLES:
            word = self.rng.choice(self.vocabulary)
            self.pending.append(Action(type=ActionType.TYPE, text=word,
                                       description=f"Type '{word}'"))
            if self.rng.random() < self.p_enter:
                self.pending.append(Action.key("Enter", description="Press Enter"))
            return self._tap(el, f"Tap the {el.role} '{el.name}'")
        return self._tap(el, f"Tap {el.role} '{el.name}'")

    def candidates(self, obs: Observation) -> list[Element]:
        """Visible controls the walk may touch (never a guarded one)."""
        out = []
        for e in obs.elements:
            if e.role not in EXPLORE_ROLES or e.bbox is None:
                continue
            x0, y0, x1, y1 = e.bbox
            if x1 - x0 <= 0 or y1 - y0 <= 0:
                continue
            cx, cy = e.centre()
            if not (VISIBLE_MIN <= cy <= VISIBLE_MAX and 0.0 <= cx <= 1.0):
                continue
            if self.guard.is_sensitive(e):
                continue
            out.append(e)
        return out

    def _pick(self, candidates: list[Element]) -> Element:
        weights = [1.0 / (1 + self.visits.get((e.role, e.name), 0)) for e in candidates]
        el = self.rng.choices(candidates, weights=weights, k=1)[0]
        self.visits[(el.role, el.name)] = self.visits.get((el.role, el.name), 0) + 1
        return el

    def _tap(self, el: Element, description: str) -> Action:
        x, y = el.centre()
        self.last_target = el
        return Action.tap(min(max(x, 0.0), 1.0), min(max(y, 0.0), 1.0), description=description)


class ReplayPolicy:
    """Plays back `actions` in order; `done` once they run out."""

    name = "replay"

    def __init__(self, actions: list[Action]):
        self.actions = list(actions)
        self.pos = 0
        self.last_target: Element | None = None  # the runner finds it from the point

    def act(self, obs: Observation) -> Action:
        if self.pos >= len(self.actions):
            return Action(type=ActionType.DONE, description="Replay finished")
        action = self.actions[self.pos]
        self.pos += 1
        return action
