"""Exploration episodes are judged by the environment's verifier when `explore` names none.

The notes app states its own task ("Save the note milk", read by
`instruction_js`) and marks `body[data-saved]` once saved: the environment's
default js verifier judges every walk, so no walk is `unknown`.
"""

from __future__ import annotations

import pytest

from crawlers.crawl_driver import EnvCrawl
from crawlers.env_crawl import crawl_environment
from schemas.environment import environment_from_dict
from trajforge.store.raw import RawStore

from .apps import notes_server

pytestmark = pytest.mark.slow

SAVED = {
    "kind": "js",
    "expression": "({done: document.body.dataset.saved === '1', success: document.body.dataset.saved === '1', "
    "reason: document.body.dataset.saved === '1' ? 'saved' : 'not saved'})",
}


@pytest.fixture(scope="module")
def app():
    with notes_server() as app:
        yield app


def _walks(app, tmp_path, **over):
    raw = {
        "name": "notes",
        "start_url": f"{app.url}/?delay=0",
        "instruction_js": "document.getElementById('task').textContent",
        "verifier": SAVED,
        **over,
    }
    store = RawStore(tmp_path / "raw")
    crawl_environment(environment_from_dict(raw), EnvCrawl(policy="random_walk", retries=0), store=store)
    return list(store.iter_trajectories())


def test_walks_of_an_app_that_makes_up_its_task_are_verified_by_the_default_verifier(app, tmp_path):
    walks = _walks(app, tmp_path, explore={"policy": "random_walk", "episodes": 3, "max_steps": 4})
    assert len(walks) == 3
    for t in walks:
        assert t.task.params["explore"] and t.task.instruction == "Save the note milk"
        assert t.outcome in ("success", "failure"), (t.outcome, t.error)
        assert (t.verified_by, t.verifier) == ("js", "js")
        assert t.reward == (1.0 if t.outcome == "success" else 0.0)
        assert t.verifier_reason in ("saved", "not saved")


def test_instruction_js_without_explore_is_verified_too(app, tmp_path):
    [walk] = _walks(app, tmp_path)
    assert walk.outcome in ("success", "failure") and walk.verified_by == "js"


def test_explore_names_its_own_verifier_or_none(app, tmp_path):
    own = {"kind": "js", "expression": "({done: false, success: true, reason: 'walk judged'})"}
    walks = _walks(app, tmp_path / "own", explore={"episodes": 1, "max_steps": 2, "verifier": own})
    assert [(t.outcome, t.verified_by, t.verifier_reason) for t in walks] == [
        ("success", "js", "walk judged")
    ]
    # verifier: null: the walks are recorded unverified, honestly unknown.
    walks = _walks(app, tmp_path / "none", explore={"episodes": 1, "max_steps": 2, "verifier": None})
    assert [(t.outcome, t.verified_by, t.reward) for t in walks] == [("unknown", "none", None)]
