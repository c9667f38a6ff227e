"""Task templates and the plan-following oracle.

A template turns (language, seed) into a Task with parameters drawn from the
app's seeded data, says how to solve it as a plan over accessibility-tree
targets, and decides success from the app's state. The oracle resolves each
plan step against the *live* tree at every step: no coordinates are stored.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Union

from crawlers.policy_errors import PolicyError
from schemas.action_words import ZH_ROLE  # the oracle's role words
from schemas.actions import Action, ActionType
from schemas.observation import Observation
from schemas.records import Element, Task

from ..distractions import DISMISS_NAMES


class OracleError(PolicyError):
    """The oracle cannot go on (target never appeared, too many scrolls...)."""


@dataclass(frozen=True)
class Target:
    """Which element to act on, found by role and accessible name."""

    name: str | None = None  # case-insensitive substring (or exact, below)
    role: str | tuple[str, ...] | None = None
    exact: bool = False
    nth: int = 0  # which match, in document order
    pick: Callable[[list[Element]], Element | None] | None = None  # choose among matches

    def resolve(self, obs: Observation) -> Element | None:
        roles = (self.role,) if isinstance(self.role, str) else self.role
        cands = []
        for e in obs.elements:
            if e.bbox is None:
                continue
            if roles is not None and e.role not in roles:
                continue
            if self.name is not None:
                if self.exact and e.name.strip() != self.name:
                    continue
                if not self.exact and self.name.lower() not in e.name.lower():
                    continue
            cands.append(e)
        if self.pick is not None:
            return self.pick(cands) if cands else None
        return cands[self.nth] if len(cands) > self.nth else None

    def __str__(self) -> str:
        return f"{self.role or '*'}[{self.name!r}]"


# -- plan steps ------------------------------------------------------------------
@dataclass(frozen=True)
class Tap:
    target: Target
    kind: ActionType = ActionType.TAP  # or DOUBLE_TAP / LONG_PRESS


@dataclass(frozen=True)
class Fill:
    """Tap a field, type text, optionally press Enter: two or three steps."""

    target: Target
    text: str
    submit: bool = False


@dataclass(frozen=True)
class Choose:
    """Pick an option of a <select> (role combobox)."""

    target: Target
    option: str


@dataclass(frozen=True)
class Press:
    key: str


@dataclass(frozen=True)
class Swipe:
    """Swipe across an element (carousels); direction is where the finger moves."""

    target: Target
    direction: str = "left"


@dataclass(frozen=True)
class ScrollPage:
    direction: str = "down"


@dataclass(frozen=True)
class Answer:
    """Answer an information task; `text` may read the live observation."""

    text: str | Callable[[Observation], str]


@dataclass(frozen=True)
class Finish:
    message: str | None = None


@dataclass(frozen=True)
class GoBack:
    pass


@dataclass(frozen=True)
class When:
    """Run `step` only if `condition(obs)` holds when it is reached."""

    condition: Callable[[Observation], bool]
    step: Any


PlanStep = Union[Tap, Fill, Choose, Press, Swipe, ScrollPage, Answer, Finish, GoBack, When]  # noqa: UP007

VISIBLE_MIN, VISIBLE_MAX = 0.01, 0.97  # a point this close to the edge gets scrolled to


class PlanOracle:
    """Follows a plan, one unified action per call, reading the live tree.

    Before each step it clears any distraction (a dismiss control named in
    DISMISS_NAMES); a target below or above the viewport is scrolled to; a
    target that does not appear is waited for a few times, then OracleError.
    """

    def __init__(
        self, plan: Iterable[PlanStep], *, lang: str = "en", max_waits: int = 3, max_scrolls: int = 8
    ):
        self.plan = list(plan)
        self.lang = lang
        self.pos = 0
        self.pending: list[Action] = []  # rest of a multi-action step (Fill)
        self.max_waits = max_waits
        self.max_scrolls = max_scrolls
        self.waits = 0
        self.scrolls = 0
        self._scrolled_at: tuple | None = None  # the target's box when we last scrolled to it
        self.distractions_cleared = 0
        self.last_target: Element | None = None

    @property
    def finished(self) -> bool:
        return self.pos >= len(self.plan) and not self.pending

    def next_action(self, obs: Observation) -> Action:
        self.last_target = None
        dismiss = self._dismiss_control(obs)
        if dismiss is not None:
            self.distractions_cleared += 1
            return self._tap(dismiss, self._say("dismiss", name=dismiss.name))
        if self.pending:
            return self.pending.pop(0)
        while self.pos < len(self.plan):
            step = self.plan[self.pos]
            if isinstance(step, When):
                if not step.condition(obs):
                    self.pos += 1
                    continue
                step = step.step
            action = self._act(step, obs)
            if action is not None:
                return action
        raise OracleError("plan exhausted without a final answer or finish step")

    # -- one plan step ----------------------------------------------------------
    def _act(self, step: PlanStep, obs: Observation) -> Action | None:
        if isinstance(step, (Tap, Fill, Choose, Swipe)):
            el = step.target.resolve(obs)
            if el is None:
                return self._wait_for(step.target)
            scroll = self._scroll_towards(el, obs)
            if scroll is not None:
                return scroll
            self.waits = self.scrolls = 0
            self._scrolled_at = None
            self.pos += 1
            if isinstance(step, Tap):
                return self._tap(el, self._say(step.kind.value, role=el.role, name=el.name), kind=step.kind)
            if isinstance(step, Fill):
                self.pending.append(
                    Action(
                        type=ActionType.TYPE, text=step.text, description=self._say("type", text=step.text)
                    )
                )
                if step.submit:
                    self.pending.append(Action.key("Enter", description=self._say("key", key="Enter")))
                return self._tap(el, self._say("tap", role=el.role, name=el.name))
            if isinstance(step, Choose):
                x, y = el.centre()
                self.last_target = el
                return Action(
                    type=ActionType.SELECT,
                    x=x,
                    y=y,
                    text=step.option,
                    description=self._say("select", option=step.option, name=el.name),
                )
            if isinstance(step, Swipe):
                return self._swipe(el, step.direction)
        self.pos += 1
        if isinstance(step, Press):
            return Action.key(step.key, description=self._say("key", key=step.key))
        if isinstance(step, ScrollPage):
            return Action.scroll(
                step.direction, 0.5, 0.5, description=self._say("scroll", direction=step.direction)
            )
        if isinstance(step, Answer):
            text = step.text(obs) if callable(step.text) else step.text
            return Action(type=ActionType.ANSWER, text=text, description=self._say("answer", text=text))
        if isinstance(step, Finish):
            return Action(type=ActionType.DONE, text=step.message, description=self._say("done"))
        if isinstance(step, GoBack):
            return Action(type=ActionType.BACK, description=self._say("back"))
        raise TypeError(f"unknown plan step {step!r}")

    def _say(self, what: str, **kw) -> str:
        """The action's description in the task's language."""
        if self.lang == "zh" and "direction" in kw:
            kw["direction"] = _ZH_DIRECTION.get(kw["direction"], kw["direction"])
        if self.lang == "zh" and "role" in kw:
            kw["role"] = ZH_ROLE.get(kw["role"], kw["role"])
        return _PHRASES[self.lang if self.lang in _PHRASES else "en"][what].format(**kw)

    def _tap(self, el: Element, description: str, kind: ActionType = ActionType.TAP) -> Action:
        x, y = el.centre()
        self.last_target = el
        extra = {"duration_ms": 800} if kind == ActionType.LONG_PRESS else {}
        return Action(type=kind, x=_clip(x), y=_clip(y), description=description, **extra)

    def _swipe(self, el: Element, direction: str) -> Action:
        x0, y0, x1, y1 = el.bbox
        cx, cy = el.centre()
        dx = {"left": -1, "right": 1}.get(direction, 0) * (x1 - x0) * 0.35
        dy = {"up": -1, "down": 1}.get(direction, 0) * (y1 - y0) * 0.35
        self.last_target = el
        return Action(
            type=ActionType.SWIPE,
            x=_clip(cx - dx),
            y=_clip(cy - dy),
            x2=_clip(cx + dx),
            y2=_clip(cy + dy),
            duration_ms=300,
            description=self._say("swipe", direction=direction, name=el.name),
        )

    def _scroll_towards(self, el: Element, obs: Observation | None = None) -> Action | None:
        cx, cy = el.centre()
        if not 0.0 <= cx <= 1.0:  # a tap there would land on nothing, silently
            raise OracleError(f"'{el.name}' is off screen horizontally (x={cx:.2f})")
        top, bottom = _visible_band(obs, el) if obs is not None else (VISIBLE_MIN, VISIBLE_MAX)
        if top <= cy <= bottom:
            return None
        if self._scrolled_at == el.bbox and 0.0 <= cy <= 1.0:
            # The last scroll did not move it: it is fixed to the screen (a buy
            # bar at the very bottom of a tall phone), so scrolling cannot help.
            return None
        self._scrolled_at = el.bbox
        self.scrolls += 1
        if self.scrolls > self.max_scrolls:
            raise OracleError(f"'{el.name}' stays off screen after {self.max_scrolls} scrolls")
        direction = "down" if cy > bottom else "up"
        return Action.scroll(
            direction, 0.5, 0.5, description=self._say("scroll_to", direction=direction, name=el.name)
        )

    def _wait_for(self, target: Target) -> Action:
        self.waits += 1
        if self.waits > self.max_waits:
            raise OracleError(f"{target} not found on the screen")
        return Action(
            type=ActionType.WAIT, duration_ms=500, description=self._say("wait", target=str(target))
        )

    @staticmethod
    def _dismiss_control(obs: Observation) -> Element | None:
        for e in obs.elements:
            if e.role == "button" and e.name.strip() in DISMISS_NAMES and e.bbox is not None:
                return e
        return None


_PHRASES = {
    "en": {
        "dismiss": "Dismiss the pop-up: {name}",
        "tap": "Tap the {role} '{name}'",
        "double_tap": "Double-tap the {role} '{name}'",
        "long_press": "Long-press the {role} '{name}'",
        "type": "Type '{text}'",
        "key": "Press {key}",
        "select": "Select '{option}' in '{name}'",
        "scroll": "Scroll {direction}",
        "scroll_to": "Scroll {direction} to find '{name}'",
        "swipe": "Swipe {direction} on '{name}'",
        "answer": "Answer: {text}",
        "done": "Task complete",
        "back": "Go back",
        "wait": "Wait for {target}",
    },
    "zh": {
        "dismiss": "关闭弹窗：{name}",
        "tap": "点击{role}“{name}”",
        "double_tap": "双击{role}“{name}”",
        "long_press": "长按{role}“{name}”",
        "type": "输入“{text}”",
        "key": "按下{key}键",
        "select": "在“{name}”中选择“{option}”",
        "scroll": "向{direction}滚动",
        "scroll_to": "向{direction}滚动，找到“{name}”",
        "swipe": "在“{name}”上向{direction}滑动",
        "answer": "回答：{text}",
        "done": "任务完成",
        "back": "返回上一页",
        "wait": "等待{target}出现",
    },
}
_ZH_DIRECTION = {"up": "上", "down": "下", "left": "左", "right": "右"}


# Fixed bars that stay on screen while the content scrolls under them: an
# element whose centre is behind one is in the tree but not tappable.
_BOTTOM_BAR_ROLES = {"navigation", "toolbar"}
_KEYBOARD_NAMES = {"Keyboard", "键盘"}
_TOP_BAR_ROLES = {"banner"}


def _visible_band(obs: Observation, target: Element) -> tuple[float, float]:
    """(top, bottom) of the screen band where `target`'s centre can be tapped:
    the screen less any full-width bar fixed at its top or bottom (a phone's
    tab bar, a buy bar, the soft keyboard) that is drawn over the target.

    Elements come in document order. A bar's own controls are the run right
    after it whose centres lie in its box. A bottom bar covers what comes
    before it in the document (the scrolling content) but not what comes after
    it (menus and sheets layered over it); a top bar covers the content after it.
    """
    top, bottom = VISIBLE_MIN, VISIBLE_MAX
    elements = obs.elements
    at = next((i for i, e in enumerate(elements) if e is target), None)
    if at is None:
        return top, bottom
    for i, e in enumerate(elements):
        if e.bbox is None or i == at:
            continue
        x0, y0, x1, y1 = e.bbox
        if x1 - x0 < 0.9:
            continue
        is_bottom_bar = e.role in _BOTTOM_BAR_ROLES or (
            e.role == "group" and e.name.strip() in _KEYBOARD_NAMES
        )
        is_bottom_bar = is_bottom_bar and 0.5 < y0 < 1.0 and y1 >= 0.97
        is_top_bar = e.role in _TOP_BAR_ROLES and y0 <= 0.08 and 0.0 < y1 < 0.3
        if not (is_bottom_bar or is_top_bar):
            continue
        if _in_bar(elements, i, at):
            # A control of a fixed bar never scrolls: wherever it sits, tap it
            # (a phone's tab bar centres at 97% of the screen).
            return 0.0, 1.0
        if is_bottom_bar and at < i:
            bottom = min(bottom, y0 - 0.005)
        elif is_top_bar and at > i:
            top = max(top, y1 + 0.005)
    return top, bottom


def _in_bar(elements: list[Element], bar_index: int, at: int) -> bool:
    """Whether element `at` is one of the bar's own controls: in the run right
    after the bar whose centres lie in the bar's box."""
    bar = elements[bar_index]
    for j in range(bar_index + 1, len(elements)):
        e = elements[j]
        if e.bbox is None or not _centre_in(e, bar):
            return False
        if j == at:
            return True
    return False


def _centre_in(inner: Element, outer: Element) -> bool:
    cx, cy = inner.centre()
    b = outer.bbox
    return b[0] <= cx <= b[2] and b[1] <= cy <= b[3]


def _clip(v: float) -> float:
    return min(max(v, 0.0), 1.0)


class TaskTemplate:
    """Subclass per template; set `template_id`, `app` and the four methods."""

    template_id: str = ""
    app: str = ""
    languages: tuple[str, ...] = ("en", "zh")

    def sample_params(self, data: dict, rng: random.Random, lang: str) -> dict:
        """Parameters drawn from the app's seeded data (so they exist in it)."""
        raise NotImplementedError

    def instruction(self, params: dict, lang: str) -> str:
        raise NotImplementedError

    def plan(self, params: dict, lang: str) -> list[PlanStep]:
        raise NotImplementedError

    def success(self, params: dict, state: dict, answer: str | None, lang: str) -> bool:
        """Decided from the app's state (and the final answer for info tasks)."""
        raise NotImplementedError

    # -- shared -------------------------------------------------------------------
    def make_task(self, lang: str, seed: int) -> Task:
        from ..apps import APPS

        data = APPS[self.app].initial_state(lang, seed)
        rng = random.Random(f"{self.template_id}:{lang}:{seed}")
        params = self.sample_params(data, rng, lang)
        return Task(
            task_id=f"{self.template_id}:{lang}:{seed}",
            template_id=self.template_id,
            app=self.app,
            language=lang,
            instruction=self.instruction(params, lang),
            params={**params, "seed": seed},
            start_url=f"/{self.app}/",
        )

    def oracle(self, task: Task) -> PlanOracle:
        return PlanOracle(self.plan(task.params, task.language), lang=task.language)

    def check(self, task: Task, state: dict, answer: str | None = None) -> bool:
        return bool(self.success(task.params, state, answer, task.language))
