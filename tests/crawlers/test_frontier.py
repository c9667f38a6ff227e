"""The frontier walk on the sandbox's shop in Chromium: more of the app than the random walk.

Both policies crawl the same number of exploration episodes of the same length
with the same seed, through the sandbox's environment (its shop's start page, no
pop-ups), on one real headless Chromium; the coverage of each is read back from
its recorded steps by the same code (a screen graph per collection).
"""

from __future__ import annotations

import json

import pytest

from crawlers.crawl_driver import EnvCrawl
from crawlers.crawl_report import summary_lines
from crawlers.env_crawl import crawl_environment
from crawlers.screen_graph import ScreenGraph, absorb_store, graph_path
from sandbox.environment import sandbox_app_environment
from schemas.environment import environment_from_dict
from tests.sandbox_fixtures import sandbox_fixtures
from trajforge.store.raw import RawStore

pytestmark = pytest.mark.slow

sandbox, env = sandbox_fixtures("module")
EPISODES, STEPS, SEED = 6, 8, 0


@pytest.fixture(scope="module")
def crawled(sandbox, env, tmp_path_factory):
    store = RawStore(tmp_path_factory.mktemp("frontier") / "raw")
    environment = sandbox_app_environment(sandbox.url, "shop")
    stats = {}
    for policy in ("random_walk", "frontier"):
        how = EnvCrawl(policy=policy, seed=SEED, episodes=EPISODES, max_steps=STEPS, retries=1)
        stats[policy] = crawl_environment(environment, how, store=store, collection=policy, env=env)
    return store, environment, stats


def _coverage(store: RawStore, collection: str, volatile) -> dict:
    graph = ScreenGraph(volatile)
    absorb_store(graph, store, collection)
    return graph.summary()


def test_frontier_covers_more_distinct_screens_than_the_random_walk(crawled):
    store, environment, stats = crawled
    walk = _coverage(store, "random_walk", environment.volatile)
    frontier = _coverage(store, "frontier", environment.volatile)
    print("random_walk", walk, "frontier", frontier)
    assert stats["frontier"].error == stats["random_walk"].error == 0
    assert walk["episodes"] == frontier["episodes"] == EPISODES
    # Measured 42 vs 27 screens and 42 vs 42 pairs (6 x 8 steps, seed 0).
    assert frontier["screens"] >= 1.25 * walk["screens"]
    assert frontier["pairs"] >= walk["pairs"]


def test_each_walk_is_a_trajectory_and_the_graph_file_is_the_graph_of_what_was_recorded(crawled):
    store, environment, stats = crawled
    walks = list(store.iter_trajectories("frontier"))
    assert len(walks) == EPISODES
    assert {t.policy for t in walks} == {"frontier"}
    assert all(t.task.params["explore"] and t.num_steps == STEPS for t in walks)
    saved = json.loads(graph_path(store, "frontier").read_text())
    rebuilt = ScreenGraph(environment.volatile)
    absorb_store(rebuilt, store, "frontier")
    assert saved == json.loads(json.dumps(rebuilt.to_json()))
    assert stats["frontier"].summary()["graph"] == rebuilt.summary()
    # The random walk keeps no graph.
    assert "graph" not in stats["random_walk"].summary()
    assert not graph_path(store, "random_walk").exists()


def test_a_page_with_nothing_to_touch_says_so(pages_url, tmp_path):
    environment = environment_from_dict(
        {"name": "bare", "start_url": f"{pages_url}/second.html", "explore": {"episodes": 2, "max_steps": 3}}
    )
    how = EnvCrawl(policy="frontier", retries=0)
    stats = crawl_environment(environment, how, store=RawStore(tmp_path / "raw"))
    assert stats.trajectories == 2 and stats.error == 0
    assert stats.graph["screens"] == 1 and stats.graph["untried"] == 0
    assert any(line.startswith("nothing to explore: ") for line in summary_lines(stats))


def test_the_environments_shortcut_keys_are_pressed_on_a_screen_and_after_typing():
    from crawlers.frontier import FrontierPolicy
    from schemas.observation import Observation
    from schemas.records import Element

    box = Element(role="textbox", name="Note", bbox=(0.1, 0.1, 0.9, 0.9))
    obs = Observation(b"", "png", 800, 600, "desktop://editor", '- textbox "Note"\n', [box])
    for seed in range(5):
        policy = FrontierPolicy(ScreenGraph(), seed, max_steps=7, keys=("ctrl+s",))
        acts = [policy.act(obs) for _ in range(7)]
        keys = [a.text for a in acts if a.type.value == "key"]
        # The shortcut is untried on the screen until pressed (the text box is the other).
        assert "ctrl+s" in keys, [a.description for a in acts]
        assert acts[-1].type.value == "done"


def test_retype_types_new_words_into_a_field_the_walk_has_tried():
    from crawlers.frontier import FrontierPolicy
    from schemas.observation import Observation
    from schemas.records import Element

    box = Element(role="textbox", name="Formula", bbox=(0.1, 0.1, 0.9, 0.2))
    obs = Observation(b"", "png", 800, 600, "desktop://sheet", '- textbox "Formula"\n', [box])

    def typed(retype: float) -> list[str]:
        words = []
        for seed in range(5):
            policy = FrontierPolicy(ScreenGraph(), seed, max_steps=12, keys=("ctrl+s",), retype=retype)
            words += [a.text for a in (policy.act(obs) for _ in range(12)) if a.type.value == "type"]
        return words

    # Without it a field is typed into once a walk: tried, it left the screen as it was.
    assert len(typed(0.0)) == 5
    again = typed(0.6)
    assert len(again) >= 15 and len(set(again)) >= 5, again
