"""The environment file's model: placeholders, task files, variables, old trajectory parts."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from schemas.arrow import TRAJECTORY_SCHEMA, trajectory_to_row, upgrade_trajectories
from schemas.environment import EnvironmentFileError, fill, load_environment
from schemas.records import DeviceProfile, Task, Trajectory
from trajforge.store.raw import RawStore

BASE = "name: app\nstart_url: http://127.0.0.1:9/\n"


def test_only_the_named_placeholders_are_filled():
    js = "if (x) { localStorage.setItem('s', '{session}'); } const o = {a: 1}; `${t}` {seed}{nope}"
    out = fill(js, seed=7, task_id="t1", session="abc", language="en")
    assert out == "if (x) { localStorage.setItem('s', 'abc'); } const o = {a: 1}; `${t}` 7{nope}"


@pytest.mark.parametrize("kind", ["jsonl", "parquet"])
def test_tasks_from_a_file(tmp_path, kind):
    rows = [
        {"task_id": "a", "instruction": "Do A", "language": "en", "params": {"k": 1}},
        {
            "task_id": "b",
            "instruction": "做 B",
            "language": "zh",
            "params": {},
            "verifier": {"kind": "js", "expression": "true"},
        },
    ]
    path = tmp_path / f"tasks.{kind}"
    if kind == "jsonl":
        path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n")
    else:
        pq.write_table(
            pa.Table.from_pylist(
                [
                    {
                        **r,
                        "params": json.dumps(r["params"]),
                        "verifier": json.dumps(r.get("verifier")) if r.get("verifier") else None,
                    }
                    for r in rows
                ]
            ),
            path,
        )
    (tmp_path / "env.yaml").write_text(BASE + f"tasks: tasks.{kind}\n")
    env = load_environment(tmp_path / "env.yaml")
    assert [(t.task_id, t.language, t.params) for t in env.tasks] == [("a", "en", {"k": 1}), ("b", "zh", {})]
    assert env.verifier_for(env.as_tasks()[1]).kind == "js"
    assert env.verifier_for(env.as_tasks()[0]) is None


def test_a_bad_task_line_names_the_file_and_line(tmp_path):
    (tmp_path / "tasks.jsonl").write_text('{"task_id": "a", "instruction": "x"}\n{oops\n')
    (tmp_path / "env.yaml").write_text(BASE + "tasks: tasks.jsonl\n")
    with pytest.raises(EnvironmentFileError, match=r"tasks.jsonl.*line 2 is not JSON"):
        load_environment(tmp_path / "env.yaml")
    (tmp_path / "env.yaml").write_text(
        BASE + "tasks: [{task_id: a, instruction: x}, {task_id: a, instruction: y}]\n"
    )
    with pytest.raises(EnvironmentFileError, match="task_id 'a' appears twice"):
        load_environment(tmp_path / "env.yaml")


def test_deployment_variables(tmp_path, monkeypatch):
    (tmp_path / "env.yaml").write_text(
        "name: app\nstart_url: ${APP_URL:-http://127.0.0.1:1}/home\n"
        'setup: "const s = `${x}`"\ntasks: [{task_id: a, instruction: x}]\n'
    )
    assert load_environment(tmp_path / "env.yaml").start_url == "http://127.0.0.1:1/home"
    monkeypatch.setenv("APP_URL", "http://10.0.0.1:8")
    env = load_environment(tmp_path / "env.yaml")
    assert env.start_url == "http://10.0.0.1:8/home" and env.setup == "const s = `${x}`"
    assert env.origins() == ["http://10.0.0.1:8"]
    (tmp_path / "env.yaml").write_text(
        "name: app\nstart_url: ${NOT_SET_ANYWHERE}/\ntasks: [{task_id: a, instruction: x}]\n"
    )
    with pytest.raises(EnvironmentFileError, match=r"field 'start_url'.*NOT_SET_ANYWHERE\} is not set"):
        load_environment(tmp_path / "env.yaml")


def test_volatile_text_is_masked(tmp_path):
    (tmp_path / "env.yaml").write_text(
        BASE + "volatile: ['took [0-9.]+ms']\ntasks: [{task_id: a, instruction: x}]\n"
    )
    env = load_environment(tmp_path / "env.yaml")
    assert env.masked("Queries took 2.1ms") == env.masked("Queries took 13.9ms")
    (tmp_path / "env.yaml").write_text(BASE + "volatile: ['(']\ntasks: [{task_id: a, instruction: x}]\n")
    with pytest.raises(EnvironmentFileError, match="not a regex"):
        load_environment(tmp_path / "env.yaml")


def test_a_desktop_session_folder_is_volatile_on_every_desktop_environment(tmp_path):
    """pcmanfm shows its session's own folder (a new temporary path each reset): a goal
    named by it could never hold again, so it is masked as the file's own patterns are."""
    (tmp_path / "env.yaml").write_text(
        "name: files\nplatform: desktop\nlaunch: pcmanfm\nvolatile: ['[0-9]+ items']\n"
        "tasks: [{task_id: a, instruction: x}]\n"
    )
    env = load_environment(tmp_path / "env.yaml")
    one, two = "/tmp/tf-desktop-4_iit_xa/home/docs", "/var/tmp/tf-desktop-o88lhjwc/home/docs"
    assert env.masked(f"- textbox: {one}") == env.masked(f"- textbox: {two}") == "- textbox: <volatile>"
    assert env.masked("3 items, ~/docs") == "<volatile>, ~/docs"  # the file's own kept
    assert env.volatile.count(env.volatile[-1]) == 1 and len(env.volatile) == 2


def _traj(**kw) -> Trajectory:
    return Trajectory(
        trajectory_id="t1",
        task=Task(task_id="a", instruction="x", language="en", app="app"),
        platform="web",
        app="app",
        device=DeviceProfile(viewport_width=10, viewport_height=10),
        policy="random_walk",
        num_steps=0,
        **kw,
    )


def test_trajectory_parts_written_before_the_reward_columns_still_read(tmp_path):
    old_schema = pa.schema(
        [f for f in TRAJECTORY_SCHEMA if f.name not in ("reward", "verifier", "verifier_reason")]
    )
    row = {k: v for k, v in trajectory_to_row(_traj()).items() if k in old_schema.names}
    folder = tmp_path / "raw" / "old"
    folder.mkdir(parents=True)
    pq.write_table(
        pa.Table.from_pylist([row], schema=old_schema), folder / "part-000000.trajectories.parquet"
    )
    pq.write_table(
        pa.Table.from_pylist([], schema=pa.schema([("trajectory_id", pa.string())])),
        folder / "part-000000.steps.parquet",
    )
    [t] = list(RawStore(tmp_path / "raw").iter_trajectories("old"))
    assert (t.reward, t.verifier, t.verifier_reason) == (None, None, None)
    table = upgrade_trajectories(pq.read_table(folder / "part-000000.trajectories.parquet"))
    assert table.schema == TRAJECTORY_SCHEMA
    new = _traj(reward=0.5, verifier="http", verifier_reason="half", verified_by="http", outcome="failure")
    assert trajectory_to_row(new)["reward"] == 0.5


def test_explore_takes_the_frontier_walk_and_a_time_budget(tmp_path):
    (tmp_path / "env.yaml").write_text(BASE + "explore: {policy: frontier, minutes: 30}\n")
    env = load_environment(tmp_path / "env.yaml")
    assert (env.explore.policy, env.explore.minutes, env.explore.episodes) == ("frontier", 30, 10)
    assert "episodes" not in env.explore.model_fields_set  # only the time stops the walk
    (tmp_path / "env.yaml").write_text(BASE + "explore: {policy: frontier, minutes: 0}\n")
    with pytest.raises(EnvironmentFileError, match=r"env.yaml.*explore.minutes"):
        load_environment(tmp_path / "env.yaml")
    (tmp_path / "env.yaml").write_text(BASE + "explore: {policy: bfs}\n")
    with pytest.raises(EnvironmentFileError, match=r"explore.policy.*frontier"):
        load_environment(tmp_path / "env.yaml")
