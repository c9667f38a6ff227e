"""The screen graph and the frontier walk's choices, on screens written here.

A three-screen app (home -> list -> item, each a tree with its own controls) is
played by the policy itself: observations in, actions out, the graph learnt from
the recorded steps as a crawl would record them. The browser-backed coverage
figures are in test_frontier.py and tests/thirdparty/test_explore_frontier.py.
"""

from __future__ import annotations

import time

from crawlers.frontier import FrontierPolicy
from crawlers.screen_graph import ScreenGraph, element_keys, graph_path, load_graph
from schemas.actions import Action, ActionType
from schemas.observation import Observation
from schemas.records import DeviceProfile, Element, Step, Task, Trajectory
from trajforge.store.raw import RawStore

SHA = "0" * 64


def _el(role: str, name: str, y: float) -> Element:
    return Element(role=role, name=name, bbox=(0.1, y, 0.3, y + 0.04))


# Each screen: its controls; a tap on one leads to the screen it names (None: stays).
APP = {
    "home": {("link", "List"): "list", ("link", "Help"): "help", ("button", "Noop"): None},
    "list": {("link", "Item"): "item", ("link", "Home"): "home"},
    "item": {("link", "Home"): "home", ("button", "Buy"): "bought", ("button", "Share"): "item"},
    "help": {("link", "Home"): "home"},
    "bought": {("link", "Home"): "home"},
}


def _obs(screen: str, boxes_shift: float = 0.0) -> Observation:
    els = [_el(r, n, 0.1 + 0.1 * i + boxes_shift) for i, (r, n) in enumerate(APP[screen])]
    tree = "\n".join(
        f'- {e.role} "{e.name}" [ref=e{i}] [box=10,{int(e.bbox[1] * 800)},100,30]' for i, e in enumerate(els)
    )
    return Observation(b"", "png", 1280, 800, f"http://app/{screen}", f"- heading {screen}\n{tree}", els)


class FakeApp:
    """The app above, driven by actions: which screen a tap at a point leads to."""

    def __init__(self):
        self.screen = "home"

    def step(self, action: Action) -> Observation:
        if action.type == ActionType.TAP:
            for e in _obs(self.screen).elements:
                if e.contains(action.x, action.y):
                    self.screen = APP[self.screen][(e.role, e.name)] or self.screen
        elif action.type == ActionType.BACK:
            self.screen = "home"
        return _obs(self.screen)


def _episode(graph: ScreenGraph, seed: int, max_steps: int, tid: str) -> list[Step]:
    app, policy = FakeApp(), FrontierPolicy(graph.copy(), seed, max_steps)
    obs, steps = _obs("home"), []
    for i in range(max_steps):
        action = policy.act(obs)
        steps.append(
            Step(
                trajectory_id=tid,
                index=i,
                screenshot=SHA,
                width=1280,
                height=800,
                url=obs.url,
                a11y_tree=obs.a11y_tree,
                elements=obs.elements,
                action=action,
                target=policy.last_target,
            )
        )
        if action.type == ActionType.DONE:
            break
        obs = app.step(action)
    return steps


def _explore(episodes: int, seed: int = 0, max_steps: int = 5) -> tuple[ScreenGraph, list[list[Step]]]:
    graph, played = ScreenGraph(), []
    for n in range(episodes):
        steps = _episode(graph, seed + n, max_steps, f"t{n}")
        graph.absorb(f"t{n}", steps)
        played.append(steps)
    return graph, played


def test_element_keys_tell_repeats_apart():
    keys = [
        k
        for k, _ in element_keys(
            [_el("link", "Home", 0.1), _el("link", "Home  ", 0.2), _el("button", "Home", 0.3)]
        )
    ]
    assert keys == ["link|Home", "link|Home#1", "button|Home"]


def test_a_screen_is_its_tree_without_layout_or_volatile_text():
    graph = ScreenGraph(volatile=["took [0-9]+ms"])
    a = graph.digest('- button "Go" [ref=e4] [box=8,109,34,21]\n- text: took 12ms')
    assert a == graph.digest('- button "Go" [ref=e9] [box=8,300,34,21]\n- text: took 99ms')
    assert a != graph.digest('- button "Stop" [ref=e4] [box=8,109,34,21]\n- text: took 12ms')


def test_the_frontier_walk_tries_every_control_of_the_app_and_reaches_deep_ones_by_known_paths():
    graph, _ = _explore(episodes=6)
    assert len(graph.screens) == 5
    assert graph.summary()["untried"] == 0  # every control of every screen tried
    assert graph.summary()["pairs"] == sum(len(c) for c in APP.values())
    # Five 5-step episodes cover it whatever the seed: once home is exhausted, an
    # episode walks the known path (home -> list -> item) to the screen left to try.
    # (Without the paths, seeds 2, 3 and 4 leave 2 untried: measured.)
    for seed in range(5):
        assert _explore(episodes=5, seed=seed)[0].summary()["untried"] == 0, seed


def test_same_seed_and_graph_same_walk_and_another_seed_another():
    _, a = _explore(episodes=3, seed=7)
    _, b = _explore(episodes=3, seed=7)
    assert [[s.action for s in ep] for ep in a] == [[s.action for s in ep] for ep in b]
    runs = {tuple(s.action.y for s in _explore(episodes=1, seed=n)[1][0]) for n in range(6)}
    assert len(runs) > 1


def _trajectory(tid: str, n: int) -> Trajectory:
    return Trajectory(
        trajectory_id=tid,
        task=Task(task_id=tid, instruction="Explore", language="en", app="app"),
        platform="web",
        app="app",
        device=DeviceProfile(name="d", viewport_width=1280, viewport_height=800),
        policy="frontier",
        num_steps=n,
        created_at=time.time(),
    )


def test_the_graph_file_resumes_and_is_rebuilt_from_the_store_when_it_disagrees(tmp_path):
    store = RawStore(tmp_path / "raw")
    graph, played = _explore(episodes=3)
    with store.writer("c", batch_size=1) as w:
        for n, steps in enumerate(played[:2]):
            w.add(_trajectory(f"t{n}", len(steps)), steps)
    partial = ScreenGraph()
    partial.absorb("t0", played[0])
    partial.save(graph_path(store, "c"))
    # t1 was committed after the last save: absorbed from the store on load.
    loaded = load_graph(store, "c")
    assert loaded.trajectories == {"t0", "t1"}
    both = ScreenGraph()
    for n in range(2):
        both.absorb(f"t{n}", played[n])
    assert loaded.to_json() == both.to_json()
    # A file naming an episode the store does not hold (t2) is rebuilt from the store.
    graph.save(graph_path(store, "c"))
    assert load_graph(store, "c").to_json() == both.to_json()
    # Other volatile masks: other digests, so rebuilt too.
    assert load_graph(store, "c", volatile=["Item"]).volatile == ["Item"]


def test_a_time_budget_alone_is_not_capped_by_the_default_episodes():
    from crawlers.env_crawl import TIMED_EPISODES, environment_tasks
    from schemas.environment import environment_from_dict

    timed = environment_from_dict({"name": "a", "start_url": "http://a/", "explore": {"minutes": 5}})
    assert len(environment_tasks(timed, explore=True, timed=True)) == TIMED_EPISODES
    assert len(environment_tasks(timed, explore=True, timed=True, episodes=7)) == 7
    capped = environment_from_dict({"name": "a", "start_url": "http://a/", "explore": {"episodes": 3}})
    assert len(environment_tasks(capped, explore=True, timed=True)) == 3
    # The frontier walk explores a file of tasks without `explore` too (its defaults).
    tasks = environment_from_dict(
        {"name": "a", "start_url": "http://a/", "tasks": [{"task_id": "t", "instruction": "x"}]}
    )
    assert [t.task_id for t in environment_tasks(tasks)] == ["t"]
    assert len(environment_tasks(tasks, explore=True)) == 10


def test_an_element_no_scroll_brings_into_view_is_given_up_once_for_every_later_walk():
    """A control below the fold of a page that does not scroll: the walk scrolls for it
    once, sees it did not move, gives it up in words the graph reads back from the recorded steps, and no
    later episode (nor a graph rebuilt from the store's steps) scrolls for it again."""
    APP["stuck"] = {("button", "Far away"): None}
    stuck = _el("button", "Far away", 1.5)  # below the screen; FakeApp ignores scrolls

    def obs() -> Observation:
        tree = '- heading stuck\n- button "Far away" [ref=e0] [box=10,1200,100,30]'
        return Observation(b"", "png", 1280, 800, "http://app/stuck", tree, [stuck])

    def episode(graph: ScreenGraph, tid: str) -> list[Step]:
        policy, steps = FrontierPolicy(graph.copy(), 0, 8), []
        for i in range(8):
            action = policy.act(obs())
            steps.append(
                Step(trajectory_id=tid, index=i, screenshot=SHA, width=1280, height=800, url="http://app/stuck",
                     a11y_tree=obs().a11y_tree, elements=[stuck], action=action)
            )  # fmt: skip
            if action.type == ActionType.DONE:
                break
        return steps

    try:
        graph = ScreenGraph()
        first = episode(graph, "s0")
        graph.absorb("s0", first)
        assert [s.action.type.value for s in first[:2]] == ["scroll", "back"]
        assert len(graph.out_of_reach) == 1 and not any(graph.untried(d) for d in graph.screens)
        second = episode(graph, "s1")
        assert "scroll" not in [s.action.type.value for s in second]
        rebuilt = ScreenGraph()
        rebuilt.absorb("s0", first)
        assert rebuilt.out_of_reach == graph.out_of_reach
        assert ScreenGraph.from_json(graph.to_json()).out_of_reach == graph.out_of_reach
    finally:
        del APP["stuck"]
