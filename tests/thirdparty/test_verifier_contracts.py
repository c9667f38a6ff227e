"""Verifier contracts on a real app: an http verifier's "not done" statuses, a js promise.

The notes app (apps.notes_server) creates /api/notes/milk when its Save button
is pressed; until then GET /api/notes/milk answers 404.
"""

from __future__ import annotations

import pytest

from crawlers.crawl_driver import EnvCrawl
from crawlers.env_crawl import crawl_environment
from schemas.environment import EnvironmentFileError, environment_from_dict
from trajforge.store.raw import RawStore

from .apps import notes_server

pytestmark = pytest.mark.slow

SAVE = {"tap": {"role": "button", "name": "Save"}}
NOTE_SAVED = (
    "(n) => ({done: n.title === 'milk', success: n.title === 'milk', reason: 'note ' + n.title + ' saved'})"
)


@pytest.fixture
def app():
    with notes_server() as app:
        yield app


def _crawl(app, tmp_path, script, verifier, max_steps=5):
    raw = {
        "name": "notes",
        "start_url": f"{app.url}/?delay=0",
        "max_steps": max_steps,
        "tasks": [{"task_id": "save", "instruction": "Save the note milk", "params": {"script": script}}],
        "verifier": verifier,
    }
    store = RawStore(tmp_path / "raw")
    crawl_environment(environment_from_dict(raw), EnvCrawl(policy="oracle", retries=0), store=store)
    [traj] = store.iter_trajectories()
    return traj


def test_http_404_means_not_done_until_the_resource_exists(app, tmp_path):
    verifier = {"kind": "http", "url": f"{app.url}/api/notes/milk", "expression": NOTE_SAVED}
    traj = _crawl(app, tmp_path, [{"wait": 100}, SAVE, {"wait": 100}], verifier)
    # Asked after the wait (404: not done), then after Save (200): done at once.
    assert [status for _, status in app.answers] == [404, 200]
    assert (traj.outcome, traj.verified_by, traj.reward, traj.num_steps) == ("success", "http", 1.0, 2)
    assert traj.verifier_reason == "note milk saved" and traj.error is None


def test_http_404_at_the_end_is_a_verified_failure(app, tmp_path):
    verifier = {"kind": "http", "url": f"{app.url}/api/notes/milk", "expression": NOTE_SAVED}
    traj = _crawl(app, tmp_path, [{"wait": 100}], verifier)
    assert set(status for _, status in app.answers) == {404}
    assert (traj.outcome, traj.verified_by, traj.reward) == ("failure", "http", 0.0)
    assert "answered HTTP 404: not done" in traj.verifier_reason


def test_http_statuses_outside_not_done_status_are_errors(app, tmp_path):
    verifier = {"kind": "http", "url": f"{app.url}/api/notes/milk", "not_done_status": [410]}
    traj = _crawl(app, tmp_path, [{"wait": 100}], verifier)
    assert traj.outcome == "error" and "answered HTTP 404" in traj.error
    assert "task 'save', http verifier" in traj.error


def test_not_done_status_belongs_to_http_verifiers():
    base = {"name": "x", "start_url": "http://127.0.0.1:1/", "tasks": [{"task_id": "a", "instruction": "x"}]}
    with pytest.raises(EnvironmentFileError, match="'not_done_status' is for http verifiers"):
        environment_from_dict(
            {**base, "verifier": {"kind": "js", "expression": "1", "not_done_status": [410]}}
        )
    with pytest.raises(EnvironmentFileError, match=r"not_done_status \[200\]"):
        environment_from_dict(
            {**base, "verifier": {"kind": "http", "url": "http://x/", "not_done_status": [200]}}
        )


@pytest.mark.parametrize(
    "expression",
    [
        # A promise, a function returning one, an async function: each is awaited.
        "fetch('/api/notes/milk').then(r => ({done: r.ok, success: r.ok, reason: 'status ' + r.status}))",
        "() => fetch('/api/notes/milk').then(r => ({done: r.ok, success: r.ok, reason: 'status ' + r.status}))",
        "async () => { const r = await fetch('/api/notes/milk'); return {done: r.ok, success: r.ok, reason: 'status ' + r.status}; }",
    ],
)
def test_a_js_verifier_may_answer_with_a_promise(app, tmp_path, expression):
    traj = _crawl(
        app, tmp_path, [{"wait": 100}, SAVE, {"wait": 100}], {"kind": "js", "expression": expression}
    )
    assert (traj.outcome, traj.verified_by, traj.reward, traj.num_steps) == ("success", "js", 1.0, 2)
    assert traj.verifier_reason == "status 200"
