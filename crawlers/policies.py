"""Policies: what picks the next action from an observation.

- An oracle (a planner that knows the app) comes from the environment: the
  sandbox's is sandbox.oracle_policy.OraclePolicy, a task file's demonstration
  is crawlers.scripted.ScriptedPolicy.
- RandomWalkPolicy explores the visible controls at random, in the manner of
  OS-Genesis' reverse task synthesis: record interactions first, name the
  task later. It knows no particular app (no sandbox import): it works on
  third-party pages too.
- ReplayPolicy plays back a recorded list of actions.

A policy may expose `last_target`, the element its last action aimed at; the
runner records it as the step's target.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterable
from typing import Protocol, runtime_checkable

from schemas.a11y import parse_snapshot
from schemas.actions import Action, ActionType
from schemas.observation import Observation
from schemas.records import Element

from .guard import SafetyGuard


@runtime_checkable
class Policy(Protocol):
    name: str

    def act(self, obs: Observation) -> Action: ...


# Roles the random walk may activate. A combobox whose options the tree lists
# (a <select>) gets a `select` action with one of them; one without listed
# options (a search box, an autocomplete input) is tapped and typed into.
# "clickable" is what the observation adds for role-less elements with click
# handlers or a pointer cursor (crawlers/web_clickables.py).
EXPLORE_ROLES = {
    "link",
    "button",
    "tab",
    "checkbox",
    "switch",
    "radio",
    "textbox",
    "searchbox",
    "menuitem",
    "menuitemcheckbox",
    "menuitemradio",
    "option",
    "treeitem",
    "combobox",
    "clickable",
}
TEXT_ROLES = {"textbox", "searchbox"}

VOCABULARY = {
    "en": ["hello", "coffee", "meeting", "weekend", "blue", "book", "test", "price", "travel", "photo"],
    "zh": ["你好", "咖啡", "会议", "周末", "蓝色", "书", "测试", "价格", "旅行", "照片"],
}

# Names of controls that close a pop-up, banner or interruption, on any site.
# A name ending in "*" is a first word: "Close*" matches "Close" and "Close
# offer" (not "Closet"), "关闭*" matches "关闭通知". The others match whole names
# only, so "取消收藏" (unfavourite) or "Cancel order" is not taken for a dismissal.
DEFAULT_DISMISS_NAMES = frozenset(
    {
        "Close*",
        "Dismiss*",
        "关闭*",
        "忽略*",
        "No thanks",
        "No, thanks",
        "Not now",
        "Maybe later",
        "Cancel",
        "Got it",
        "OK",
        "Accept all",
        "Accept cookies",
        "Reject all",
        "Decline",
        "Decline call",
        "Don't allow",
        "Clear notification",
        "×",
        "✕",
        "✖",
        "X",
        "取消",
        "跳过",
        "以后再说",
        "暂不",
        "我知道了",
        "知道了",
        "同意并继续",
        "拒绝",
        "禁止",
        "拒接",
        "清除通知",
        "不用了",
    }
)
DISMISS_ROLES = {"button", "link", "clickable"}

# A point this close to the screen's top or bottom edge is not tapped.
_EDGE_MIN, _EDGE_MAX = 0.01, 0.97
# Each time a target left the screen unchanged, its weight is multiplied by this.
NOOP_PENALTY = 0.1


def _is_dismiss(name: str, names: frozenset[str]) -> bool:
    n = " ".join(name.split())
    if not n or len(n) > 30:  # a dismiss control has a short name
        return False
    if n in names:
        return True
    low = n.lower()
    for w in names:
        if not w.endswith("*"):
            continue
        w = w[:-1]
        if not low.startswith(w.lower()):
            continue
        rest = n[len(w) :]
        # "Close offer" (a word boundary) or "关闭通知" (CJK needs none); not "Closet".
        if not rest or not rest[0].isalnum() or not w.isascii():
            return True
    return False


def select_options(obs: Observation) -> dict[int, list[tuple[str, bool]]]:
    """Options of each combobox the tree lists them for, by index in `obs.elements`.

    A closed <select>'s options are in the aria snapshot with an empty box (so
    not among the elements): the combobox nodes that have a box map in order to
    the combobox elements. Values are (option name, selected), disabled left out.
    """
    if "option" not in obs.a11y_tree:
        return {}
    nodes = parse_snapshot(obs.a11y_tree)
    boxes = [i for i, e in enumerate(obs.elements) if e.role == "combobox"]
    out: dict[int, list[tuple[str, bool]]] = {}
    k = 0
    for j, n in enumerate(nodes):
        if n.role != "combobox" or n.box is None or n.box[2] <= 0 or n.box[3] <= 0:
            continue
        if k >= len(boxes):
            break
        at = boxes[k]
        k += 1
        if obs.elements[at].name != n.name:
            continue  # the tree and the elements disagree: do not guess
        opts = []
        for m in nodes[j + 1 :]:
            if m.depth <= n.depth:
                break
            if m.role == "option" and m.name and "disabled" not in m.attrs:
                opts.append((m.name, "selected" in m.attrs))
        if opts:
            out[at] = opts
    return out


class RandomWalkPolicy:
    """Taps, types, selects, scrolls and goes back at random; `done` after max_steps.

    Controls the guard would refuse are never chosen, so a walk is not cut
    short by a guard block. Controls tapped less often are preferred, so the
    walk spreads over the app instead of bouncing between two links; a target
    that left the screen unchanged (same screenshot and tree in the next
    observation) is remembered per URL and weighted down by NOOP_PENALTY.
    `<select>`s get a `select` action with an option the tree lists. A visible
    control named in `dismiss_names` (default DEFAULT_DISMISS_NAMES, generic
    close/dismiss words in English and Chinese) is tapped first, 80% of the time,
    unless it already proved a no-op on this page.

    Counters for the runner: `judged_steps` actions whose result the walk saw
    (every action but the last `done`), `noop_steps` of them that changed
    nothing, `noop_rate` their ratio.
    """

    name = "random_walk"

    def __init__(
        self,
        seed: int,
        max_steps: int = 20,
        *,
        lang: str = "en",
        guard: SafetyGuard | None = None,
        p_scroll: float = 0.12,
        p_back: float = 0.06,
        p_enter: float = 0.5,
        dismiss_names: Iterable[str] | None = None,
    ):
        if max_steps < 1:
            raise ValueError(f"max_steps={max_steps} must be at least 1")
        self.rng = random.Random(f"random_walk:{seed}")
        self.max_steps = max_steps
        self.vocabulary = VOCABULARY.get(lang, VOCABULARY["en"])
        self.guard = guard or SafetyGuard()
        self.p_scroll, self.p_back, self.p_enter = p_scroll, p_back, p_enter
        self.dismiss_names = frozenset(DEFAULT_DISMISS_NAMES if dismiss_names is None else dismiss_names)
        self.steps = 0
        self.pending: list[tuple[Action, tuple | None]] = []
        self.visits: dict[tuple[str, str], int] = {}
        self.last_target: Element | None = None
        # No-op memory: (url, kind, name) -> times it left the screen unchanged.
        self.noops: dict[tuple[str, str, str], int] = {}
        self.judged_steps = 0
        self.noop_steps = 0
        self._prev_sig: tuple | None = None
        self._prev_key: tuple | None = None

    @property
    def noop_rate(self) -> float:
        return self.noop_steps / self.judged_steps if self.judged_steps else 0.0

    def act(self, obs: Observation) -> Action:
        self._judge(obs)
        self.last_target = None
        self.steps += 1
        if self.steps >= self.max_steps:
            self.pending.clear()
            self._prev_sig = None  # nothing follows the last action
            return Action(
                type=ActionType.DONE,
                text="random walk finished",
                description=f"Stop after {self.max_steps} steps",
            )
        if self.pending:
            action, self._prev_key = self.pending.pop(0)
            return action
        candidates = self.candidates(obs)
        dismiss = [
            e
            for e in candidates
            if e.role in DISMISS_ROLES
            and _is_dismiss(e.name, self.dismiss_names)
            and not self.noops.get(self._key(obs, e))
        ]
        if dismiss and self.rng.random() < 0.8:
            return self._tap(obs, dismiss[0], f"Dismiss '{dismiss[0].name}'")
        r = self.rng.random()
        if r < self.p_back and self.steps > 1:
            self._prev_key = (obs.url, "back", "")
            return Action(type=ActionType.BACK, description="Go back")
        f_down = NOOP_PENALTY ** self.noops.get((obs.url, "scroll", "down"), 0)
        f_up = NOOP_PENALTY ** self.noops.get((obs.url, "scroll", "up"), 0)
        # A page that scrolled neither way is scrolled less.
        if r < self.p_back + self.p_scroll * max(f_down, f_up) or not candidates:
            w_down, w_up = 0.75 * f_down, 0.25 * f_up
            direction = "down" if self.rng.random() * (w_down + w_up) < w_down else "up"
            self._prev_key = (obs.url, "scroll", direction)
            return Action.scroll(direction, 0.5, 0.5, description=f"Scroll {direction}")
        el = self._pick(obs, candidates)
        opts = None
        if el.role == "combobox":
            at = next((i for i, e in enumerate(obs.elements) if e is el), None)
            opts = select_options(obs).get(at)
        if opts:
            pool = [name for name, selected in opts if not selected] or [n for n, _ in opts]
            choice = self.rng.choice(pool)
            x, y = el.centre()
            self.last_target = el
            self._prev_key = self._key(obs, el)
            return Action(
                type=ActionType.SELECT,
                x=min(max(x, 0.0), 1.0),
                y=min(max(y, 0.0), 1.0),
                text=choice,
                description=f"Select '{choice}' in '{el.name}'",
            )
        if el.role in TEXT_ROLES or el.role == "combobox":
            word = self.rng.choice(self.vocabulary)
            key = self._key(obs, el)
            self.pending.append((Action(type=ActionType.TYPE, text=word, description=f"Type '{word}'"), key))
            if self.rng.random() < self.p_enter:
                self.pending.append((Action.key("Enter", description="Press Enter"), None))
            # The tap only focuses: whether typing changed anything is what counts.
            action = self._tap(obs, el, f"Tap the {el.role} '{el.name}'")
            self._prev_key = None
            return action
        return self._tap(obs, el, f"Tap {el.role} '{el.name}'")

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
            if not (_EDGE_MIN <= cy <= _EDGE_MAX and 0.0 <= cx <= 1.0):
                continue
            if self.guard.is_sensitive(e):
                continue
            out.append(e)
        return out

    def _judge(self, obs: Observation) -> None:
        """Count whether the last action changed the screen; remember its target if not."""
        sig = (hashlib.sha1(obs.screenshot).digest(), hash(obs.a11y_tree))
        prev, key = self._prev_sig, self._prev_key
        self._prev_sig, self._prev_key = sig, None
        if prev is None:
            return
        self.judged_steps += 1
        if sig == prev:
            self.noop_steps += 1
            if key is not None:
                self.noops[key] = self.noops.get(key, 0) + 1
        elif key is not None and self.noops.get(key):
            self.noops[key] -= 1  # it works again (the page changed, or scrolled back)

    @staticmethod
    def _key(obs: Observation, el: Element) -> tuple[str, str, str]:
        return (obs.url, el.role, el.name)

    def _pick(self, obs: Observation, candidates: list[Element]) -> Element:
        weights = [
            NOOP_PENALTY ** self.noops.get(self._key(obs, e), 0) / (1 + self.visits.get((e.role, e.name), 0))
            for e in candidates
        ]
        el = self.rng.choices(candidates, weights=weights, k=1)[0]
        self.visits[(el.role, el.name)] = self.visits.get((el.role, el.name), 0) + 1
        return el

    def _tap(self, obs: Observation, el: Element, description: str) -> Action:
        x, y = el.centre()
        self.last_target = el
        self._prev_key = self._key(obs, el)
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
