"""`trajforge crawl ENV_FILE` as a user runs it: progress and error causes on stderr, exit codes.

The CLI runs in a subprocess against the notes app (apps.notes_server), with
environment files written here as a user would write them.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter

import pytest

from .apps import notes_server

pytestmark = pytest.mark.slow
TRAJFORGE = [sys.executable, "-m", "trajforge.cli"]

ENV = """name: notes
start_url: {url}/?delay=0
max_steps: 4
wait_for: {wait_for}
wait_timeout_s: 1
verifier:
  kind: js
  expression: "({{done: document.body.dataset.saved === '1', success: document.body.dataset.saved === '1'}})"
tasks:
{tasks}
"""
SAVE = (
    "  - {task_id: save, instruction: Save the note, params: {script: [{tap: {role: button, name: Save}}]}}"
)
LOOK = "  - {task_id: look, instruction: Save the note, params: {script: [{wait: 50}]}}"
GONE = "  - {task_id: gone, instruction: Save the note, start_url: /missing, params: {script: []}}"


@pytest.fixture(scope="module")
def app():
    with notes_server() as app:
        yield app


def _env_file(tmp_path, app, tasks, wait_for="'li.item'"):
    path = tmp_path / "notes.yaml"
    path.write_text(ENV.format(url=app.url, wait_for=wait_for, tasks="\n".join(tasks)))
    return path


def test_progress_error_causes_and_exit_0_when_some_episodes_work(app, tmp_path):
    env_file = _env_file(tmp_path, app, [SAVE, LOOK, GONE])
    proc = subprocess.Popen(
        [*TRAJFORGE, "crawl", str(env_file), "--policy", "oracle", "--data", str(tmp_path / "data")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines, running_at_first = [], None
    deadline = time.monotonic() + 300
    for line in proc.stderr:  # read as it comes: the progress shows while the crawl runs
        lines.append(line.rstrip("\n"))
        if running_at_first is None and "episodes" in line:
            running_at_first = proc.poll() is None
        assert time.monotonic() < deadline
    out = proc.stdout.read()
    assert proc.wait(60) == 0, "\n".join(lines)
    assert running_at_first, "\n".join(lines)
    progress = [ln for ln in lines if ln.startswith("crawl notes: ") and " episodes" in ln]
    assert [ln.split(" episodes")[0].removeprefix("crawl notes: ") for ln in progress] == [
        "1/3",
        "2/3",
        "3/3",
    ]
    assert progress[-1].startswith(
        "crawl notes: 3/3 episodes, 2 verified (1 success, 1 failure), 1 error(s), 0 unknown; gone: error: "
    ), progress
    retries = [ln for ln in lines if "gone: retrying after StartPageError" in ln]
    assert len(retries) == 2  # the default two retries
    assert not any("Traceback" in ln for ln in lines)  # tracebacks only with --verbose
    assert (
        f"1 episode errored: StartPageError: environment 'notes', start_url: the start page "
        f"{app.url}/missing answered HTTP 404"
    ) in lines
    summary = json.loads(out.strip().splitlines()[-1])
    assert (summary["success"], summary["failure"], summary["error"], summary["verified"]) == (1, 1, 1, 2)


def test_every_episode_errored_exits_3_and_says_why_once(app, tmp_path):
    env_file = _env_file(tmp_path, app, [SAVE, LOOK], wait_for='"nosuch.ready === true"')
    res = subprocess.run(
        [*TRAJFORGE, "crawl", str(env_file), "--policy", "oracle", "--data", str(tmp_path / "data")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 3, res.stderr
    cause = (
        "WaitForTimeout: environment 'notes', wait_for 'nosuch.ready === true' did not hold "
        "within 1 s (last error: ReferenceError: nosuch is not defined)"
    )
    assert f"2 episodes errored: {cause}" in res.stderr.splitlines(), res.stderr
    assert "error: every episode errored (2); exit code 3" in res.stderr
    summary = json.loads(res.stdout.strip().splitlines()[-1])  # the figures still come
    assert summary["error"] == 2 and summary["error_reasons"] == {cause: 2}
    # A re-run finds them stored: nothing played, nothing errored, exit 0.
    again = subprocess.run(
        [*TRAJFORGE, "crawl", str(env_file), "--policy", "oracle", "--data", str(tmp_path / "data")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert again.returncode == 0 and json.loads(again.stdout.strip().splitlines()[-1])["skipped"] == 2


def test_one_cause_of_many_episodes_is_counted_once():
    from crawlers.crawl_driver import CrawlStats
    from crawlers.randomise import fixed
    from schemas.records import Task, Trajectory

    stats = CrawlStats()
    for i in range(3):
        task = Task(task_id=f"t{i}", instruction="x", language="en", app="notes")
        tid = f"traj-{i}"
        error = (
            f"StartPageError: environment 'notes', task 't{i}', start_url: the start page "
            f"http://127.0.0.1:1/?sid={tid} did not load\n  at a second line"
        )
        stats.count(
            Trajectory(
                trajectory_id=tid,
                task=task,
                platform="web",
                app="notes",
                device=fixed("desktop", "en"),
                policy="oracle",
                outcome="error",
                num_steps=0,
                error=error,
            )
        )
    assert stats.error_reasons == {
        "StartPageError: environment 'notes', start_url: the start page http://127.0.0.1:1/?sid={session} did not load": 3
    }


def _crawl(env_file, data, *args):
    res = subprocess.run(
        [*TRAJFORGE, "crawl", str(env_file), "--policy", "oracle", "--data", str(data), *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    summary = json.loads(res.stdout.strip().splitlines()[-1]) if res.stdout.strip() else None
    return res, summary


def test_retries_sets_how_often_a_broken_task_is_tried(app, tmp_path):
    env_file = _env_file(tmp_path, app, [LOOK], wait_for='"nosuch.ready === true"')
    once, summary = _crawl(env_file, tmp_path / "once", "--retries", "0")
    assert once.returncode == 3 and "retrying after" not in once.stderr, once.stderr
    assert (summary["error"], summary["retries"]) == (1, 0)
    twice, summary = _crawl(env_file, tmp_path / "twice", "--retries", "1")
    assert twice.returncode == 3 and twice.stderr.count("look: retrying after WaitForTimeout") == 1
    assert (summary["error"], summary["retries"]) == (1, 1)
    bad, _ = _crawl(env_file, tmp_path / "bad", "--retries", "-1")
    assert bad.returncode == 2 and "--retries" in bad.stderr


def test_retry_errors_plays_errored_tasks_again_under_their_ids(app, tmp_path):
    """After the file is fixed, --retry-errors replaces each stored error by the new
    episode: same id, one record per id, steps of the new episode only."""
    from trajforge.store.raw import RawStore

    data = tmp_path / "data"
    store = RawStore(data / "raw")
    broken = _env_file(tmp_path, app, [SAVE, LOOK, GONE], wait_for='"nosuch.ready === true"')
    first, summary = _crawl(broken, data, "--retries", "0")
    assert first.returncode == 3 and summary["error"] == 3, first.stderr
    ids = {t.task.task_id: t.trajectory_id for t in store.iter_trajectories("env/notes")}

    fixed = _env_file(tmp_path, app, [SAVE, LOOK, GONE])  # wait_for: 'li.item'
    plain, summary = _crawl(fixed, data, "--retries", "0")
    assert plain.returncode == 0 and (summary["skipped"], summary["episodes"]) == (3, 0)

    again, summary = _crawl(fixed, data, "--retries", "0", "--retry-errors")
    assert again.returncode == 0, again.stderr
    assert (summary["replayed_errors"], summary["skipped"], summary["episodes"]) == (3, 0, 3)
    assert (summary["success"], summary["failure"], summary["error"]) == (1, 1, 1)  # gone: still 404
    trajs = list(store.iter_trajectories("env/notes"))
    assert sorted(t.trajectory_id for t in trajs) == sorted(ids.values())  # the same ids, once each
    outcome = {t.task.task_id: t.outcome for t in trajs}
    assert outcome == {"save": "success", "look": "failure", "gone": "error"}
    steps = Counter(s.trajectory_id for s in store.iter_steps("env/notes"))
    assert steps == {t.trajectory_id: t.num_steps for t in trajs if t.num_steps}

    last, summary = _crawl(fixed, data, "--retries", "0", "--retry-errors")  # only gone again
    assert last.returncode == 3  # every episode it played errored
    assert (summary["replayed_errors"], summary["skipped"], summary["error"]) == (1, 2, 1)
    assert len(list(store.iter_trajectories("env/notes"))) == 3
