"""The frontier walk: exploration that prefers what it has not tried yet.

`FrontierPolicy` plays one exploration episode over a private copy of the
crawl's screen graph (crawlers/screen_graph.py), learning into it as it goes:

1. an untried element of the current screen (one no screen has tried yet first);
2. when the screen is exhausted, the shortest known path to a frontier screen
   (one with untried elements, one with never-tried elements first), replayed
   edge by edge from the current screen: every episode starts at the reset, so
   the path from the start screen is the known action prefix to a deep screen.
   A replayed step that lands elsewhere drops the path;
3. else the least-tried element here that ever changed the screen; with none
   (a dead end: an error page, a screen whose controls change nothing), `back`.

An element below or above the viewport is scrolled to first (a few scrolls at
most). Text fields are typed into (a word of the task's language, then Enter
half of the time), a <select> gets one of its options. The environment's shortcut
keys (`explore.keys`: an app's Save, its New Folder) are untried on every screen
until pressed there, and pressed right after typing half the time (a save keeps an
edit only once there is one). With `retype` (`explore.retype`), that share of steps
types a new word into a text field in view even when it was tried: a spreadsheet's
state is what was typed and saved, which one try per field never covers. Like the
random walk it knows no app, talks only through observations and actions, never
picks a guarded control, and says `done` on its last step. Decisions read sorted keys
and a seeded RNG: the same seed on the same graph plays the same episode.
"""

from __future__ import annotations

import random

from schemas.actions import SCROLL_NOTCH_PX, Action, ActionType
from schemas.observation import Observation
from schemas.records import Element

from .guard import SafetyGuard
from .policies import TEXT_ROLES, VOCABULARY, select_options
from .screen_graph import ScreenGraph, explorable, out_of_reach_words

# An element whose centre is outside these is scrolled to before it is touched.
_TOP, _BOTTOM = 0.01, 0.97
MAX_SCROLLS = 3
# How often the walk presses one of the environment's shortcut keys right after typing.
P_KEY_AFTER_EDIT = 0.5


class FrontierPolicy:
    """Untried elements first, then known paths to frontier screens, then the least tried.

    `graph` is the policy's own (a copy: it learns into it); counters for the
    crawl: `replayed_steps` (steps taken along a known path), `untried_steps`
    (untried elements tried), `fallback_steps`, `retyped_steps` (fields typed into again).
    """

    name = "frontier"

    def __init__(
        self,
        graph: ScreenGraph,
        seed: int,
        max_steps: int = 15,
        *,
        lang: str = "en",
        guard: SafetyGuard | None = None,
        p_enter: float = 0.5,
        keys: tuple[str, ...] = (),
        retype: float = 0.0,
    ):
        if max_steps < 1:
            raise ValueError(f"max_steps={max_steps} must be at least 1")
        self.graph = graph
        self.guard = guard or graph.guard
        self.rng = random.Random(f"frontier:{seed}")
        self.max_steps, self.p_enter = max_steps, p_enter
        self.vocabulary = VOCABULARY.get(lang, VOCABULARY["en"])
        # The environment's shortcut keys (`explore.keys`): untried on each screen too.
        self.keys = [f"key:{k}" for k in keys]
        self.edited = False  # the last action typed: a shortcut key may keep it
        self.retype = retype
        self.steps = 0
        self.pending: list[tuple[str, str, str | None]] = []
        self.path: list[tuple[str, str, str]] = []
        self.intent: tuple[str, str | None, str | None] | None = None  # scrolled towards
        self.scrolls = 0
        self._scrolled_at: float | None = None  # the target's centre when it was last scrolled for
        self.skip: set[tuple[str, str]] = set()  # (screen, key) out of reach by scrolling
        self.last_target: Element | None = None
        self._last: tuple[str, str, str, str | None] | None = None
        self.replayed_steps = self.untried_steps = self.fallback_steps = self.retyped_steps = 0

    def act(self, obs: Observation) -> Action:
        self.last_target = None
        screen = self.graph.see(obs.a11y_tree, obs.url, obs.elements)
        if self._last is not None:
            src, key, verb, text = self._last
            self.graph.add_edge(src, key, screen, verb, text)
            self._last = None
        self.steps += 1
        if self.steps >= self.max_steps:
            return Action(
                type=ActionType.DONE,
                text="frontier walk finished",
                description=f"Stop after {self.max_steps} steps",
            )
        keyed = dict(explorable(obs.elements, self.guard))
        if self.pending:
            return self._emit(obs, screen, keyed, *self.pending.pop(0))
        if self.intent is not None:
            key, verb, text = self.intent
            self.intent = None
            if key in keyed:
                return self._emit(obs, screen, keyed, key, verb, text)
        if self.edited and self.keys and self.rng.random() < P_KEY_AFTER_EDIT:
            # A save or submit shortcut does something only once there is an edit to keep.
            self.edited = False
            return self._pseudo(screen, self.rng.choice(self.keys), None, None)
        self.edited = False
        choice = (
            self._retyped(keyed)
            or self._along_path(screen, keyed)
            or self._untried(screen, keyed)
            or self._to_frontier(screen, keyed)
            or self._least_tried(screen, keyed)
        )
        if choice is None:
            self._last = (screen, "back", "back", None)
            return Action(type=ActionType.BACK, description="Go back: nothing to touch here")
        return self._emit(obs, screen, keyed, *choice)

    # ------------------------------------------------------------------ choosing
    def _along_path(
        self, screen: str, keyed: dict[str, Element]
    ) -> tuple[str, str | None, str | None] | None:
        if not self.path:
            return None
        src, key, _ = self.path.pop(0)
        if src != screen or ("|" in key and key not in keyed):  # the replay went elsewhere
            self.path = []
            return None
        edge = self.graph.edges[src][key]
        self.replayed_steps += 1
        return key, edge["verb"], edge["text"]

    def _retyped(self, keyed: dict[str, Element]) -> tuple[str, None, None] | None:
        """A text field in view, tried or not, `retype` of the time (off a replayed path:
        typing there would leave it)."""
        if not self.retype or self.path or self.rng.random() >= self.retype:
            return None
        fields = sorted(k for k, el in keyed.items() if el.role in TEXT_ROLES and _in_view(el))
        if not fields:
            return None
        self.retyped_steps += 1
        return self.rng.choice(fields), None, None

    def _untried(self, screen: str, keyed: dict[str, Element]) -> tuple[str, None, None] | None:
        """An untried element: one no screen has tried first, one on the screen (no scroll
        needed) before one off it."""
        untried = [k for k in self.graph.untried(screen) if k in keyed and (screen, k) not in self.skip]
        untried += [k for k in self.keys if not self.graph.tried(screen, k)]
        if not untried:
            return None
        anywhere = self.graph.tried_anywhere()
        ranked: dict[tuple[bool, bool], list[str]] = {}
        for k in untried:
            ranked.setdefault((k in anywhere, k in keyed and not _in_view(keyed[k])), []).append(k)
        self.untried_steps += 1
        return self.rng.choice(sorted(ranked[min(ranked)])), None, None

    def _to_frontier(
        self, screen: str, keyed: dict[str, Element]
    ) -> tuple[str, str | None, str | None] | None:
        # Leave two steps at the end to try something there (a scroll to it, then it) and
        # the final `done`: a path that leaves no step to scroll with is played again by
        # every later walk, which never learns the element is out of reach.
        room = self.max_steps - self.steps - 2
        if room < 1:
            return None
        anywhere = self.graph.tried_anywhere()
        prefer = {k for d in self.graph.screens for k in self.graph.untried(d) if k not in anywhere}
        path = self.graph.path_to_frontier(screen, room, prefer)
        if not path:
            return None
        self.path = path
        return self._along_path(screen, keyed)

    def _least_tried(self, screen: str, keyed: dict[str, Element]) -> tuple[str, None, None] | None:
        """The least-tried element here that ever led elsewhere; None (go back) when every
        one only ever left the screen as it was (an error page's Reload, a dead end)."""
        edges = self.graph.edges.get(screen, {})
        keys = sorted(
            k
            for k in keyed
            if (screen, k) not in self.skip | self.graph.out_of_reach
            and (k not in edges or set(edges[k]["to"]) != {screen})
        )
        if not keys:
            return None
        fewest = min(self.graph.tries(screen, k) for k in keys)
        self.fallback_steps += 1
        return self.rng.choice([k for k in keys if self.graph.tries(screen, k) == fewest]), None, None

    # ------------------------------------------------------------------ acting
    def _emit(
        self,
        obs: Observation,
        screen: str,
        keyed: dict[str, Element],
        key: str,
        verb: str | None,
        text: str | None,
    ) -> Action:
        el = keyed.get(key)
        if el is None:
            return self._pseudo(screen, key, verb, text)
        _, cy = el.centre()
        if not _in_view(el):
            # Give up after MAX_SCROLLS, or at once when the last scroll left it where it was
            # (a text area that swallows the wheel): every later walk would scroll for it again.
            stuck = self.scrolls and self._scrolled_at is not None and abs(cy - self._scrolled_at) < 1e-3
            if self.scrolls >= MAX_SCROLLS or stuck:
                self.skip.add((screen, key))
                self.graph.out_of_reach.add((screen, key))
                self.scrolls = 0
                self.path = []
                self._last = (screen, "back", "back", None)
                # Recorded in words the graph reads back: no later episode scrolls for it.
                return Action(type=ActionType.BACK, description=out_of_reach_words(key))
            self.scrolls += 1
            self._scrolled_at = cy
            self.intent = (key, verb, text)
            direction = "down" if cy > _BOTTOM else "up"
            self._last = (screen, f"scroll:{direction}", "scroll", direction)
            # Wheel notches that bring it to the middle at one CSS px per screenshot px
            # (a denser screen overshoots, and the next scroll comes back).
            notches = min(max(round(abs(cy - 0.5) * obs.height / SCROLL_NOTCH_PX), 1), 20)
            return Action.scroll(
                direction, 0.5, 0.5, amount=notches, description=f"Scroll {direction} to '{el.name}'"
            )
        self.scrolls, self._scrolled_at = 0, None
        verb, text = self._verb_for(obs, el, verb, text)
        x, y = (min(max(c, 0.0), 1.0) for c in el.centre())
        self.last_target = el
        self._last = (screen, key, verb, text)
        if verb == "type":
            self.edited = True
            if self.rng.random() < self.p_enter:
                self.pending.append(("key:Enter", "key", "Enter"))
            return Action(
                type=ActionType.TYPE, x=x, y=y, text=text, description=f"Type '{text}' in '{el.name}'"
            )
        if verb == "select":
            return Action(
                type=ActionType.SELECT, x=x, y=y, text=text, description=f"Select '{text}' in '{el.name}'"
            )
        return Action.tap(x, y, description=f"Tap {el.role} '{el.name}'")

    def _verb_for(
        self, obs: Observation, el: Element, verb: str | None, text: str | None
    ) -> tuple[str, str | None]:
        """(verb, text) for an element: the path's, else what its role calls for."""
        if verb in ("type", "select") and text is not None:
            return verb, text
        if verb == "tap":
            return "tap", None
        if el.role == "combobox":
            at = next((i for i, e in enumerate(obs.elements) if e is el), None)
            opts = select_options(obs).get(at)
            if opts:
                pool = [n for n, selected in opts if not selected] or [n for n, _ in opts]
                return "select", self.rng.choice(pool)
        if el.role in TEXT_ROLES or el.role == "combobox":
            return "type", self.rng.choice(self.vocabulary)
        return "tap", None

    def _pseudo(self, screen: str, key: str, verb: str | None, text: str | None) -> Action:
        """An action without a target (a path's key press, scroll or back)."""
        if verb is None and key.startswith("key:"):  # a shortcut key tried for the first time
            verb, text = "key", key[len("key:") :]
        self._last = (screen, key, verb or key, text)
        if verb == "key" and text:
            return Action.key(text, description=f"Press {text}")
        if verb == "scroll" and text in ("up", "down", "left", "right"):
            return Action.scroll(text, 0.5, 0.5, description=f"Scroll {text}")
        self._last = (screen, "back", "back", None)
        return Action(type=ActionType.BACK, description="Go back")


def _in_view(el: Element) -> bool:
    """Whether an element can be touched without scrolling."""
    return _TOP <= el.centre()[1] <= _BOTTOM
