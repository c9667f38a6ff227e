"""`trajforge tasks synthesize` on an app whose walks change nothing a goal could name (the
tiny counter: its one button changes a paragraph's text): it says why and exits 4."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.envs.serving import REPO, tiny_env_file


def test_an_app_without_goals_says_so_and_exits_4(tiny_url, tmp_path):
    env_file = tiny_env_file(tmp_path, tiny_url, max_steps=2)
    cli = [
        sys.executable, "-m", "trajforge.cli", "tasks", "synthesize", str(env_file), "--minutes", "0.25",
        "--data", str(tmp_path / "data"), "--random-tries", "2",
    ]  # fmt: skip
    run = subprocess.run(
        cli,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert run.returncode == 4, run.stderr[-2000:]
    summary = json.loads(run.stdout.strip().splitlines()[-1])
    assert summary["walks"] >= 1 and summary["candidates"] == 0 and summary["kept_tasks"] == 0
    assert "no task of tiny kept (the walks changed nothing a goal could name" in run.stderr
    assert (tmp_path / "data" / "tasks" / "tiny.jsonl").read_text() == ""  # written whole, empty


def test_bad_settings_are_one_line_and_exit_2(tiny_url, tmp_path):
    env_file = tiny_env_file(tmp_path, tiny_url)
    cli = [sys.executable, "-m", "trajforge.cli", "tasks", "synthesize", str(env_file), "--minutes", "1"]
    run = subprocess.run(
        [*cli, "--languages", "en,fr"], capture_output=True, text=True, timeout=120, cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert run.returncode == 2 and run.stderr.startswith("error: languages ['en', 'fr']"), run.stderr
