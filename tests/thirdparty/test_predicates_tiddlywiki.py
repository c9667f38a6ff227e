"""`predicates` tasks on TiddlyWiki (npm), from the example file's `probes` and a task file.

examples/environments/tiddlywiki.yaml declares a js probe (the titles the page
holds) and an http probe (the titles saved on the server, `pick: "*.title"`);
tiddlywiki_predicates.jsonl checks them and the accessibility tree. The oracle's
demonstrations verify; the same tasks with nothing done (the file's setup deletes
what they create) are verified failures whose reason names the failing predicate.
"""

from __future__ import annotations

import pytest

from crawlers.crawl_driver import EnvCrawl
from crawlers.env_crawl import crawl_environment
from schemas.environment import load_environment
from trajforge.store.raw import RawStore

from .apps import ENVIRONMENTS

pytestmark = pytest.mark.slow


def test_predicate_tasks_verify_after_the_demonstration_and_not_after_reset(
    tiddlywiki_url, monkeypatch, tmp_path
):
    monkeypatch.setenv("TIDDLYWIKI_URL", tiddlywiki_url)
    env = load_environment(
        ENVIRONMENTS / "tiddlywiki.yaml", tasks_file=ENVIRONMENTS / "tiddlywiki_predicates.jsonl"
    )
    assert {name: p.kind for name, p in env.probes.items()} == {"titles": "js", "saved_titles": "http"}
    # The same tasks, nothing done: the end state is the reset's.
    idle = [
        t.model_copy(update={"task_id": t.task_id + "-idle", "params": {"script": [{"done": "nothing"}]}})
        for t in env.tasks
    ]
    env.tasks = [idle[0], *env.tasks, idle[1]]
    store = RawStore(tmp_path / "raw")
    crawl_environment(env, EnvCrawl(policy="oracle", retries=0), store=store)
    got = {t.task.task_id: t for t in store.iter_trajectories()}
    assert {k: (t.outcome, t.verified_by, t.reward) for k, t in got.items()} == {
        "add-milk-predicates": ("success", "predicates", 1.0),
        "open-recent-predicates": ("success", "predicates", 1.0),
        "add-milk-predicates-idle": ("failure", "predicates", 0.0),
        "open-recent-predicates-idle": ("failure", "predicates", 0.0),
    }, {k: t.error for k, t in got.items()}
    assert got["add-milk-predicates"].verifier_reason == "all 3 predicates hold"
    assert got["add-milk-predicates-idle"].verifier_reason.startswith(
        "predicate 0 (probe titles contains 'milk') fails: value ["
    )
    assert "and 1 more of 3 fail" in got["add-milk-predicates-idle"].verifier_reason
    assert got["open-recent-predicates-idle"].verifier_reason == (
        "predicate 0 (tab 'Recent' selected=True) fails: found 1, none matching: selected=False"
        " (and 1 more of 2 fail)"
    )
    # Done as soon as every predicate held: the tab's task ended on its one tap.
    assert got["open-recent-predicates"].num_steps == 1
