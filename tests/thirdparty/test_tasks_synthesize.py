"""`trajforge tasks synthesize` on TiddlyWiki (npm), an app no task of ours was written for
in this test: frontier walks, goals from what they changed, validation, a task file in
English and Chinese that the oracle crawl verifies by its predicates and a random walk
mostly does not; a re-run resumes the walks and writes the file whole, with no duplicate."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from crawlers.crawl_driver import EnvCrawl
from crawlers.env_crawl import crawl_environment
from schemas.environment import load_environment
from trajforge.store.raw import RawStore

from .apps import ENVIRONMENTS, ROOT

pytestmark = pytest.mark.slow
TW = ENVIRONMENTS / "tiddlywiki.yaml"


def synthesize(data, tiddlywiki_url, minutes="1.2"):
    cli = [
        sys.executable, "-m", "trajforge.cli", "tasks", "synthesize", str(TW), "--minutes", minutes,
        "--data", str(data), "--random-tries", "4",
    ]  # fmt: skip
    env = {**os.environ, "TIDDLYWIKI_URL": tiddlywiki_url, "PYTHONPATH": str(ROOT)}
    return subprocess.run(cli, capture_output=True, text=True, timeout=600, env=env, cwd=ROOT)


def test_synthesised_tasks_are_verified_by_the_oracle_and_rarely_by_a_random_walk(
    tiddlywiki_url, monkeypatch, tmp_path
):
    run = synthesize(tmp_path, tiddlywiki_url)
    assert run.returncode == 0, run.stderr[-3000:]
    summary = json.loads(run.stdout.strip().splitlines()[-1])
    assert (
        summary["walks"] >= 2 and summary["candidates"] >= summary["validated"] >= summary["kept_goals"] >= 1
    )
    assert summary["kept_tasks"] == 2 * summary["kept_goals"] and summary["languages"] == ["en", "zh"]
    assert sum(summary["rejected"].values()) == summary["validated"] - summary["kept_goals"]
    out = tmp_path / "tasks" / "tiddlywiki.jsonl"
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == summary["kept_tasks"] and len({r["task_id"] for r in rows}) == len(rows)
    assert {r["language"] for r in rows} == {"en", "zh"}
    assert all(r["verifier"]["kind"] == "predicates" and 0 <= r["difficulty"] <= 1 for r in rows)
    report = json.loads((tmp_path / "tasks" / "tiddlywiki.report.json").read_text(encoding="utf-8"))
    assert (
        report["summary"] == summary and (tmp_path / "tasks" / "tiddlywiki.difficulty.png").stat().st_size > 0
    )

    # The file is the environment's tasks: the oracle plays each demonstration and the
    # predicates judge the end state; a random walk reaches few of them.
    monkeypatch.setenv("TIDDLYWIKI_URL", tiddlywiki_url)
    environment = load_environment(TW, tasks_file=out)
    oracle = crawl_environment(environment, EnvCrawl(policy="oracle"), store=RawStore(tmp_path / "oracle"))
    assert oracle.error == 0 and oracle.success >= 0.95 * len(rows), oracle.summary()
    walk = crawl_environment(
        environment, EnvCrawl(policy="random_walk", max_steps=4, tasks=environment.as_tasks()),
        store=RawStore(tmp_path / "walk"),
    )  # fmt: skip
    assert walk.success < 0.5 * len(rows), walk.summary()

    # A re-run resumes the walks (more of them) and writes the task file whole.
    again = synthesize(tmp_path, tiddlywiki_url, minutes="0.4")
    assert again.returncode in (0, 4), again.stderr[-2000:]
    resumed = json.loads(again.stdout.strip().splitlines()[-1])
    assert resumed["walks"] > summary["walks"]
    ids = [json.loads(line)["task_id"] for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(ids) == len(set(ids)) == resumed["kept_tasks"]
