"""An app's screen graph, learnt from its recorded episodes: what exploration covers and what is left.

A screen is the environment's screen digest (schemas/environment.py
`screen_digest`) of its accessibility tree, with the file's `volatile` text and
the layout (boxes, refs) masked, so a scrolled or re-laid-out screen is the same
screen. Its elements are the controls a walk may touch (`explorable`), each
keyed `role|name` (`#k` for the k-th of the same role and name); actions
without a target have pseudo keys (`key:Enter`, `scroll:down`, `back`, `type`).
An edge is (from screen, element key) -> the screens it led to, with counts,
and the last action's verb and text (what a replay plays again).

The graph is a function of the recorded episodes (`absorb` of each episode's
steps), persisted as JSON beside the raw store's collection
(`<collection>/screen_graph.json`, written atomically after each episode is
committed). `load_graph` re-reads it and absorbs the committed episodes it has
not seen (a kill between commit and save); one that names episodes the store
no longer holds, or other volatile masks, is rebuilt from the store. Every
choice made from it reads its keys in sorted order, so a policy seeded the same
on the same graph decides the same.
"""

from __future__ import annotations

import copy
import json
from collections import deque
from collections.abc import Iterable
from pathlib import Path

from schemas.actions import ActionType
from schemas.environment import screen_digest
from schemas.records import Element, Step
from trajforge.store.raw import RawStore, atomic_write_bytes

from .guard import SafetyGuard
from .policies import EXPLORE_ROLES

GRAPH_FILE = "screen_graph.json"
VERSION = 1
# The layout of a tree: a scroll or a resize moves boxes, the screen stays the same.
LAYOUT_MASKS = (r" ?\[box=[^\]]*\]", r" ?\[ref=[^\]]*\]")
TERMINAL_VERBS = {"done", "answer", "take_over"}


def element_keys(elements: Iterable[Element]) -> list[tuple[str, Element]]:
    """(key, element) for every element: `role|name`, `#k` added for the k-th repeat."""
    seen: dict[str, int] = {}
    out = []
    for e in elements:
        base = f"{e.role}|{' '.join(e.name.split())[:80]}"
        k = seen.get(base, 0)
        seen[base] = k + 1
        out.append((f"{base}#{k}" if k else base, e))
    return out


def explorable(elements: Iterable[Element], guard: SafetyGuard) -> list[tuple[str, Element]]:
    """The (key, element)s a walk may touch: an explorable role, a box horizontally on the
    screen (a vertical scroll reaches the rest), not covered by a modal, not guarded."""
    out = []
    for key, e in element_keys(elements):
        if e.role not in EXPLORE_ROLES or e.bbox is None:
            continue
        x0, y0, x1, y1 = e.bbox
        if x1 - x0 <= 0 or y1 - y0 <= 0 or not 0.0 <= (x0 + x1) / 2 <= 1.0:
            continue
        if e.visibility is not None and e.visibility.modal_covered:
            continue
        if guard.is_sensitive(e):
            continue
        out.append((key, e))
    return out


# Actions keyed by themselves, whatever element lies under their point.
_UNTARGETED = {ActionType.SCROLL, ActionType.KEY, ActionType.BACK, ActionType.HOME, ActionType.WAIT}


def replayable(key: str) -> bool:
    """Whether a walk can play an edge again: an element's, a key press, a scroll, back."""
    return "|" in key or key.startswith(("key:", "scroll:")) or key == "back"


def step_key(step: Step) -> tuple[str, str, str | None]:
    """(element key, verb, text) of a recorded step's action."""
    action, verb = step.action, step.action.type.value
    text = action.text
    if action.type == ActionType.SCROLL:
        text = action.direction
    if step.target is not None and action.type not in _UNTARGETED:
        for key, e in element_keys(step.elements):
            if e == step.target:
                return key, verb, text
        return f"{step.target.role}|{' '.join(step.target.name.split())[:80]}", verb, text
    if action.type == ActionType.KEY:
        return f"key:{action.text}", verb, text
    if action.type == ActionType.SCROLL:
        return f"scroll:{text}", verb, text
    return verb, verb, text


class ScreenGraph:
    """Screens (digest -> url, element keys, visits) and edges (digest -> key -> edge)."""

    def __init__(self, volatile: Iterable[str] = (), guard: SafetyGuard | None = None):
        self.volatile = list(volatile)
        self.masks = [*self.volatile, *LAYOUT_MASKS]
        self.guard = guard or SafetyGuard()
        self.screens: dict[str, dict] = {}
        self.edges: dict[str, dict[str, dict]] = {}
        self.trajectories: set[str] = set()
        # (screen, key) a walk could not scroll into view: no longer untried, never a target.
        self.out_of_reach: set[tuple[str, str]] = set()

    # ------------------------------------------------------------------ learning
    def digest(self, tree: str | None) -> str:
        return screen_digest(tree, self.masks)

    def see(self, tree: str | None, url: str, elements: Iterable[Element]) -> str:
        """Record a visit of a screen; its digest."""
        d = self.digest(tree)
        screen = self.screens.get(d)
        if screen is None:
            keys = sorted({k for k, _ in explorable(elements, self.guard)})
            screen = self.screens[d] = {"url": url, "elements": keys, "visits": 0}
        elif url < screen["url"]:
            # One screen at several URLs (a search box's query, typed or not): the least,
            # so a graph rebuilt from the store in another order names the same one.
            screen["url"] = url
        screen["visits"] += 1
        return d

    def add_edge(self, src: str, key: str, dst: str, verb: str, text: str | None) -> None:
        edge = self.edges.setdefault(src, {}).setdefault(key, {"verb": verb, "text": text, "to": {}})
        edge["verb"], edge["text"] = verb, text
        edge["to"][dst] = edge["to"].get(dst, 0) + 1

    def absorb(self, trajectory_id: str, steps: list[Step]) -> None:
        """Learn an episode's screens and transitions (once per trajectory id)."""
        if trajectory_id in self.trajectories:
            return
        self.trajectories.add(trajectory_id)
        steps = sorted(steps, key=lambda s: s.index)
        digests = [self.see(s.a11y_tree, s.url, s.elements) for s in steps]
        for i, step in enumerate(steps[:-1]):
            if step.act_ms is None or step.guard or step.action.type.value in TERMINAL_VERBS:
                continue  # not executed: it led nowhere
            gave_up = out_of_reach_key(step.action.description)
            if gave_up is not None:
                self.out_of_reach.add((digests[i], gave_up))
            key, verb, text = step_key(step)
            self.add_edge(digests[i], key, digests[i + 1], verb, text)

    # ------------------------------------------------------------------ reading
    def tried(self, screen: str, key: str) -> bool:
        return key in self.edges.get(screen, {})

    def tries(self, screen: str, key: str) -> int:
        edge = self.edges.get(screen, {}).get(key)
        return sum(edge["to"].values()) if edge else 0

    def untried(self, screen: str) -> list[str]:
        info = self.screens.get(screen)
        if info is None:
            return []
        done = self.edges.get(screen, {})
        return [k for k in info["elements"] if k not in done and (screen, k) not in self.out_of_reach]

    def tried_anywhere(self) -> set[str]:
        return {k for keys in self.edges.values() for k in keys}

    def likely_next(self, screen: str, key: str) -> str | None:
        """The screen an edge led to most often (ties: the smallest digest)."""
        edge = self.edges.get(screen, {}).get(key)
        if not edge:
            return None
        return min(edge["to"].items(), key=lambda kv: (-kv[1], kv[0]))[0]

    def path_to_frontier(
        self, start: str, max_len: int, prefer: set[str] | None = None
    ) -> list[tuple[str, str, str]] | None:
        """The shortest known path [(from, key, to), ...] from `start` to a screen with
        untried elements (one with an element in `prefer` first), at most `max_len` long;
        None when no such screen is known to be reachable."""
        best: list | None = None
        prev: dict[str, tuple[str, str] | None] = {start: None}
        queue = deque([(start, 0)])
        while queue:
            here, depth = queue.popleft()
            untried = self.untried(here)
            if untried and here != start:
                path = _unwind(prev, here)
                if not prefer or any(k in prefer for k in untried):
                    return path
                best = best or path
            if depth >= max_len:
                continue
            for key in sorted(k for k in self.edges.get(here, {}) if replayable(k)):
                nxt = self.likely_next(here, key)
                if nxt is not None and nxt not in prev:
                    prev[nxt] = (here, key)
                    queue.append((nxt, depth + 1))
        return best

    def summary(self) -> dict:
        """Screens, edges, (screen, element) pairs tried, untried elements left, episodes."""
        return {
            "screens": len(self.screens),
            "edges": sum(len(e["to"]) for keys in self.edges.values() for e in keys.values()),
            "pairs": sum(len(keys) for keys in self.edges.values()),
            "untried": sum(len(self.untried(d)) for d in self.screens),
            "episodes": len(self.trajectories),
        }

    def copy(self) -> ScreenGraph:
        """A private copy (a policy learns into its own while the crawl's keeps absorbing)."""
        out = ScreenGraph(self.volatile, self.guard)
        out.screens, out.edges = copy.deepcopy(self.screens), copy.deepcopy(self.edges)
        out.trajectories = set(self.trajectories)
        out.out_of_reach = set(self.out_of_reach)
        return out

    # ------------------------------------------------------------------ persisting
    def to_json(self) -> dict:
        return {
            "version": VERSION,
            "volatile": self.volatile,
            "trajectories": sorted(self.trajectories),
            "screens": self.screens,
            "edges": self.edges,
            "out_of_reach": sorted(list(p) for p in self.out_of_reach),
        }

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = json.dumps(self.to_json(), sort_keys=True, ensure_ascii=False, indent=1)
        atomic_write_bytes(path, data.encode("utf-8"))

    @classmethod
    def from_json(cls, data: dict, guard: SafetyGuard | None = None) -> ScreenGraph:
        out = cls(data.get("volatile") or [], guard)
        out.screens, out.edges = data["screens"], data["edges"]
        out.trajectories = set(data["trajectories"])
        out.out_of_reach = {tuple(p) for p in data.get("out_of_reach") or ()}
        return out


_OUT_OF_REACH = "Go back: out of reach by scrolling: "


def out_of_reach_words(key: str) -> str:
    """The description of the step that gave an element up (the graph reads it back)."""
    return _OUT_OF_REACH + key


def out_of_reach_key(description: str | None) -> str | None:
    if description and description.startswith(_OUT_OF_REACH):
        return description[len(_OUT_OF_REACH) :]
    return None


def _unwind(prev: dict, end: str) -> list[tuple[str, str, str]]:
    path = []
    here = end
    while prev[here] is not None:
        src, key = prev[here]
        path.append((src, key, here))
        here = src
    return path[::-1]


def graph_path(store: RawStore, collection: str) -> Path:
    return store.root / collection / GRAPH_FILE


def load_graph(
    store: RawStore, collection: str, volatile: Iterable[str] = (), guard: SafetyGuard | None = None
) -> ScreenGraph:
    """The collection's graph: its file, plus the committed episodes it has not absorbed.

    A file that names episodes the store does not hold (taken out, or lost with an
    unfinished batch), was made with other volatile masks, or does not parse, is
    rebuilt from the store's episodes.
    """
    volatile = list(volatile)
    path = graph_path(store, collection)
    committed = store.committed_ids(collection) if (store.root / collection).is_dir() else set()
    graph = ScreenGraph(volatile, guard)
    if path.is_file():
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            loaded = ScreenGraph.from_json(data, guard)
            if data.get("version") == VERSION and loaded.volatile == volatile:
                if loaded.trajectories <= committed:
                    graph = loaded
        except (OSError, ValueError, KeyError, TypeError):
            pass  # rebuilt below from what the store holds
    missing = committed - graph.trajectories
    if missing:
        absorb_store(graph, store, collection, missing)
    return graph


def absorb_store(graph: ScreenGraph, store: RawStore, collection: str, ids: set[str] | None = None) -> None:
    """Absorb the collection's recorded episodes (those in `ids`; None: all), in id order."""
    by_tid: dict[str, list[Step]] = {}
    for step in store.iter_steps(collection):
        if ids is None or step.trajectory_id in ids:
            by_tid.setdefault(step.trajectory_id, []).append(step)
    for t in store.iter_trajectories(collection):
        if ids is None or t.trajectory_id in ids:
            by_tid.setdefault(t.trajectory_id, [])  # an error episode: no steps, still seen
    for tid in sorted(by_tid):
        graph.absorb(tid, by_tid[tid])
