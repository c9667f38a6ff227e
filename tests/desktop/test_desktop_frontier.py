"""The frontier walk on a desktop app (mousepad, a Debian package) through its example file:
the same policy and screen graph as on the web, on a real Xvfb and AT-SPI bus."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from crawlers.crawl_driver import EnvCrawl
from crawlers.env_crawl import crawl_environment
from crawlers.screen_graph import graph_path
from schemas.environment import load_environment
from trajforge.store.raw import RawStore

from .procs import assert_nothing_left, session_pids

ENVIRONMENTS = Path(__file__).resolve().parents[2] / "examples" / "environments"
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        any(shutil.which(p) is None for p in ("Xvfb", "mousepad")),
        reason="needs Xvfb and mousepad (scripts/setup_desktop.sh)",
    ),
]


def test_frontier_explores_mousepad_and_keeps_its_graph(tmp_path):
    before = session_pids()
    store = RawStore(tmp_path / "raw")
    how = EnvCrawl(policy="frontier", seed=0, episodes=2, max_steps=6, retries=1)
    stats = crawl_environment(load_environment(ENVIRONMENTS / "mousepad.yaml"), how, store=store)
    assert_nothing_left(before)
    walks = list(store.iter_trajectories())
    assert [(t.platform, t.policy, t.outcome) for t in walks] == [("desktop", "frontier", "unknown")] * 2, [
        t.error for t in walks
    ]
    # The menus and the text area: screens the walk opened, each element tried once per screen.
    graph = stats.summary()["graph"]
    assert graph["episodes"] == 2 and graph["screens"] >= 4 and graph["pairs"] >= 6
    saved = json.loads(graph_path(store, "mousepad").read_text())
    assert sorted(saved["trajectories"]) == sorted(t.trajectory_id for t in walks)
