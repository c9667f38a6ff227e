"""A demonstration written in a task file, played against the live screen.

A lab without a planner for its app writes a task's demonstration as steps
that name elements, not pixels; each is resolved against the observation's
elements when it is played, so it survives layout, viewport and theme
changes:

    params:
      script:
        - {tap: {role: button, name: "new tiddler"}}
        - {type: "milk", into: {role: textbox, name: "Tiddler title"}}
        - {type: "s", into: {role: textbox, name: "Name"}, at: [0.9, 0.5]}
        - {key: "ctrl+Enter"}
        - {select: "Paris", on: {role: combobox}}
        - {scroll: down}
        - {wait: {role: dialog, name: "Save As"}}
        - {done: "created"}

`name` matches the accessible name exactly, then case-insensitively as a
substring; `nth` picks among several matches. `at` is where in the field's box
typing clicks first (fractions of its width and height; the centre if left
out): where the caret lands decides what the typed text joins. A target that is not on the
screen is waited for (`wait` steps, at most `patience`), then the episode
ends with a PolicyError that names the step. A `wait` naming an element only
waits for it (a dialog opening): once it is there, the next step is played on
the same screen, with no step of its own.
"""

from __future__ import annotations

from typing import Any

from schemas.actions import SCROLL_NOTCH_PX, Action, ActionType
from schemas.observation import Observation
from schemas.records import Element

from .policy_errors import PolicyError

MAX_SCROLLS = 4  # scrolls towards an element out of view before the step gives up

_VERBS = (
    "tap",
    "double_tap",
    "long_press",
    "type",
    "key",
    "select",
    "scroll",
    "back",
    "wait",
    "answer",
    "done",
)


def find_element(elements: list[Element], ref: dict[str, Any]) -> Element | None:
    """The element `ref` ({role?, name?, nth?}) names, among those with a box."""
    role, name = ref.get("role"), ref.get("name")
    boxed = [
        e
        for e in elements
        if e.bbox is not None
        and e.bbox[2] > e.bbox[0]
        and e.bbox[3] > e.bbox[1]
        and (role is None or e.role == role)
    ]
    if name is not None:
        exact = [e for e in boxed if e.name.strip() == name]
        boxed = exact or [e for e in boxed if name.lower() in e.name.lower()]
    # What a click can reach first: a field under a dialog is not the one meant.
    boxed = [e for e in boxed if not _covered(e)] or boxed
    nth = int(ref.get("nth", 0))
    return boxed[nth] if 0 <= nth < len(boxed) else None


def _in_view(e: Element) -> bool:
    """Whether an element's centre is on the screen (a tap there reaches it; a button at
    a dialog's bottom edge is)."""
    x, y = e.centre()
    return 0.0 <= x <= 1.0 and 0.0 <= y <= 1.0


def _point_in(e: Element, at: list[float]) -> tuple[float, float]:
    """The point at fractions `at` of the element's box."""
    x0, y0, x1, y1 = e.bbox
    return x0 + float(at[0]) * (x1 - x0), y0 + float(at[1]) * (y1 - y0)


def _covered(e: Element) -> bool:
    return e.visibility is not None and e.visibility.modal_covered


class ScriptedPolicy:
    """Plays `script` (a task's params.script) step by step; `done` when it runs out."""

    name = "oracle"

    def __init__(self, script: list[dict[str, Any]], *, patience: int = 3):
        for i, step in enumerate(script):
            verbs = [v for v in _VERBS if v in step]
            if len(verbs) != 1:
                raise ValueError(f"script step {i} {step!r}: give exactly one of {_VERBS}")
        self.script = list(script)
        self.pos = 0
        self.patience = patience
        self.waited = 0
        self.pending: list[Action] = []
        self.scrolled = 0
        self.last_target: Element | None = None

    def act(self, obs: Observation) -> Action:
        self.last_target = None
        if self.pending:
            return self.pending.pop(0)
        if self.pos >= len(self.script):
            return Action(type=ActionType.DONE, description="Script finished")
        step = self.script[self.pos]
        verb = next(v for v in _VERBS if v in step)
        value = step[verb]
        ref = step.get("into") or step.get("on") or (value if isinstance(value, dict) else None)
        target = None
        if ref is not None:
            target = find_element(obs.elements, ref)
            if target is None:
                if self.waited >= self.patience:
                    raise PolicyError(
                        f"script step {self.pos} ({verb}): no element {ref!r} "
                        f"on the screen after {self.waited} waits"
                    )
                self.waited += 1
                return Action(type=ActionType.WAIT, duration_ms=500, description=f"Wait for {ref!r}")
        self.waited = 0
        if target is not None and verb != "wait" and not _in_view(target):
            return self._scroll_to(target, obs)  # below or above the fold: bring it in first
        self.scrolled = 0
        self.pos += 1
        if verb == "wait" and target is not None:
            return self.act(obs)  # what it waited for is there: go on at once
        self.last_target = target
        return self._action(verb, value, target, step)

    def _scroll_to(self, target: Element, obs: Observation) -> Action:
        if self.scrolled >= MAX_SCROLLS:
            raise PolicyError(
                f"script step {self.pos}: {target.role} '{target.name}' stays out of view "
                f"after {self.scrolled} scrolls"
            )
        self.scrolled += 1
        cy = target.centre()[1]
        direction = "down" if cy > 0.5 else "up"
        notches = min(max(round(abs(cy - 0.5) * obs.height / SCROLL_NOTCH_PX), 1), 20)
        return Action.scroll(
            direction, 0.5, 0.5, amount=notches, description=f"Scroll {direction} to '{target.name}'"
        )

    def _action(self, verb: str, value: Any, target: Element | None, step: dict) -> Action:
        point = target.centre() if target is not None else (None, None)
        label = f"{target.role} '{target.name}'" if target is not None else ""
        if verb in ("tap", "double_tap", "long_press"):
            return Action(
                type=ActionType(verb),
                x=point[0],
                y=point[1],
                description=f"{verb.replace('_', ' ').capitalize()} {label}".strip(),
            )
        if verb == "type":
            text = str(value)
            if target is None:
                return Action(type=ActionType.TYPE, text=text, description=f"Type '{text}'")
            # Focus the field first, then type: the walk and the oracle record it so.
            self.pending.append(Action(type=ActionType.TYPE, text=text, description=f"Type '{text}'"))
            x, y = _point_in(target, step.get("at")) if step.get("at") else point
            return Action(type=ActionType.TAP, x=x, y=y, description=f"Tap {label}")
        if verb == "key":
            return Action(type=ActionType.KEY, text=str(value), description=f"Press {value}")
        if verb == "select":
            return Action(
                type=ActionType.SELECT,
                x=point[0],
                y=point[1],
                text=str(value),
                description=f"Select '{value}' in {label}",
            )
        if verb == "scroll":
            return Action.scroll(str(value), 0.5, 0.5, description=f"Scroll {value}")
        if verb == "back":
            return Action(type=ActionType.BACK, description="Go back")
        if verb == "wait":
            return Action(type=ActionType.WAIT, duration_ms=int(value or 500), description="Wait")
        if verb == "answer":
            return Action(type=ActionType.ANSWER, text=str(value), description="Answer")
        return Action(type=ActionType.DONE, text=str(value) if value else None, description="Done")
