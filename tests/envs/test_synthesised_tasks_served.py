"""A synthesised task file, served and sampled: `trajforge tasks synthesize` on TiddlyWiki (a
third-party app from npm, tests/thirdparty/apps.py) writes goal tasks; `trajforge serve
ENV --tasks FILE` lists them in GET /v1/envs and its `predicates` verifier rewards a
remote episode that reaches one; rejection sampling (training/rollouts.py) plays every
one of them and records each rollout with the verdict of its predicates."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys

import httpx
import pytest

import trajforge.envs as tf_envs
from tests.envs import serving
from tests.envs.test_gui_env import centre, element
from tests.synthesis.test_agent import ScriptedAgent
from tests.thirdparty.apps import ENVIRONMENTS, ROOT
from training.rollouts import Rollouts, rejection_sample
from trajforge.envs.remote import RemoteEnv
from trajforge.store.raw import RawStore

pytestmark = pytest.mark.slow
ENV_FILE = ENVIRONMENTS / "tiddlywiki.yaml"


@pytest.fixture(scope="module")
def synthesised(tiddlywiki_url, tmp_path_factory):
    """(the task file, its rows, the CLI's summary) of a one-minute synthesis."""
    folder = tmp_path_factory.mktemp("synthesised")
    out = folder / "tiddlywiki-goals.jsonl"
    cli = [
        sys.executable, "-m", "trajforge.cli", "tasks", "synthesize", str(ENV_FILE), "--minutes", "1",
        "--random-tries", "5", "--data", str(folder / "data"), "--out", str(out),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TIDDLYWIKI_URL": tiddlywiki_url}
    run = subprocess.run(cli, capture_output=True, text=True, timeout=400, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    summary = json.loads(run.stdout.strip().splitlines()[-1])
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    return out, rows, summary


def _taps(row: dict) -> list[tuple[str, str]] | None:
    """A demonstration of taps only, as (role, name); None when it does more."""
    script = row["params"].get("script") or []
    if not script or any(set(s) != {"tap"} or set(s["tap"]) != {"role", "name"} for s in script):
        return None
    return [(s["tap"]["role"], s["tap"]["name"]) for s in script]


def test_synthesised_tasks_are_served_and_rejection_sampled(
    synthesised, tiddlywiki_url, tmp_path, monkeypatch
):
    out, rows, summary = synthesised
    assert summary["kept_tasks"] == len(rows) >= 2 and summary["candidates"] >= summary["kept_goals"]
    assert {r["language"] for r in rows} == {"en", "zh"} and {r["verifier"]["kind"] for r in rows} == {
        "predicates"
    }
    ids = [r["task_id"] for r in rows]
    monkeypatch.setenv("TIDDLYWIKI_URL", tiddlywiki_url)

    with serving.serve(ENV_FILE, record_to=tmp_path / "served", extra=("--tasks", str(out))) as server:
        envs = {e["name"]: e for e in httpx.get(server.url + "/v1/envs").json()["envs"]}
        assert envs["tiddlywiki"]["tasks"] == ids
        # A goal of taps, played remotely by its demonstration: the predicates reward its end.
        row = next(r for r in rows if _taps(r))
        remote = RemoteEnv(server.url, "tiddlywiki")
        try:
            obs, info = remote.reset(seed=3, options={"task_id": row["task_id"]})
            assert obs["instruction"] == row["instruction"]
            rewards = []
            for role, name in _taps(row):
                x, y = centre(element(info, role, name))
                _, reward, terminated, _, info = remote.step({"type": "tap", "x": x, "y": y})
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
        envs=functools.partial(tf_envs.make, str(ENV_FILE), tasks=str(out)),
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
