"""`trajforge tasks synthesize` on TiddlyWiki (npm), an app no task of ours was written for
in this test: frontier walks, goals from what they changed, validation, a task file in
English and Chinese that the oracle crawl verifies by its predicates and a random walk
mostly does not; `trajforge serve ENV --tasks FILE` lists the tasks and its `predicates`
verifier rewards a remote episode that reaches one; rejection sampling
(training/rollouts.py) plays every one and records each rollout with the verdict of its
predicates; a re-run resumes the walks and writes the file whole, with no duplicate.
One synthesis (module fixture) feeds every test."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys

import httpx
import pytest

import trajforge.envs as tf_envs
from crawlers.crawl_driver import EnvCrawl
from crawlers.env_crawl import crawl_environment
from schemas.environment import load_environment
from tests.envs import serving
from tests.envs.test_gui_env import element
from tests.synthesis.test_agent import ScriptedAgent
from training.rollouts import Rollouts, rejection_sample
from trajforge.envs.remote import RemoteEnv
from trajforge.store.raw import RawStore

from .apps import ENVIRONMENTS, ROOT

pytestmark = pytest.mark.slow
TW = ENVIRONMENTS / "tiddlywiki.yaml"


def synthesize(data, tiddlywiki_url, minutes="1.2", out=None):
    cli = [
        sys.executable, "-m", "trajforge.cli", "tasks", "synthesize", str(TW), "--minutes", minutes,
        "--data", str(data), "--random-tries", "4", *(["--out", str(out)] if out else []),
    ]  # fmt: skip
    env = {**os.environ, "TIDDLYWIKI_URL": tiddlywiki_url, "PYTHONPATH": str(ROOT)}
    return subprocess.run(cli, capture_output=True, text=True, timeout=600, env=env, cwd=ROOT)


@pytest.fixture(scope="module")
def synthesised(tiddlywiki_url, tmp_path_factory):
    """(the data folder, the CLI run, its summary, the task file, its rows)."""
    data = tmp_path_factory.mktemp("synthesised")
    run = synthesize(data, tiddlywiki_url)
    assert run.returncode == 0, run.stderr[-3000:]
    summary = json.loads(run.stdout.strip().splitlines()[-1])
    out = data / "tasks" / "tiddlywiki.jsonl"
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    return data, run, summary, out, rows


def test_synthesised_tasks_are_verified_by_the_oracle_and_rarely_by_a_random_walk(
    synthesised, tiddlywiki_url, monkeypatch, tmp_path
):
    data, run, summary, out, rows = synthesised
    assert (
        summary["walks"] >= 2 and summary["candidates"] >= summary["validated"] >= summary["kept_goals"] >= 1
    )
    assert summary["kept_tasks"] == 2 * summary["kept_goals"] and summary["languages"] == ["en", "zh"]
    assert sum(summary["rejected"].values()) == summary["validated"] - summary["kept_goals"]
    assert len(rows) == summary["kept_tasks"] and len({r["task_id"] for r in rows}) == len(rows)
    assert {r["language"] for r in rows} == {"en", "zh"}
    assert all(r["verifier"]["kind"] == "predicates" and 0 <= r["difficulty"] <= 1 for r in rows)
    report = json.loads((data / "tasks" / "tiddlywiki.report.json").read_text(encoding="utf-8"))
    assert report["summary"] == summary and (data / "tasks" / "tiddlywiki.difficulty.png").stat().st_size > 0
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


def _taps(row: dict) -> list[tuple[str, str]] | None:
    """A demonstration of taps only, as (role, name); None when it does more."""
    script = row["params"].get("script") or []
    if not script or any(set(s) != {"tap"} or set(s["tap"]) != {"role", "name"} for s in script):
        return None
    return [(s["tap"]["role"], s["tap"]["name"]) for s in script]


def _remote_script(row: dict) -> list[dict] | None:
    """A script of named taps, typing and keys (what _remote_actions plays); None else."""
    script = row["params"].get("script") or []
    ok = all(
        ("tap" in s and "name" in s["tap"]) or "key" in s or ("type" in s and "into" in s) for s in script
    )
    return script if script and ok else None


def _remote_actions(step: dict, info: dict) -> list[dict]:
    """A script step as the served env's actions on the screen `info` describes."""
    if "key" in step:
        return [{"type": "key", "text": step["key"]}]
    ref = step.get("tap") or step["into"]
    box = element(info, ref["role"], ref["name"])["bbox"]
    fx, fy = step.get("at", [0.5, 0.5])
    x, y = box[0] + fx * (box[2] - box[0]), box[1] + fy * (box[3] - box[1])
    if "tap" in step:
        return [{"type": "tap", "x": x, "y": y}]
    return [{"type": "tap", "x": x, "y": y}, {"type": "type", "text": step["type"]}]


def test_synthesised_tasks_are_served_and_rejection_sampled(
    synthesised, tiddlywiki_url, tmp_path, monkeypatch
):
    _, _, summary, out, rows = synthesised
    assert summary["kept_tasks"] == len(rows) >= 2 and summary["candidates"] >= summary["kept_goals"]
    assert {r["language"] for r in rows} == {"en", "zh"} and {r["verifier"]["kind"] for r in rows} == {
        "predicates"
    }
    ids = [r["task_id"] for r in rows]
    monkeypatch.setenv("TIDDLYWIKI_URL", tiddlywiki_url)

    with serving.serve(TW, record_to=tmp_path / "served", extra=("--tasks", str(out))) as server:
        envs = {e["name"]: e for e in httpx.get(server.url + "/v1/envs").json()["envs"]}
        assert envs["tiddlywiki"]["tasks"] == ids
        # A goal played remotely by its demonstration (taps, typing, keys on named
        # elements): the predicates reward its end.
        row = next(r for r in rows if _remote_script(r))
        remote = RemoteEnv(server.url, "tiddlywiki")
        try:
            obs, info = remote.reset(seed=3, options={"task_id": row["task_id"]})
            assert obs["instruction"] == row["instruction"]
            rewards = []
            for step in _remote_script(row):
                for action in _remote_actions(step, info):
                    _, reward, terminated, _, info = remote.step(action)
                rewards.append(reward)
            assert rewards[-1] == 1.0 and terminated, (row, rewards)
        finally:
            remote.close()

    # Rejection sampling on every synthesised task: first a rollout that stops at once
    # (a non-trivial goal fails it), then one that taps the task's demonstration.
    scripts = []
    for r in rows:
        scripts += [["Terminate"], [*(_taps(r) or []), "Terminate"]]
    backend = ScriptedAgent(*scripts, model_id="scripted")
    store = RawStore(tmp_path / "raw")
    result = rejection_sample(
        ids,
        backend,
        Rollouts(k=2, seed=0, max_steps=6),
        envs=functools.partial(tf_envs.make, str(TW), tasks=str(out)),
        store=store,
    )
    assert set(result.rates) == set(ids) and result.written == 2 * len(ids)
    stored: dict[str, list] = {}
    for collection in (result.collection, result.failed_collection):
        for t in store.iter_trajectories(collection):
            stored.setdefault(t.task.task_id, []).append(t)
    assert sorted(stored) == sorted(ids)
    for r in rows:
        mine = stored[r["task_id"]]
        assert len(mine) == 2 and {t.verified_by for t in mine} == {"predicates"}, mine
        assert [t.outcome for t in mine].count("failure") >= 1  # stopping at once never reaches it
        if _taps(r):  # its demonstration's taps reach it
            assert result.rates[r["task_id"]] == (1, 2), (r["task_id"], [t.outcome for t in mine])


def test_a_rerun_resumes_the_walks_and_writes_the_file_whole(synthesised, tiddlywiki_url):
    data, _, summary, _, _ = synthesised
    again_out = data / "again.jsonl"
    again = synthesize(data, tiddlywiki_url, minutes="0.4", out=again_out)
    assert again.returncode in (0, 4), again.stderr[-2000:]
    resumed = json.loads(again.stdout.strip().splitlines()[-1])
    assert resumed["walks"] > summary["walks"]
    ids = [json.loads(line)["task_id"] for line in again_out.read_text(encoding="utf-8").splitlines()]
    assert len(ids) == len(set(ids)) == resumed["kept_tasks"]
