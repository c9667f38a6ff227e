"""The frontier walk on Datasette (PyPI), through examples/environments/datasette.yaml.

In process: more screens than the random walk at the same budget and seed, the
same walk twice for the same seed, a phone (mobile_web) crawl of the same file,
and two browsers at once absorbing into one graph. Through the CLI as a user runs it: a crawl killed (SIGKILL) half-way and
run again ends with every episode recorded once and the graph of exactly
those, the same as a crawl never interrupted; `--minutes` stops starting
episodes when the time is spent.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest

from crawlers.crawl_driver import EnvCrawl
from crawlers.env_crawl import crawl_environment
from crawlers.screen_graph import ScreenGraph, absorb_store, graph_path
from schemas.environment import load_environment
from trajforge.store.raw import RawStore

from .apps import ENVIRONMENTS

pytestmark = pytest.mark.slow
TRAJFORGE = [sys.executable, "-m", "trajforge.cli"]
DATASETTE_FILE = ENVIRONMENTS / "datasette.yaml"
EPISODES, STEPS = 5, 6


@pytest.fixture(scope="module")
def datasette_env(datasette_url, monkeypatch_module):
    monkeypatch_module.setenv("DATASETTE_URL", datasette_url)
    return load_environment(DATASETTE_FILE)


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def _crawl(environment, root, policy: str, collection: str | None = None, **kw):
    store = RawStore(root / "raw")
    how = EnvCrawl(policy=policy, seed=0, episodes=EPISODES, max_steps=STEPS, retries=1, **kw)
    stats = crawl_environment(environment, how, store=store, collection=collection or policy)
    return store, stats


@pytest.fixture(scope="module")
def frontier_run(datasette_env, tmp_path_factory):
    return _crawl(datasette_env, tmp_path_factory.mktemp("frontier"), "frontier", "env/datasette")


def _summary(store, collection, environment) -> dict:
    graph = ScreenGraph(environment.volatile)
    absorb_store(graph, store, collection)
    return graph.summary()


def test_frontier_covers_more_of_datasette_than_the_random_walk_and_replays_the_same(
    datasette_env, frontier_run, tmp_path
):
    store, stats = frontier_run
    walk_store, walk_stats = _crawl(datasette_env, tmp_path / "walk", "random_walk")
    frontier = _summary(store, "env/datasette", datasette_env)
    walk = _summary(walk_store, "random_walk", datasette_env)
    print("random_walk", walk, "frontier", frontier)
    assert stats.error == walk_stats.error == 0
    assert frontier["episodes"] == walk["episodes"] == EPISODES
    # Measured 16 vs 12 screens, 21 vs 19 pairs (5 x 6 steps, seed 0).
    assert frontier["screens"] >= 1.2 * walk["screens"]
    assert frontier["pairs"] >= walk["pairs"]
    # The same seed on the same app: the same walks, the same graph file.
    again, _ = _crawl(datasette_env, tmp_path / "again", "frontier", "env/datasette")
    actions = lambda s: sorted((st.trajectory_id, st.index, st.action) for st in s.iter_steps())  # noqa: E731
    assert actions(again) == actions(store)
    assert graph_path(again, "env/datasette").read_text() == graph_path(store, "env/datasette").read_text()


def test_a_phone_explores_the_same_file(datasette_env, tmp_path):
    phone = datasette_env.model_copy(update={"platform": "mobile_web", "devices": ["pixel_8"]})
    store = RawStore(tmp_path / "raw")
    how = EnvCrawl(policy="frontier", seed=0, episodes=2, max_steps=5, retries=1)
    stats = crawl_environment(phone, how, store=store)
    walks = list(store.iter_trajectories())
    assert [t.outcome for t in walks] == ["unknown", "unknown"], [t.error for t in walks]
    # A phone emulated in the crawl's own Chromium (the file's pixel_8).
    assert all(t.device.is_mobile and t.device.viewport_width == 412 for t in walks)
    assert stats.graph["episodes"] == 2 and stats.graph["screens"] >= 4
    assert stats.graph["pairs"] >= 6


def test_two_browsers_share_one_graph(datasette_env, tmp_path):
    from crawlers.allowlist import Allowlist
    from crawlers.crawl_browser_pool import WebEnvPool

    store = RawStore(tmp_path / "raw")
    how = EnvCrawl(policy="frontier", seed=0, episodes=4, max_steps=4, retries=1)
    with WebEnvPool(2, request_filter=Allowlist(datasette_env.origins())) as pool:
        stats = crawl_environment(datasette_env, how, store=store, pool=pool)
    ids = {t.trajectory_id for t in store.iter_trajectories()}
    assert len(ids) == 4 and stats.error == 0
    saved = json.loads(graph_path(store, "datasette").read_text())
    assert set(saved["trajectories"]) == ids
    rebuilt = ScreenGraph(datasette_env.volatile)
    absorb_store(rebuilt, store, "datasette")
    assert saved == json.loads(json.dumps(rebuilt.to_json()))


def _cli(data, *extra: str, url: str) -> list[str]:
    return [
        *TRAJFORGE,
        "crawl",
        str(DATASETTE_FILE),
        "--policy",
        "frontier",
        "--max-steps",
        str(STEPS),
        "--data",
        str(data),
        *extra,
    ]


def test_a_killed_exploration_resumes_without_duplicates_to_the_uninterrupted_graph(
    datasette_url, frontier_run, tmp_path
):
    env = {**os.environ, "DATASETTE_URL": datasette_url}
    data = tmp_path / "data"
    cmd = _cli(data, "--episodes", str(EPISODES), url=datasette_url)
    graph_file = data / "raw" / "env" / "datasette" / "screen_graph.json"
    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if graph_file.is_file() and len(json.loads(graph_file.read_text())["trajectories"]) >= 2:
                break
            time.sleep(0.2)
        assert proc.poll() is None, "the crawl ended before it could be killed"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
    store = RawStore(data / "raw")
    killed_at = len(store.committed_ids("env/datasette"))
    assert 2 <= killed_at < EPISODES
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["skipped"] == killed_at and summary["episodes"] == EPISODES - killed_at
    ids = [t.trajectory_id for t in store.iter_trajectories("env/datasette")]
    assert len(ids) == EPISODES and not [i for i, n in Counter(ids).items() if n > 1]
    steps = Counter((s.trajectory_id, s.index) for s in store.iter_steps("env/datasette"))
    assert max(steps.values()) == 1
    saved = json.loads(graph_file.read_text())
    assert set(saved["trajectories"]) == set(ids)
    # The graph (and so every walk) is the one of the crawl never interrupted.
    whole, _ = frontier_run
    assert saved == json.loads(graph_path(whole, "env/datasette").read_text())
    assert summary["graph"] == ScreenGraph.from_json(saved).summary()
    # Progress says what the graph holds; the end says what was explored.
    assert "screens" in done.stderr and "untried elements left" in done.stderr
    assert "explored: " in done.stderr


def test_minutes_stop_starting_episodes(datasette_url, tmp_path):
    env = {**os.environ, "DATASETTE_URL": datasette_url}
    cmd = _cli(tmp_path / "data", "--minutes", "0.1", url=datasette_url)
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    # Without --episodes, the time alone stops the walk (the file's explore.episodes is 4,
    # given there: that is the cap). 6 s of 6-step episodes: 1 or 2 of them.
    assert 1 <= summary["episodes"] < 4 and summary["not_started"] == 4 - summary["episodes"]
    assert "time budget spent" in done.stderr
