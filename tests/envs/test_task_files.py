"""A task file replaces an environment file's tasks wherever an environment is played:
`trajforge serve ENV_FILE --tasks FILE` (listed in GET /v1/envs, played over HTTP) and
`trajforge.envs.make(..., tasks=FILE)`; a file made for another environment is refused
with both names."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import httpx
import pytest

import trajforge.envs as tf_envs
from schemas.environment import EnvironmentFileError, load_environment
from tests.envs import serving
from tests.envs.test_gui_env import centre, element
from trajforge.envs.remote import RemoteEnv

PRESSED = (
    "(() => {{ const ok = +(document.body.dataset.n || 0) >= {n}; return {{done: ok, success: ok}}; }})()"
)


def task_file(folder, environment="tiny"):
    rows = [
        {
            "task_id": f"press-add-{n}",
            "instruction": f"Press Add {n} times",
            "environment": environment,
            "verifier": {"kind": "js", "expression": PRESSED.format(n=n)},
        }
        for n in (1, 2)
    ]
    path = folder / f"{environment}-tasks.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def files(tiny_url, tmp_path_factory):
    folder = tmp_path_factory.mktemp("task-files")
    return serving.tiny_env_file(folder, tiny_url), task_file(folder)


def test_make_plays_the_task_files_tasks(files):
    env_file, tasks = files
    env = tf_envs.make(env_file, tasks=str(tasks))
    try:
        assert [t.task_id for t in env.unwrapped.tasks] == ["press-add-1", "press-add-2"]
        _, info = env.reset(seed=0, options={"task_id": "press-add-2"})
        add = centre(element(info, "button", "Add"))
        rewards = []
        for _ in range(2):
            _, reward, terminated, _, info = env.step({"type": "tap", "x": add[0], "y": add[1]})
            rewards.append((reward, terminated))
        assert rewards == [(0.0, False), (1.0, True)]  # the second press reaches the goal state
    finally:
        env.close()
    with pytest.raises(ValueError, match="not an Environment"):
        tf_envs.make(load_environment(env_file), tasks=str(tasks))


def test_serve_lists_and_plays_the_task_file(files, tmp_path):
    env_file, tasks = files
    with serving.serve(env_file, record_to=tmp_path / "data", extra=("--tasks", str(tasks))) as server:
        envs = {e["name"]: e for e in httpx.get(server.url + "/v1/envs").json()["envs"]}
        assert envs["tiny"]["tasks"] == ["press-add-1", "press-add-2"]
        remote = RemoteEnv(server.url, "tiny")
        try:
            obs, info = remote.reset(seed=1, options={"task_id": "press-add-1"})
            assert obs["instruction"] == "Press Add 1 times"
            x, y = centre(element(info, "button", "Add"))
            _, reward, terminated, _, _ = remote.step({"type": "tap", "x": x, "y": y})
            assert (reward, terminated) == (1.0, True)
        finally:
            remote.close()


def test_a_task_file_of_another_environment_is_refused_with_both_names(files, tmp_path):
    env_file, _ = files
    other = task_file(tmp_path, environment="datasette")
    with pytest.raises(EnvironmentFileError) as refused:
        load_environment(env_file, tasks_file=other)
    message = str(refused.value)
    assert "'datasette'" in message and "'tiny'" in message and "press-add-1" in message
    assert str(other) in message
    cli = [
        sys.executable,
        "-m",
        "trajforge.cli",
        "serve",
        str(env_file),
        "--tasks",
        str(other),
        "--port",
        "0",
    ]
    run = subprocess.run(
        cli, capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": "."}
    )
    assert run.returncode != 0 and "made for environment 'datasette', not 'tiny'" in run.stderr
    two = [*cli[:4], str(env_file), str(env_file), "--tasks", str(other)]
    run = subprocess.run(
        two, capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": "."}
    )
    assert run.returncode != 0 and "exactly one environment file" in run.stderr
