"""Fixtures for the protocol adapters' tests (trajforge/envs/protocols/): `trajforge serve`
over the tiny app once per test module, the same app's environment file for `make()`, and
the scripted episodes both are played with."""

from __future__ import annotations

from pathlib import Path

import pytest

import trajforge.envs as tf_envs
from tests.envs import serving

REPO = serving.REPO
RL_PYTHON = REPO / ".venv-rl" / "bin" / "python"  # scripts/setup_rl.sh: the frameworks' own classes


TASK = "press-add"


@pytest.fixture(scope="module")
def tiny_file(tiny_url, tmp_path_factory) -> Path:
    """The tiny app with one task (`press-add`: a success when Add was pressed once)."""
    path = serving.tiny_env_file(tmp_path_factory.mktemp("protocol-env"), tiny_url, max_steps=4)
    verdict = (
        "(() => { const n = +(document.body.dataset.n || 0); "
        "return {done: n >= 1, success: n === 1, reason: 'pressed ' + n}; })()"
    )
    task = f"""tasks:
  - task_id: {TASK}
    instruction: Press Add once
    verifier: {{kind: js, expression: "{verdict}"}}
"""
    path.write_text(path.read_text(encoding="utf-8") + task, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def served_tiny(tiny_file, tmp_path_factory):
    """`trajforge serve` over the tiny app (3 sessions), recording into `data`."""
    data = tmp_path_factory.mktemp("protocol-rollouts")
    with serving.serve(tiny_file, record_to=data, max_sessions=3) as server:
        yield {"url": server.url, "proc": server.proc, "data": data}


@pytest.fixture(scope="module")
def scripted(tiny_file) -> dict:
    """Two scripted episodes and the rewards `make()` gives them in process: `add` presses
    Add once (the verifier's success), `idle` waits, then says done (a failure)."""
    env = tf_envs.make(tiny_file)
    try:
        _, info = env.reset(seed=0, options={"task_id": TASK})
        episodes = {
            "add": [_tap(info, "Add")],
            "idle": [{"type": "wait", "duration_ms": 10}, {"type": "done"}],
        }
        rewards = {name: play_in_process(env, actions) for name, actions in episodes.items()}
    finally:
        env.close()
    return {"episodes": episodes, "rewards": rewards}


def play_in_process(env, actions: list) -> list[float]:
    env.reset(seed=0, options={"task_id": TASK})
    rewards = []
    for action in actions:
        _, reward, terminated, truncated, _ = env.step(action)
        rewards.append(float(reward))
        if terminated or truncated:
            break
    return rewards


def _tap(info: dict, name: str) -> dict:
    for e in info["elements"]:
        if e["role"] == "button" and e["name"] == name and e["bbox"]:
            x0, y0, x1, y1 = e["bbox"]
            return {"type": "tap", "x": (x0 + x1) / 2, "y": (y0 + y1) / 2}
    raise AssertionError(f"no button {name!r} among {[(e['role'], e['name']) for e in info['elements']]}")
