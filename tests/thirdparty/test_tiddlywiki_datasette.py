"""Crawling two third-party apps from the registries through their environment files alone.

TiddlyWiki (npm; a single-page app that saves to its Node server) and
Datasette (PyPI; a server-rendered data browser) are started on loopback once
for this file. The commands are the ones docs/crawl-your-own-app.md gives:
`trajforge crawl`, then `trajforge export`, `validate` and `stats`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from crawlers.crawl_driver import EnvCrawl
from crawlers.env_crawl import crawl_environment
from schemas.environment import load_environment
from trajforge.store.raw import RawStore

from .apps import ENVIRONMENTS

pytestmark = pytest.mark.slow
TRAJFORGE = [sys.executable, "-m", "trajforge.cli"]


@pytest.fixture(scope="module")
def apps(tiddlywiki_url, datasette_url):
    # Started once per run (tests/thirdparty/apps.py), shared with tests/envs.
    return {"TIDDLYWIKI_URL": tiddlywiki_url, "DATASETTE_URL": datasette_url}


@pytest.fixture(scope="module")
def crawled(apps, tmp_path_factory):
    """Both apps crawled once through the CLI: the oracle on the task files, a random walk."""
    data = tmp_path_factory.mktemp("data")
    env = {**__import__("os").environ, **apps}
    out = {}
    for name, policy, extra in (
        ("tiddlywiki", "oracle", []),
        ("datasette", "oracle", []),
        ("tiddlywiki", "random_walk", ["--episodes", "2", "--collection", "walk/tiddlywiki"]),
        ("datasette", "random_walk", ["--episodes", "2", "--collection", "walk/datasette"]),
    ):
        res = subprocess.run(
            [
                *TRAJFORGE,
                "crawl",
                str(ENVIRONMENTS / f"{name}.yaml"),
                "--policy",
                policy,
                "--data",
                str(data),
                *extra,
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=400,
        )
        assert res.returncode == 0, res.stderr[-2000:]
        out[(name, policy)] = json.loads(res.stdout.strip().splitlines()[-1])
    return data, out, env


def _trajs(data: Path, collection: str):
    return {t.task.task_id: t for t in RawStore(data / "raw").iter_trajectories(collection)}


def test_task_files_give_verified_successes_with_rewards(crawled):
    data, figures, _ = crawled
    tw = _trajs(data, "env/tiddlywiki")
    assert {k: (t.outcome, t.verified_by, t.reward) for k, t in tw.items()} == {
        "add-milk": ("success", "http", 1.0),
        "open-control-panel": ("success", "js", 1.0),
        "open-recent": ("success", "js", 1.0),
    }
    assert tw["add-milk"].verifier_reason == "milk saved on the server"
    ds = _trajs(data, "env/datasette")
    assert {k: (t.outcome, t.verified_by, t.task.language) for k, t in ds.items()} == {
        "open-cities": ("success", "js", "en"),
        "beijing-row": ("success", "python", "zh"),
        "paris-row": ("success", "python", "en"),
    }
    assert "matches" in ds["paris-row"].verifier_reason
    for key in (("tiddlywiki", "oracle"), ("datasette", "oracle")):
        assert figures[key]["verified_success_rate"] == 1.0, figures[key]
        assert figures[key]["step_ms_p50"] > 0 and figures[key]["reset_ms_p50"] > 0
    # The verifier's done ended each episode at once: no step after the last needed one.
    assert tw["open-control-panel"].num_steps == 1
    assert all(t.source_name in ("tiddlywiki", "datasette") for t in [*tw.values(), *ds.values()])


def test_random_walk_explores_and_is_never_silently_unknown_where_verified(crawled):
    data, figures, _ = crawled
    for name in ("tiddlywiki", "datasette"):
        walks = list(RawStore(data / "raw").iter_trajectories(f"walk/{name}"))
        assert len(walks) == 2
        # Exploration episodes have no verifier in these files: unknown, honestly, not error.
        assert {t.outcome for t in walks} == {"unknown"}, [t.error for t in walks]
        steps = [s for s in RawStore(data / "raw").iter_steps(f"walk/{name}")]
        assert len(steps) >= 2 * 4
        assert sum(1 for s in steps if s.screen_changed) >= 2
        fig = figures[(name, "random_walk")]
        assert 0.0 <= fig["noop_rate"] <= 1.0


def test_replay_is_deterministic(crawled):
    """The walk played back gives the same screens: same URL and tree at every step, once
    the environment's volatile text (Datasette's query timer) is masked."""
    data, _, env = crawled
    res = subprocess.run(
        [
            *TRAJFORGE,
            "crawl",
            str(ENVIRONMENTS / "datasette.yaml"),
            "--policy",
            "replay",
            "--replay-from",
            "walk/datasette",
            "--episodes",
            "2",
            "--collection",
            "replay/datasette",
            "--data",
            str(data),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    store = RawStore(data / "raw")

    def by_task(collection):
        task_of = {t.trajectory_id: t.task.task_id for t in store.iter_trajectories(collection)}
        out = {}
        for s in store.iter_steps(collection):
            out.setdefault(task_of[s.trajectory_id], []).append(s)
        return {k: sorted(v, key=lambda s: s.index) for k, v in out.items()}

    walk, replay = by_task("walk/datasette"), by_task("replay/datasette")
    environment = load_environment(ENVIRONMENTS / "datasette.yaml")
    assert walk.keys() == replay.keys()
    for task_id in walk:
        a, b = walk[task_id], replay[task_id]
        assert [s.action for s in a] == [s.action for s in b][: len(a)]
        assert [s.url for s in a] == [s.url for s in b][: len(a)]
        same_tree = sum(
            environment.masked(x.a11y_tree) == environment.masked(y.a11y_tree) for x, y in zip(a, b)
        )
        assert sum(x.a11y_tree == y.a11y_tree for x, y in zip(a, b)) < len(a)  # the timer ran
        assert same_tree == len(a), f"{task_id}: {same_tree} of {len(a)} trees equal"


def test_export_validate_and_stats_on_the_crawl(crawled, tmp_path):
    data, _, env = crawled
    out = tmp_path / "shards"
    res = subprocess.run(
        [
            *TRAJFORGE,
            "export",
            "--data",
            str(data),
            "--dataset",
            "thirdparty",
            "--collection",
            "env/tiddlywiki",
            "--collection",
            "env/datasette",
            "--out",
            str(out),
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    assert "of 6 trajectories" in res.stdout, res.stdout
    res = subprocess.run([*TRAJFORGE, "validate", str(out)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    res = subprocess.run([*TRAJFORGE, "stats", str(out)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "tiddlywiki" in res.stdout and "datasette" in res.stdout


def test_a_resumed_crawl_adds_nothing(crawled):
    data, _, env = crawled
    environment = load_environment(ENVIRONMENTS / "tiddlywiki.yaml")
    __import__("os").environ.update({"TIDDLYWIKI_URL": env["TIDDLYWIKI_URL"]})
    environment = load_environment(ENVIRONMENTS / "tiddlywiki.yaml")
    stats = crawl_environment(
        environment, EnvCrawl(policy="oracle"), store=RawStore(data / "raw"), collection="env/tiddlywiki"
    )
    assert (stats.trajectories, stats.skipped) == (0, 3)
