"""training.openai_loop.play_openai against a real local OpenAI-compatible HTTP server
(tests/vlm/helpers.FakeOpenAIServer: POST /v1/chat/completions on a socket, the `openai`
client on the other side), on the tiny app through `make()` and through `trajforge serve`."""

from __future__ import annotations

import io
import json
import re
import threading

import pytest
from PIL import Image

import trajforge.envs as tf_envs
from schemas.set_prompt import system_prompt
from tests.envs.serving import serve, tiny_env_file
from tests.envs.test_gui_env import centre, element
from tests.vlm.helpers import FakeOpenAIServer, decode_data_url, image_urls, tiny_backend, user_texts
from training.openai_loop import OpenAIPolicy, play_openai
from trajforge.envs.remote import RemoteEnv
from trajforge.store.raw import RawStore
from trajforge.vlm.backends import VLMRequest

pytestmark = pytest.mark.slow

FRAME = (812, 588)  # qwen2.5-vl's frame of the tiny app's 800x600 screen


def libra(action_type: str, point=(-100, -100), value: str = "None") -> str:
    answer = {
        "action_description": action_type,
        "action_type": action_type,
        "value": value,
        "point_2d": list(point),
    }
    return f"<answer>{json.dumps(answer)}</answer>"


def add_button_in_frame(env_file) -> tuple[int, int]:
    """Where the Add button is, in pixels of the profile's frame (what the answer writes)."""
    probe = tf_envs.make(env_file)
    try:
        _, info = probe.reset(seed=0)
        x, y = centre(element(info, "button", "Add"))
        (w, h), (fw, fh) = probe.unwrapped.screen_size, info["profile"]["frame"]
        return round(x * fw / w), round(y * fh / h)
    finally:
        probe.close()


class ScriptedPolicy:
    """Waits first, then presses Add. The first request is held until a second one is in
    flight (or 20 s passed): the loop must keep sessions in flight at once."""

    def __init__(self, add: tuple[int, int]):
        self.add = add
        self.lock = threading.Lock()
        self.in_flight = self.max_in_flight = 0
        self.two = threading.Event()

    def __call__(self, body: dict) -> list[str]:
        with self.lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            if self.in_flight >= 2:
                self.two.set()
        try:
            self.two.wait(20)
            if "Previous actions: none" in user_texts(body):
                return [libra("Wait", value="0.1")]
            return [libra("Click", self.add)]
        finally:
            with self.lock:
                self.in_flight -= 1


def test_sessions_in_flight_play_and_record_through_make(tiny_url, tmp_path):
    env_file = tiny_env_file(tmp_path, tiny_url, max_steps=4)
    data = tmp_path / "data"
    script = ScriptedPolicy(add_button_in_frame(env_file))
    with FakeOpenAIServer(script) as server:
        policy = OpenAIPolicy(server.base_url, "ckpt-7", max_tokens=64)
        results = play_openai(
            lambda: tf_envs.make(env_file, record_to=data, policy_id="openai-test"),
            [{"seed": s} for s in range(3)],
            policy,
            concurrency=2,
        )
    assert script.max_in_flight == 2
    assert [r.index for r in results] == [0, 1, 2] and [r.seed for r in results] == [0, 1, 2]
    for r in results:
        assert (r.reward, r.outcome, r.terminated, r.error) == (1.0, "success", True, None), r
        assert r.steps == 2 and r.format_failures == 0 and r.recorded and r.environment == "tiny"
    recorded = {t.trajectory_id: t for t in RawStore(data / "raw").iter_trajectories("gym/tiny")}
    assert set(recorded) == {r.trajectory_id for r in results}
    for t in recorded.values():
        assert (t.outcome, t.reward, t.num_steps, t.source) == ("success", 1.0, 2, "rollout")
        assert t.source_name.endswith(":agent:openai-test")
    # Each step is one chat request: the set's prompt, the screenshot as a PNG data URI at
    # the frame, the actions so far worded as the set words them.
    bodies = [r["body"] for r in server.requests]
    assert len(bodies) == 6 and {b["model"] for b in bodies} == {"ckpt-7"}
    for body in bodies:
        assert body["messages"][0] == {"role": "system", "content": system_prompt("direct", "en", "pixels")}
        (url,) = image_urls(body)
        head, png = decode_data_url(url)
        assert head == "data:image/png;base64" and Image.open(io.BytesIO(png)).size == FRAME
        assert body["max_tokens"] == 64 and body["temperature"] == 0.0
        text = user_texts(body)
        assert text.startswith("Task: Press Add once\nScreenshot: 812x588 pixels\n")
    later = [user_texts(b) for b in bodies if "Previous actions: none" not in user_texts(b)]
    assert len(later) == 3 and all(
        t.endswith("Previous actions:\nStep 1: wait for the screen to update") for t in later
    )


_ONE_AT_A_TIME = threading.Lock()


def tiny_model_answers(body: dict) -> list[str]:
    """The tiny Qwen2-VL as the policy server (one request at a time): the request's
    messages, images decoded."""
    messages = []
    for m in body["messages"]:
        content = m["content"]
        if isinstance(content, list):
            content = [
                {"type": "image", "image": decode_data_url(p["image_url"]["url"])[1]}
                if p["type"] == "image_url"
                else p
                for p in content
            ]
        messages.append({"role": m["role"], "content": content})
    with _ONE_AT_A_TIME:
        return [tiny_backend().generate([VLMRequest(messages)], body["max_tokens"])[0]]


def test_the_tiny_model_plays_over_the_server_and_the_reward_is_the_recorded_one(tiny_url, tmp_path):
    env_file = tiny_env_file(tmp_path, tiny_url, max_steps=3)
    data = tmp_path / "data"
    with serve(env_file, record_to=data) as served, FakeOpenAIServer(tiny_model_answers) as server:
        # A per-rollout key, as AReaL's proxy hands one to each rollout (docs/rl-environments.md).
        policy = OpenAIPolicy(server.base_url, "tiny", max_tokens=16, api_key="rollout-key-7")
        results = play_openai(
            lambda: RemoteEnv(served.url, "tiny", policy_id="tiny-remote"), 2, policy, concurrency=2
        )
    assert len(server.requests) == 6
    assert {r["headers"]["authorization"] for r in server.requests} == {"Bearer rollout-key-7"}
    assert "rollout-key-7" not in repr(policy)
    for r in results:
        # Noise never parses: every step is a format failure, the budget ends the episode.
        assert r.error is None and r.truncated and r.steps == 3 == r.format_failures == len(r.answers)
    recorded = {t.trajectory_id: t for t in RawStore(data / "raw").iter_trajectories("gym/tiny")}
    assert {r.trajectory_id for r in results} <= set(recorded)
    for r in results:
        t = recorded[r.trajectory_id]
        assert r.reward == t.reward == 0.0 and r.outcome == t.outcome == "failure"
        assert t.source_name.endswith(":agent:tiny-remote")


def test_a_failing_policy_server_is_an_error_never_a_reward(tiny_url, tmp_path):
    env_file = tiny_env_file(tmp_path, tiny_url)
    data = tmp_path / "data"
    with FakeOpenAIServer(lambda body: ["unused"], status=500) as server:
        policy = OpenAIPolicy(server.base_url, "down", max_retries=0)
        (result,) = play_openai(lambda: tf_envs.make(env_file, record_to=data, policy_id="down"), 1, policy)
    assert result.reward is None and result.outcome is None
    assert re.match(r"policy: InternalServerError", result.error), result.error
    (traj,) = RawStore(data / "raw").iter_trajectories("gym/tiny")
    assert traj.outcome == "error" and traj.reward is None and "InternalServerError" in traj.error
