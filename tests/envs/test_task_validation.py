"""Validating a task file (crawlers/task_validation.py, `trajforge tasks validate`) on a real
Chromium: the tiny counter app with a file mixing a good task with a trivial, an unachievable,
a non-specific, a random-shortcut, a duplicate, a demonstration-less and a broken one; and
TiddlyWiki's example tasks (js and http verifiers, element-named script demonstrations)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from crawlers.task_goals import difficulty, duplicates, goal_key, masked_instruction
from crawlers.task_validation import ValidationSettings, validate_tasks
from crawlers.task_validation_report import TaskFigures, kept_rows
from schemas.environment import EnvironmentFileError, environment_from_dict, load_environment
from tests.envs.serving import REPO, tiny_env_file

PRESSED = (
    "(() => {{ const ok = +(document.body.dataset.n || 0) >= {n}; return {{done: ok, success: ok}}; }})()"
)
EXACTLY = (
    "(() => {{ const ok = +(document.body.dataset.n || 0) === {n}; return {{done: ok, success: ok}}; }})()"
)
ADD = {"tap": {"role": "button", "name": "Add"}}
FAST = ValidationSettings(random_tries=10, random_steps=1)


def row(task_id, instruction, expression, script=None, environment="tiny"):
    r = {
        "task_id": task_id,
        "instruction": instruction,
        "environment": environment,
        "verifier": {"kind": "js", "expression": expression},
    }
    if script is not None:
        r["params"] = {"script": script}
    return r


def press(n, task_id=None, instruction=None, taps=None):
    return row(
        task_id or f"press-add-{n}",
        instruction or f"Press Add {n} times",
        PRESSED.format(n=n),
        [ADD] * (taps or n),
    )


MIXED = [
    press(2),  # the good task's demonstration satisfies it: not specific
    press(3),  # the good one
    press(
        3, "press-add-3-again", "Press Add 4 times", taps=4
    ),  # its instruction up to its values: a duplicate
    row("count-zero", "Make the count read 0", "document.getElementById('count').textContent === '0'", [ADD]),
    row("pay", "Pay now", "document.body.dataset.paid === '1'", [ADD]),  # its demonstration misses
    press(1),  # one random step reaches it
    row("no-demo", "Pay twice", "document.body.dataset.paid === '2'"),
    row("broken", "Find it", "document.querySelector('#nothing').textContent === 'x'", [ADD]),
]
EXPECTED = {
    "press-add-2": "not_specific",
    "press-add-3-again": "duplicate",
    "count-zero": "trivial",
    "pay": "unachievable",
    "press-add-1": "random_shortcut",
    "no-demo": "no_demonstration",
    "broken": "error",
}


def write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def tiny(tiny_url, tmp_path_factory):
    folder = tmp_path_factory.mktemp("validate")
    return folder, tiny_env_file(folder, tiny_url)


@pytest.fixture(scope="module")
def mixed(tiny):
    folder, env_file = tiny
    environment = load_environment(env_file, tasks_file=write(folder / "mixed.jsonl", MIXED))
    return validate_tasks(environment, FAST)


def test_the_mixed_file_keeps_the_good_task_and_names_every_rejection(mixed):
    assert mixed.kept == ["press-add-3"]
    assert {r.task_id: r.reason for r in mixed.rejections} == EXPECTED
    assert mixed.reason_of("press-add-2").detail == "true after the demonstration of 'press-add-3'"
    assert "'press-add-3'" in mixed.reason_of("press-add-3-again").detail
    assert "TypeError" in mixed.reason_of("broken").detail
    summary = mixed.summary()
    assert summary["tasks_in"] == 8 and summary["kept"] == 1
    assert summary["rejected"] == {reason: 1 for reason in EXPECTED.values()}
    assert (summary["kept_3_steps_or_more"], summary["kept_languages"]) == (1, {"en": 1})


def test_the_figures_of_the_kept_and_the_shortcut_task(mixed):
    good, lucky = mixed.figures["press-add-3"], mixed.figures["press-add-1"]
    assert (good.demo_steps, good.checks, good.random_tries, good.random_success) == (3, 1, 10, 0)
    assert good.difficulty == difficulty(3, 1, 0.0) == 0.49
    assert lucky.demo_steps == 1 and lucky.random_rate > 0.05 and lucky.difficulty is None
    # 2 resets for each achievable task, 1 for the trivial and the unachievable one, none for
    # the broken one (its verifier already raised on an earlier end state); 10 walks, one start
    assert mixed.episodes == 2 * 3 + 1 + 1 + 10 and mixed.tasks_per_core_hour > 0


def test_a_fallback_is_played_where_the_demonstration_misses_and_kept_in_its_place(tiny):
    """A synthesised task carries its walk's whole path (`params.fallback`): where the
    steps found needed miss the goal (a state no screen showed), the path is played on
    every reset, and the kept row's demonstration is the one that reached it."""
    folder, env_file = tiny

    def exactly(n, taps, fallback):
        r = row(f"exactly-{n}", f"Make the count {n}", EXACTLY.format(n=n), [ADD] * taps)
        r["params"]["fallback"] = {"script": [ADD] * fallback, "walk_steps": list(range(fallback))}
        return r

    rescued, lost, plain = exactly(4, 2, 4), exactly(5, 2, 3), exactly(2, 2, 6)
    rows = [rescued, lost, plain]
    environment = load_environment(env_file, tasks_file=write(folder / "fallback.jsonl", rows))
    report = validate_tasks(environment, ValidationSettings(random_tries=2, random_steps=1))
    assert {r.task_id: r.reason for r in report.rejections} == {"exactly-5": "unachievable"}
    assert report.figures["exactly-4"].fallback and report.figures["exactly-4"].demo_steps == 4
    assert not report.figures["exactly-2"].fallback and report.figures["exactly-2"].demo_steps == 2
    # 2 resets each: the missed one, then 2 with the fallback; the lost task's fallback
    # missed at once; the plain one never needed its own.
    assert report.episodes == (1 + 2) + (1 + 1) + 2 + 2
    kept = {r["task_id"]: r["params"] for r in kept_rows(report, rows)}
    assert kept == {
        "exactly-4": {"script": [ADD] * 4, "walk_steps": [0, 1, 2, 3]},
        "exactly-2": {"script": [ADD] * 2},
    }


def test_a_deadline_plays_what_the_time_allows_and_leaves_the_rest_unplayed(tiny):
    """Synthesis validates as many candidates as its budget allows: past the deadline no
    further demonstration starts (the first always does), the random walks still run,
    and the tasks not reached are neither kept nor rejected."""
    folder, env_file = tiny
    rows = [row(f"exactly-{n}", f"Make the count {n}", EXACTLY.format(n=n), [ADD] * n) for n in (2, 3, 4)]
    environment = load_environment(env_file, tasks_file=write(folder / "deadline.jsonl", rows))
    settings = ValidationSettings(random_tries=2, random_steps=1)
    late = validate_tasks(environment, settings, deadline=time.perf_counter())
    assert late.kept == ["exactly-2"] and late.rejections == []
    assert late.unplayed == ["exactly-3", "exactly-4"] and late.tested == 1
    assert late.episodes == 2 + 2  # its 2 resets, the 2 walks from its start
    assert late.summary()["unplayed"] == 2 and late.rates()["played"] == 1
    assert [r["task_id"] for r in kept_rows(late, rows)] == ["exactly-2"]
    # Time enough: all played (exactly-2 and -3 are on exactly-4's way, but exact counts).
    ample = validate_tasks(environment, settings, deadline=time.perf_counter() + 600)
    assert ample.unplayed == [] and ample.kept == ["exactly-2", "exactly-3", "exactly-4"]


def test_duplicates_goals_and_difficulty_without_a_browser():
    assert masked_instruction('Create "milk" with 3 cups') == masked_instruction("create 'eggs' with 12 cups")
    raw = {"name": "t", "start_url": "http://127.0.0.1:1/", "tasks": MIXED}
    environment = environment_from_dict(raw)
    assert duplicates(environment) == {"press-add-3-again": "press-add-3"}
    spaced = environment_from_dict(
        {
            **raw,
            "tasks": [
                press(3),
                {
                    **press(3, "x", "Press Add 3 times"),
                    "verifier": {"kind": "js", "expression": " " + PRESSED.format(n=3) + "\n"},
                },
            ],
        }
    )
    assert goal_key(spaced, spaced.tasks[0]) == goal_key(spaced, spaced.tasks[1])  # spaces aside
    assert goal_key(environment, environment.tasks[0]) != goal_key(environment, environment.tasks[1])
    assert difficulty(1, 1, 0.05) == 0.09 and difficulty(30, 9, 0.0) == 1.0
    with pytest.raises(ValueError, match="at least 2 resets"):
        ValidationSettings(resets=1)
    with pytest.raises(EnvironmentFileError, match="tasks.0.difficulty"):
        environment_from_dict({**raw, "tasks": [{**press(3), "difficulty": 1.5}]})


def test_the_fewest_tasks_are_dropped_to_leave_every_kept_one_specific():
    """Conflicts as validation found them (which demonstrations satisfied which tasks),
    without a browser: one long demonstration that passes three goals on its way loses,
    not the three; of two that satisfy each other the later is kept; a goal holding
    all of another's checks and more is no rival."""
    from crawlers.task_validation import _Run, _specific
    from crawlers.task_validation_report import ValidationReport

    def goal(task_id, *names):
        checks = [{"element": {"role": "heading", "name": n}} for n in names]
        return {
            "task_id": task_id,
            "instruction": f"Open {task_id}",
            "verifier": {"kind": "predicates", "predicates": checks},
        }

    tasks = [
        goal("a", "A"),
        goal("b", "B"),
        goal("c", "C"),
        goal("long", "L"),
        goal("x", "X"),
        goal("y", "Y"),
    ]
    tasks += [goal("part", "P"), goal("whole", "P", "Q")]
    environment = environment_from_dict({"name": "t", "start_url": "http://127.0.0.1:1/", "tasks": tasks})
    ids = [t["task_id"] for t in tasks]
    report = ValidationReport(environment="t", tasks_in=len(ids))
    run = _Run(
        environment, FAST, report, {t.task_id: t for t in environment.as_tasks()}, candidates=list(ids)
    )
    for task_id in ids:
        report.figures[task_id] = TaskFigures(task_id, checks=1, demo_steps=2)
    run.satisfied_by = {
        "a": {"long"},
        "b": {"long"},
        "c": {"long", "a"},
        "x": {"y"},
        "y": {"x"},
        "part": {"whole"},
    }
    _specific(run)
    assert report.kept == ["a", "b", "y", "part", "whole"]
    reasons = {r.task_id: r.detail for r in report.rejections}
    assert reasons == {
        "c": "true after the demonstration of 'a'",
        "long": "its demonstration also makes 'a' and 1 more true (kept instead)",
        "x": "true after the demonstration of 'y'",
    }
    assert all(report.figures[t].difficulty is not None for t in report.kept)


def cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "trajforge.cli", "tasks", "validate", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


def test_cli_writes_the_kept_tasks_with_difficulty_and_a_summary(tiny, tmp_path):
    folder, env_file = tiny
    tasks = write(tmp_path / "two.jsonl", [press(3), press(3, "again", "Press Add 5 times", taps=5)])
    out = tmp_path / "kept" / "tasks.jsonl"
    report = tmp_path / "report.json"
    run = cli(tasks, env_file, "--out", out, "--report", report, "--random-tries", 3, "--random-steps", 1)
    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout.strip().splitlines()[-1])
    assert (summary["tasks_in"], summary["kept"], summary["rejected"]) == (2, 1, {"duplicate": 1})
    assert summary["seconds"] > 0 and summary["seconds_per_task"] > 0 and summary["tasks_per_core_hour"] > 0
    assert "rejected again: duplicate" in run.stderr and "2 tasks in, 1 kept" in run.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["task_id"], r["difficulty"]) for r in rows] == [("press-add-3", 0.49)]
    assert rows[0]["params"] == {"script": [ADD] * 3} and rows[0]["environment"] == "tiny"
    figures = {f["task_id"]: f for f in json.loads(report.read_text())["figures"]}
    assert figures["press-add-3"]["demo_steps"] == 3 and figures["press-add-3"]["random_tries"] == 3
    assert figures["again"]["demo_steps"] is None  # a duplicate is not played
    reloaded = load_environment(env_file, tasks_file=out)
    assert [(t.task_id, t.difficulty) for t in reloaded.tasks] == [("press-add-3", 0.49)]


def test_cli_exits_non_zero_when_nothing_is_kept_and_refuses_another_environments_file(tiny, tmp_path):
    folder, env_file = tiny
    trivial = write(tmp_path / "trivial.jsonl", [MIXED[3], MIXED[6]])
    out = tmp_path / "none.jsonl"
    run = cli(trivial, env_file, "--out", out)
    assert run.returncode == 4 and not out.exists()
    assert "no task of" in run.stderr and "trivial 1" in run.stderr and "no_demonstration 1" in run.stderr
    other = write(tmp_path / "other.jsonl", [row("x", "X", "true", [ADD], environment="datasette")])
    run = cli(other, env_file)
    assert run.returncode == 2 and "made for environment 'datasette', not 'tiny'" in run.stderr
    with pytest.raises(EnvironmentFileError):
        load_environment(env_file, tasks_file=other)


def test_tiddlywikis_example_tasks(tiddlywiki_file):
    environment = load_environment(tiddlywiki_file)
    report = validate_tasks(environment, ValidationSettings(random_tries=4, random_steps=3))
    reasons = {r.task_id: r.reason for r in report.rejections}
    print(json.dumps(report.as_dict(), indent=1))
    assert "add-milk" in report.kept  # its http verifier reads the server; no walk types "milk"
    milk = report.figures["add-milk"]
    assert milk.demo_steps >= 4 and milk.random_success == 0 and 0 < milk.difficulty <= 1
    for task_id in ("open-control-panel", "open-recent"):
        assert task_id in report.kept or reasons[task_id] in ("random_shortcut", "not_specific")
    assert set(report.kept) | set(reasons) == {t.task_id for t in environment.tasks}


def test_played_on_the_callers_env_which_stays_open(tiny, tmp_path):
    from crawlers.web_env import WebEnv

    folder, env_file = tiny
    environment = load_environment(env_file, tasks_file=write(tmp_path / "one.jsonl", [press(2)]))
    env = WebEnv.launch()
    try:
        report = validate_tasks(environment, ValidationSettings(random_tries=2, random_steps=1), env=env)
        assert report.kept == ["press-add-2"] and report.episodes == 2 + 2
        assert env.is_alive()  # the caller's: not closed
    finally:
        env.close()
