"""`trajforge serve`: the real CLI in a subprocess (uvicorn, Chromium per session), driven
over HTTP by RemoteEnv and by plain requests, against the same environments in process."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import httpx
import numpy as np
import pytest

import trajforge.envs as tf_envs
from crawlers.browser import descendant_pids, process_running
from tests.envs import serving
from tests.envs.test_gui_env import centre, element
from trajforge.envs.remote import RemoteEnv
from trajforge.store.raw import RawStore

pytestmark = pytest.mark.slow

REPO = serving.REPO
IDLE_S = 6.0


@pytest.fixture(scope="module")
def tiny_env_file(tiny_url, tmp_path_factory) -> Path:
    return serving.tiny_env_file(tmp_path_factory.mktemp("served"), tiny_url)


@pytest.fixture(scope="module")
def served(tiny_env_file, tiddlywiki_url, tmp_path_factory):
    """The server over the tiny app and TiddlyWiki: 2 sessions at most, reaped after IDLE_S."""
    data = tmp_path_factory.mktemp("rollouts")
    before = os.environ.get("TIDDLYWIKI_URL")
    os.environ["TIDDLYWIKI_URL"] = tiddlywiki_url  # the server process reads the file with it
    try:
        tiddlywiki = REPO / "examples/environments/tiddlywiki.yaml"
        with serving.serve(
            tiny_env_file, tiddlywiki, record_to=data, max_sessions=2, idle_timeout=IDLE_S
        ) as server:
            yield {"url": server.url, "data": data, "proc": server.proc}
    finally:
        if before is None:
            os.environ.pop("TIDDLYWIKI_URL", None)
        else:
            os.environ["TIDDLYWIKI_URL"] = before


def post(url: str, path: str, body: dict | None = None) -> httpx.Response:
    return httpx.post(url + path, json=body, timeout=120)


def test_envs_lists_both_files_with_tasks_and_screen(served):
    envs = {e["name"]: e for e in httpx.get(served["url"] + "/v1/envs").json()["envs"]}
    assert set(envs) == {"tiny", "tiddlywiki"}
    assert envs["tiny"]["screen"] == [600, 800] and envs["tiny"]["tasks"] == []
    assert "open-control-panel" in envs["tiddlywiki"]["tasks"]
    assert httpx.get(served["url"] + "/v1/health").json()["status"] == "ok"


def play(env, actions_for) -> list[tuple[float, bool, bool]]:
    """(reward, terminated, truncated) per step; actions_for(info) gives the actions."""
    _, info = env.reset(seed=3, options={"task_id": "open-control-panel"} if env_is_tw(env) else None)
    out = []
    for action in actions_for(info):
        _, reward, terminated, truncated, info = env.step(action)
        out.append((float(reward), bool(terminated), bool(truncated)))
        if terminated or truncated:
            break
    return out


def env_is_tw(env) -> bool:
    name = env.env_name if isinstance(env, RemoteEnv) else env.unwrapped.environment.name
    return name == "tiddlywiki"


def press_control_panel(info):
    x, y = centre(element(info, "button", "control panel"))
    return [{"type": "tap", "x": x, "y": y}]


def wait_out(info):
    return [{"type": "wait", "duration_ms": 10}] * 5


def press_add(info):
    x, y = centre(element(info, "button", "Add"))
    return [{"type": "wait", "duration_ms": 10}, {"type": "tap", "x": x, "y": y}]


@pytest.mark.parametrize(
    "name, actions",
    [("tiddlywiki", press_control_panel), ("tiny", press_add), ("tiny", wait_out)],
)
def test_remote_env_gives_the_rewards_make_gives(
    served, tiny_env_file, tiddlywiki_url, monkeypatch, name, actions
):
    monkeypatch.setenv("TIDDLYWIKI_URL", tiddlywiki_url)
    file = tiny_env_file if name == "tiny" else REPO / "examples/environments/tiddlywiki.yaml"
    local = tf_envs.make(file)
    remote = RemoteEnv(served["url"], name, policy_id="parity")
    try:
        here, there = play(local, actions), play(remote, actions)
        obs = remote.render()
        assert obs is not None and obs.dtype == np.uint8 and obs.shape[2] == 3
        assert remote.observation_space["screenshot"].shape == local.observation_space["screenshot"].shape
    finally:
        local.close()
        remote.close()
    assert here == there and here[-1][1 if actions is not wait_out else 2]
    if actions is not wait_out:
        assert here[-1][0] == 1.0


def test_bad_requests_name_the_field_and_leave_the_server_up(served):
    url = served["url"]
    cases = [
        ("/v1/sessions", {"env": "nope"}, 404, "env"),
        ("/v1/sessions", {"env": "tiny", "colour": "red"}, 422, "colour"),
        ("/v1/sessions", {"env": "tiddlywiki", "task_id": "no-such-task"}, 404, "task_id"),
        ("/v1/sessions/0123/step", {"action": {"type": "wait"}}, 404, "session_id"),
        ("/v1/sessions", {"env": "tiny", "profile": "gpt-9"}, 404, "profile"),
    ]
    for path, body, status, field in cases:
        answer = post(url, path, body)
        assert answer.status_code == status, (path, body, answer.text)
        assert answer.json()["error"]["field"] == field, answer.json()
    created = post(url, "/v1/sessions", {"env": "tiny", "image_format": "jpeg", "profile": "qwen3-vl"}).json()
    sid = created["session_id"]
    assert created["observation"]["screenshot"]["format"] == "jpeg"
    assert created["info"]["profile"]["name"] == "qwen3-vl"  # answers are read in the session's profile
    try:
        bad = post(url, f"/v1/sessions/{sid}/step", {"action": {"type": "tap"}})  # no point
        # A dict the env cannot read is the policy's format failure (gym semantics), not a 4xx.
        assert bad.status_code == 200 and bad.json()["info"]["format_error"]
        malformed = post(url, f"/v1/sessions/{sid}/step", {"action": 7})
        assert malformed.status_code == 422 and malformed.json()["error"]["field"].startswith("action")
        x, y = centre(element(created["info"], "button", "Add"))
        done = post(url, f"/v1/sessions/{sid}/step", {"action": {"type": "tap", "x": x, "y": y}}).json()
        assert done["terminated"] and done["reward"] == 1.0
        again = post(url, f"/v1/sessions/{sid}/step", {"action": {"type": "wait"}})
        assert again.status_code == 409 and again.json()["error"]["kind"] == "episode_ended"
    finally:
        httpx.delete(f"{url}/v1/sessions/{sid}")
    assert httpx.get(url + "/v1/health").json()["sessions_open"] == 0


def test_full_answers_429_and_idle_sessions_are_reaped_as_errors(served):
    url = served["url"]
    # A client that vanishes mid-episode (never deletes): its session must be reaped.
    first = RemoteEnv(url, "tiny", policy_id="vanished")
    first.reset()
    first.step({"type": "wait", "duration_ms": 10})
    second = post(url, "/v1/sessions", {"env": "tiny"}).json()["session_id"]
    # A browser launch can outlast the idle timeout on a loaded machine: touch the first
    # session again so that both are open when the third asks.
    first.step({"type": "wait", "duration_ms": 10})
    full = post(url, "/v1/sessions", {"env": "tiny"})
    assert full.status_code == 429 and int(full.headers["Retry-After"]) >= 1
    time.sleep(IDLE_S + 3)
    gone = post(url, f"/v1/sessions/{first.session_id}/step", {"action": {"type": "wait"}})
    assert gone.status_code == 410 and "reaped" in gone.json()["error"]["message"]
    assert httpx.get(url + "/v1/health").json()["sessions_open"] == 0
    assert httpx.delete(f"{url}/v1/sessions/{second}").status_code == 410
    metrics = httpx.get(url + "/metrics").text
    assert float(re.search(r"^trajforge_env_sessions_reaped_total (\S+)", metrics, re.M).group(1)) >= 2
    first.close()
    assert 'trajforge_env_errors_total{kind="full"}' in metrics
    trajs = RawStore(served["data"] / "raw").iter_trajectories("gym/tiny")
    vanished = [t for t in trajs if t.source_name.endswith(":agent:vanished")]
    assert [(t.outcome, t.num_steps) for t in vanished] == [("error", 2)]
    assert "reaped" in vanished[0].error and vanished[0].source == "rollout"


def test_a_browser_killed_mid_session_answers_503_and_the_next_reset_recovers(served):
    url, proc = served["url"], served["proc"]
    before = set(descendant_pids(proc.pid))
    sid = post(url, "/v1/sessions", {"env": "tiny", "policy_id": "crash"}).json()["session_id"]
    try:
        post(url, f"/v1/sessions/{sid}/step", {"action": {"type": "wait", "duration_ms": 10}})
        browsers = [p for p in set(descendant_pids(proc.pid)) - before if _is_browser(p)]
        assert browsers, "the session's Chromium was not found"
        for pid in browsers:
            os.kill(pid, signal.SIGKILL)
        failed = post(url, f"/v1/sessions/{sid}/step", {"action": {"type": "tap", "x": 5, "y": 5}})
        assert failed.status_code == 503 and failed.json()["error"]["kind"] == "env_failed"
        still = post(url, f"/v1/sessions/{sid}/step", {"action": {"type": "wait"}})
        assert still.status_code == 503 and "reset it" in still.json()["error"]["message"]
        recovered = post(url, f"/v1/sessions/{sid}/reset", {})
        assert recovered.status_code == 200, recovered.text
        step = post(url, f"/v1/sessions/{sid}/step", {"action": {"type": "wait", "duration_ms": 10}})
        assert step.status_code == 200
    finally:
        httpx.delete(f"{url}/v1/sessions/{sid}")
    trajs = RawStore(served["data"] / "raw").iter_trajectories("gym/tiny")
    crashed = [t for t in trajs if t.source_name.endswith(":agent:crash")]
    assert [t.outcome for t in crashed].count("error") == 1, [(t.outcome, t.error) for t in crashed]
    assert all(t.reward is None for t in crashed if t.outcome == "error")
    assert 'trajforge_env_errors_total{kind="env_failed"}' in httpx.get(url + "/metrics").text


def test_metrics_count_resets_and_steps(served):
    text = httpx.get(served["url"] + "/metrics").text
    resets = re.search(r'trajforge_env_reset_seconds_count\{env="tiny"\} (\S+)', text)
    steps = re.search(r'trajforge_env_step_seconds_count\{env="tiny"\} (\S+)', text)
    assert resets and float(resets.group(1)) >= 1 and steps and float(steps.group(1)) >= 1
    assert "trajforge_env_sessions_open 0.0" in text


def test_stopping_the_server_leaves_no_browser(served):
    # Runs last in this module: one session open, then the server is stopped.
    proc = served["proc"]
    post(served["url"], "/v1/sessions", {"env": "tiny"})
    family = [p for p in descendant_pids(proc.pid) if _is_browser(p)]
    assert family
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=60)
    deadline = time.monotonic() + 10
    while any(process_running(p) for p in family) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in family if process_running(p)]


def _is_browser(pid: int) -> bool:
    try:
        return "chrom" in Path(f"/proc/{pid}/comm").read_text()
    except OSError:
        return False
