"""Bad input becomes an error trajectory or a message naming environment, task and field.

A tiny loopback server (a page with a counter, a 404, a verdict endpoint)
stands in for a user's app; every case goes through `crawl_environment`.
"""

from __future__ import annotations

import pytest

from crawlers.crawl_driver import EnvCrawl
from crawlers.env_crawl import crawl_environment
from schemas.environment import EnvironmentFileError, environment_from_dict, load_environment
from trajforge.store.raw import RawStore

from .apps import counter_server, free_port

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server():
    with counter_server() as url:
        yield url


def _one(server, tmp_path, **over):
    raw = {
        "name": "counter",
        "start_url": f"{server}/",
        "max_steps": 3,
        "tasks": [
            {
                "task_id": "add",
                "instruction": "Press Add twice",
                "params": {
                    "script": [
                        {"tap": {"role": "button", "name": "Add"}},
                        {"tap": {"role": "button", "name": "Add"}},
                    ]
                },
            }
        ],
        "verifier": {
            "kind": "js",
            "expression": "({done: document.body.dataset.n === '2', "
            "success: document.body.dataset.n === '2'})",
        },
    }
    raw.update(over)
    env = environment_from_dict(raw, source="counter.yaml")
    store = RawStore(tmp_path / "raw")
    stats = crawl_environment(env, EnvCrawl(policy="oracle", retries=0), store=store)
    [traj] = list(store.iter_trajectories())
    return traj, stats


def test_a_verified_episode_and_the_done_that_ends_it(server, tmp_path):
    traj, _ = _one(server, tmp_path)
    assert (traj.outcome, traj.verified_by, traj.reward, traj.num_steps) == ("success", "js", 1.0, 2)


def test_a_404_start_page_is_an_error_naming_the_status(server, tmp_path):
    traj, stats = _one(server, tmp_path, start_url=f"{server}/missing")
    assert traj.outcome == "error" and traj.num_steps == 0
    assert "HTTP 404" in traj.error and "environment 'counter', task 'add'" in traj.error


def test_an_unreachable_start_url_is_an_error(server, tmp_path):
    port = free_port()  # nothing listens there
    traj, _ = _one(
        server, tmp_path, start_url=f"http://127.0.0.1:{port}/", allow=[f"http://127.0.0.1:{port}"]
    )
    assert traj.outcome == "error" and "did not load" in traj.error, traj.error


def test_a_verifier_that_throws_or_hangs_is_an_error(server, tmp_path):
    traj, _ = _one(server, tmp_path, verifier={"kind": "js", "expression": "nope.missing"})
    assert traj.outcome == "error" and "js verifier" in traj.error and "nope" in traj.error
    traj, _ = _one(
        server,
        tmp_path / "b",
        verifier={"kind": "js", "timeout_s": 0.5, "expression": "new Promise(() => {})"},
    )
    assert traj.outcome == "error" and "0.5s" in traj.error, traj.error
    traj, _ = _one(server, tmp_path / "c", verifier={"kind": "python", "function": "os.path:nosuchfunction"})
    assert traj.outcome == "error" and "cannot load" in traj.error


def test_an_http_verdict_with_unknown_keys_is_refused(server, tmp_path):
    traj, _ = _one(server, tmp_path, verifier={"kind": "http", "url": f"{server}/verdict"})
    assert traj.outcome == "error" and "unknown key(s) ['extra']" in traj.error


def test_max_steps_without_done_asks_the_verifier_once_more(server, tmp_path):
    # Never done (the expression says done: false), three presses: the final
    # verdict decides, and it is a failure with the reason, never unknown.
    traj, _ = _one(
        server,
        tmp_path,
        max_steps=2,
        tasks=[
            {
                "task_id": "add",
                "instruction": "Press Add three times",
                "params": {"script": [{"tap": {"role": "button", "name": "Add"}}] * 3},
            }
        ],
        verifier={
            "kind": "js",
            "expression": "({done: false, success: document.body.dataset.n === '3', "
            "reason: 'n=' + document.body.dataset.n})",
        },
    )
    assert (traj.outcome, traj.verified_by, traj.reward) == ("failure", "js", 0.0)
    assert traj.verifier_reason == "n=2" and "max_steps=2" in traj.error


def test_environment_file_errors_name_file_environment_and_field(tmp_path):
    f = tmp_path / "app.yaml"
    f.write_text(
        "name: shop\nplatform: web\nstart_url: http://127.0.0.1:1/\n"
        "tasks: [{task_id: a, instruction: x}]\nverifer: {kind: js}\n"
    )
    with pytest.raises(EnvironmentFileError) as e:
        load_environment(f)
    msg = str(e.value)
    assert str(f) in msg and "environment 'shop'" in msg and "field 'verifer'" in msg
    assert "unknown field" in msg and "verifier" in msg
    f.write_text(
        "name: shop\nstart_url: http://127.0.0.1:1/\n"
        "tasks: [{task_id: a, instruction: x, verifier: {kind: http}}]\n"
    )
    with pytest.raises(EnvironmentFileError, match=r"field 'tasks.0.verifier'.*needs 'url'"):
        load_environment(f)
    f.write_text("name: shop\nplatform: android\ntasks: [{task_id: a, instruction: x}]\n")
    with pytest.raises(EnvironmentFileError, match="needs 'app'"):
        load_environment(f)


def test_freeze_time_fixes_the_page_clock(server, tmp_path):
    traj, _ = _one(
        server,
        tmp_path,
        freeze_time="2026-01-05T09:00:00Z",
        verifier={
            "kind": "js",
            "expression": "({done: true, success: Date.now() === Date.parse("
            "'2026-01-05T09:00:00Z'), reason: new Date().toISOString()})",
        },
    )
    assert (traj.outcome, traj.verifier_reason) == ("success", "2026-01-05T09:00:00.000Z")


def test_a_pool_of_two_browsers_gives_the_same_trajectories(server, tmp_path):
    from crawlers.allowlist import Allowlist
    from crawlers.crawl_browser_pool import WebEnvPool

    raw = {
        "name": "counter",
        "start_url": f"{server}/",
        "max_steps": 3,
        "tasks": [
            {
                "task_id": f"t{i}",
                "instruction": "Press Add twice",
                "params": {"script": [{"tap": {"role": "button", "name": "Add"}}] * (1 + i % 2)},
            }
            for i in range(4)
        ],
        "verifier": {"kind": "js", "expression": "({success: document.body.dataset.n === '2'})"},
    }
    env = environment_from_dict(raw)
    one = RawStore(tmp_path / "one")
    crawl_environment(env, EnvCrawl(policy="oracle", retries=0), store=one)
    two = RawStore(tmp_path / "two")
    with WebEnvPool(2, request_filter=Allowlist(env.origins())) as pool:
        stats = crawl_environment(env, EnvCrawl(policy="oracle", retries=0), store=two, pool=pool)
    assert stats.trajectories == 4
    key = lambda store: sorted(
        (t.trajectory_id, t.outcome, t.num_steps, t.device.name, t.reward)  # noqa: E731
        for t in store.iter_trajectories()
    )
    assert key(one) == key(two)
    assert [t[1] for t in key(one)].count("success") == 2
