"""`trajforge serve` on a desktop environment file: the real CLI in a subprocess, each
session on its own Xvfb, AT-SPI bus and mousepad, played over HTTP by RemoteEnv with the
rewards `trajforge.envs.make` gives for the same actions."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import httpx
import pytest

import trajforge.envs as tf_envs
from tests.desktop.procs import assert_nothing_left, session_pids
from tests.desktop.test_desktop_env import EXAMPLE
from tests.desktop.test_desktop_gym import comm, textbox_centre
from tests.envs import serving
from trajforge.envs.remote import RemoteEnv
from trajforge.store.raw import RawStore

pytestmark = pytest.mark.skipif(
    not all(Path(f"/usr/bin/{b}").exists() for b in ("Xvfb", "mousepad")),
    reason="needs Xvfb and mousepad (scripts/setup_desktop.sh)",
)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    data = tmp_path_factory.mktemp("desktop-rollouts")
    with serving.serve(EXAMPLE, record_to=data, max_sessions=2, idle_timeout=120) as server:
        # The sessions' processes carry the server's pid in their token.
        yield {"url": server.url, "data": data, "proc": server.proc, "owners": {server.proc.pid}}


def post(url: str, path: str, body: dict | None = None) -> httpx.Response:
    return httpx.post(url + path, json=body, timeout=120)


def play(env, task_id: str, text: str) -> list[tuple[float, bool, bool]]:
    """Type the task's text, then save it with a text answer; (reward, terminated, truncated)."""
    _, info = env.reset(seed=0, options={"task_id": task_id})
    x, y = textbox_centre(info)
    out = []
    for action in (
        {"type": "type", "x": x, "y": y, "text": text},
        '<answer>{"action_type": "KeyboardPress", "value": "ctrl+s"}</answer>',
    ):
        _, reward, terminated, truncated, info = env.step(action)
        out.append((float(reward), bool(terminated), bool(truncated)))
    return out


def test_the_server_lists_the_desktop_file(served):
    (env,) = httpx.get(served["url"] + "/v1/envs").json()["envs"]
    assert (env["name"], env["platform"], env["screen"]) == ("mousepad", "desktop", [768, 1024])
    assert env["tasks"] == ["note-en", "note-zh"]


@pytest.mark.parametrize("task_id, text", [("note-en", "Buy milk and eggs"), ("note-zh", "买牛奶和鸡蛋")])
def test_remote_env_gives_the_rewards_make_gives(served, task_id, text):
    local = tf_envs.make(EXAMPLE)
    remote = RemoteEnv(served["url"], "mousepad", policy_id="parity")
    try:
        here, there = play(local, task_id, text), play(remote, task_id, text)
        shot = remote.render()
        assert shot is not None and shot.shape == (768, 1024, 3)
        assert remote.observation_space["screenshot"].shape == local.observation_space["screenshot"].shape
    finally:
        local.close()
        remote.close()
    assert here == there == [(0.0, False, False), (1.0, True, False)]
    trajs = RawStore(served["data"] / "raw").iter_trajectories("gym/mousepad")
    mine = [t for t in trajs if t.source_name.endswith(":agent:parity") and t.task.task_id == task_id]
    assert [(t.outcome, t.verified_by, t.platform) for t in mine] == [("success", "command", "desktop")]


def test_an_app_killed_mid_session_answers_503_and_the_next_reset_recovers(served):
    url = served["url"]
    before = session_pids(served["owners"])
    created = post(url, "/v1/sessions", {"env": "mousepad", "task_id": "note-en", "policy_id": "crash"})
    assert created.status_code == 200, created.text
    sid = created.json()["session_id"]
    try:
        apps = [p for p in session_pids(served["owners"]) - before if comm(p) == "mousepad"]
        assert len(apps) == 1, "the session's mousepad was not found"
        os.kill(apps[0], signal.SIGKILL)
        failed = post(url, f"/v1/sessions/{sid}/step", {"action": {"type": "key", "text": "ctrl+s"}})
        assert failed.status_code == 503 and failed.json()["error"]["kind"] == "env_failed"
        assert "the app exited mid-episode" in failed.json()["error"]["message"]
        recovered = post(url, f"/v1/sessions/{sid}/reset", {"task_id": "note-en"})
        assert recovered.status_code == 200, recovered.text
        x, y = textbox_centre(recovered.json()["info"])
        step = post(
            url,
            f"/v1/sessions/{sid}/step",
            {"action": {"type": "type", "x": x, "y": y, "text": "Buy milk and eggs"}},
        )
        assert step.status_code == 200 and step.json()["info"]["error"] is None
    finally:
        httpx.delete(f"{url}/v1/sessions/{sid}")
    crashed = [
        t
        for t in RawStore(served["data"] / "raw").iter_trajectories("gym/mousepad")
        if t.source_name.endswith(":agent:crash")
    ]
    assert sorted(t.outcome for t in crashed) == ["error", "failure"], [(t.outcome, t.error) for t in crashed]
    lost = next(t for t in crashed if t.outcome == "error")
    assert "the app exited mid-episode" in lost.error and lost.reward is None and lost.num_steps == 0


def test_stopping_the_server_leaves_no_x_server_bus_or_app(served):
    # Runs last in this module: one session open, then the server is stopped.
    proc = served["proc"]
    assert post(served["url"], "/v1/sessions", {"env": "mousepad"}).status_code == 200
    assert session_pids(served["owners"]), "the session's processes were not found"
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=60)
    assert_nothing_left(set(), served["owners"])
