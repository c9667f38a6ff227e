"""NeMo Gym's resources-server contract on `trajforge serve`: NeMo Gym's own `SimpleAgent`
(nemo-gym 0.4.0 in .venv-nemo, scripts/setup_rl.sh) plays scripted episodes through its
`/run`; the other tests make the agent's calls by hand (the row to /seed_session, each
function call's arguments to /{tool}, then /verify, the cookies forwarded) to reach the
failure paths."""

from __future__ import annotations

import json
import os
import signal
import subprocess

import httpx
import pytest

from crawlers.browser import descendant_pids
from tests.envs.protocols.conftest import REPO, TASK
from tests.envs.test_server import _is_browser
from trajforge.store.raw import RawStore

pytestmark = pytest.mark.slow

NEMO_PYTHON = REPO / ".venv-nemo" / "bin" / "python"
AGENT = REPO / "tests/envs/protocols/nemo_gym_agent.py"
ROW = {"responses_create_params": {"input": [{"role": "user", "content": "Press Add once"}]}}


def rollout(url: str, row: dict, actions: list) -> tuple[dict, list[httpx.Response]]:
    """A NeMo Gym rollout: seed, one tool call per action, verify. (verdict, tool answers)."""
    seeded = post(url, "/seed_session", row)
    assert seeded.status_code == 200, seeded.text
    cookie = cookie_of(seeded)
    answers = [post(url, "/step", {"action": action}, cookie) for action in actions]
    response = {"id": "resp-1", "output": [{"type": "message", "role": "assistant", "content": "done"}]}
    verified = post(url, "/verify", {**row, "response": response}, cookie)
    assert verified.status_code == 200, verified.text
    return verified.json(), answers


def post(url: str, path: str, body: dict, cookie: str | None = None) -> httpx.Response:
    """A POST with the cookie forwarded by hand, as NeMo Gym's agents forward theirs."""
    return httpx.post(url + path, json=body, headers={"Cookie": cookie} if cookie else None, timeout=120)


def cookie_of(answer: httpx.Response) -> str:
    return "; ".join(f"{k}={v}" for k, v in answer.cookies.items())


def test_verify_rewards_equal_make_for_the_same_actions(served_tiny, scripted):
    url = served_tiny["url"]
    row = {**ROW, "env": "tiny", "task_id": TASK, "seed": 0, "policy_id": "nemo-test"}
    for name, actions in scripted["episodes"].items():
        verdict, answers = rollout(url, row, actions)
        assert [a.json()["reward"] for a in answers] == scripted["rewards"][name], name
        assert verdict["reward"] == sum(scripted["rewards"][name]) and verdict["mask_sample"] is False
        assert (
            verdict["responses_create_params"] == ROW["responses_create_params"]
        )  # the request's fields kept
        assert verdict["trajectory_id"] and verdict["env_steps"] == len(actions)
    trajs = list(RawStore(served_tiny["data"] / "raw").iter_trajectories("gym/tiny"))
    assert sorted(t.outcome for t in trajs if t.source_name.endswith(":agent:nemo-test")) == [
        "failure",
        "success",
    ]


def test_nemo_gyms_own_agent_gets_make_rewards(served_tiny, scripted, tmp_path):
    if not NEMO_PYTHON.exists():
        pytest.fail(f"{NEMO_PYTHON} is missing: run scripts/setup_rl.sh")
    spec = {
        "resources_url": served_tiny["url"],
        "row": {"env": "tiny", "task_id": TASK, "seed": 0, "policy_id": "nemo-agent"},
        "episodes": scripted["episodes"],
    }
    run = subprocess.run(
        [str(NEMO_PYTHON), str(AGENT)],
        input=json.dumps(spec),
        capture_output=True,
        text=True,
        timeout=180,
        cwd=tmp_path,  # hydra, which nemo_gym imports, writes outputs/ where it runs
    )
    assert run.returncode == 0, run.stderr[-3000:]
    verified = json.loads(run.stdout)
    for name, rewards in scripted["rewards"].items():
        answer = verified[name]
        assert "reward" in answer, (answer, run.stderr[-4000:])
        assert answer["reward"] == sum(rewards) and answer["mask_sample"] is False, (name, answer)
        assert answer["env_steps"] == len(scripted["episodes"][name]) and answer["task_id"] == TASK
        calls = [o for o in answer["response"]["output"] if o["type"] == "function_call"]
        assert [json.loads(c["arguments"])["action"] for c in calls] == scripted["episodes"][name]
    assert [verified[n]["outcome"] for n in ("add", "idle")] == ["success", "failure"]


def test_verify_judges_an_episode_the_policy_left_open(served_tiny, scripted):
    # One wait, then the model stops answering with calls: /verify ends it with `done`.
    row = {**ROW, "env": "tiny", "task_id": TASK, "seed": 0}
    verdict, _ = rollout(served_tiny["url"], row, [{"type": "wait"}])
    assert verdict["reward"] == 0.0 and verdict["outcome"] == "failure" and verdict["env_steps"] == 2
    assert verdict["mask_sample"] is False


def test_an_environment_failure_verifies_as_mask_sample(served_tiny):
    url, proc = served_tiny["url"], served_tiny["proc"]
    before = set(descendant_pids(proc.pid))
    cookie = cookie_of(post(url, "/seed_session", {**ROW, "env": "tiny", "policy_id": "nemo-crash"}))
    browsers = [p for p in set(descendant_pids(proc.pid)) - before if _is_browser(p)]
    assert browsers, "the session's Chromium was not found"
    for pid in browsers:
        os.kill(pid, signal.SIGKILL)
    failed = post(url, "/step", {"action": {"type": "tap", "x": 5, "y": 5}}, cookie)
    assert failed.status_code == 503 and failed.json()["error"]["kind"] == "env_failed"
    verdict = post(url, "/verify", {**ROW, "response": {}}, cookie).json()
    assert verdict["mask_sample"] is True and verdict["reward"] == 0.0 and verdict["outcome"] == "error"
    assert verdict["failure"] == failed.json()["error"]["message"]
    crashed = [
        t
        for t in RawStore(served_tiny["data"] / "raw").iter_trajectories("gym/tiny")
        if t.source_name.endswith(":agent:nemo-crash")
    ]
    assert [(t.outcome, t.reward) for t in crashed] == [("error", None)]


def test_calls_without_a_seeded_session_say_so(served_tiny):
    url = served_tiny["url"]
    bare = post(url, "/step", {"action": {"type": "wait"}})
    assert bare.status_code == 404 and bare.json()["error"]["field"] == "trajforge_session"
    cookie = cookie_of(post(url, "/seed_session", {**ROW, "env": "tiny"}))
    assert post(url, "/close_session", {}, cookie).json()["closed"]
    gone = post(url, "/verify", ROW, cookie)
    assert gone.status_code == 410 and gone.json()["error"]["kind"] == "session_gone"
    unknown = post(url, "/seed_session", {**ROW, "env": "nosuch"})
    assert unknown.status_code == 404 and unknown.json()["error"]["field"] == "env"
