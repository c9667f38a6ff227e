"""The Gym API, live: real Chromium, the real sandbox and TiddlyWiki, the environments' own
verifiers; nothing mocked.

Timings seen on a 2-core machine are printed with -s (reset and step, in ms).
"""

from __future__ import annotations

import time
import warnings

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import trajforge.envs as tf_envs
from crawlers.browser import descendant_pids, process_running
from sandbox.environment import oracle_policy
from schemas.model_profiles import model_profile
from trajforge.store.raw import RawStore

pytestmark = pytest.mark.slow


def element(info: dict, role: str, name: str) -> dict:
    """The first element of `role` whose name contains `name` (case aside), with a box."""
    for e in info["elements"]:
        if e["role"] == role and name.lower() in e["name"].lower() and e["bbox"]:
            return e
    raise AssertionError(
        f"no {role} {name!r} among {[(e['role'], e['name']) for e in info['elements']][:60]}"
    )


def centre(e: dict) -> tuple[float, float]:
    x0, y0, x1, y1 = e["bbox"]
    return (x0 + x1) / 2, (y0 + y1) / 2


def _checked(env) -> list[str]:
    """check_env's warnings on make()'s env, but the one that says it is wrapped."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        check_env(env, skip_render_check=env.spec.id != tf_envs.SANDBOX_ID)
    return [str(w.message) for w in seen if "different from the unwrapped version" not in str(w.message)]


def test_check_env_passes_on_the_sandbox_environment(sandbox):
    env = tf_envs.make_sandbox(sandbox.url, apps=["notes"])
    try:
        assert env.spec.id == tf_envs.SANDBOX_ID and env.spec.nondeterministic
        # Render checks included: the spec re-makes the env with render_mode="rgb_array".
        assert _checked(env) == []
        obs, info = env.reset(seed=7)
        again, info_again = env.reset(seed=7)
        # A seed fixes the task, the device and the episode's seed; not the pixels.
        assert info["task"] == info_again["task"] and info["device"] == info_again["device"]
        assert info["trajectory_id"] != info_again["trajectory_id"]  # a new sandbox session
        assert obs["screenshot"].shape == (800, 1280, 3) and obs["screenshot"].dtype == np.uint8
        assert obs["instruction"] == info["task"]["instruction"] and obs["url"].startswith(sandbox.url)
        assert "notes" in obs["a11y"].lower() or obs["a11y"]
        assert info["verifier"] == "state" and info["platform"] == "web"
    finally:
        env.close()


@pytest.mark.parametrize("app", ["tiddlywiki", "datasette"])
def test_check_env_passes_on_the_third_party_files(app, request):
    env_file = request.getfixturevalue(f"{app}_file")
    env = tf_envs.make(env_file)
    try:
        assert env.spec.id == tf_envs.ENV_ID and env.spec.kwargs["env_file"] == env_file
        assert _checked(env) == []
    finally:
        env.close()


def test_a_scripted_episode_ends_when_the_verifier_says_done(tiddlywiki_file):
    env = tf_envs.make(tiddlywiki_file, task_id="open-control-panel")
    try:
        t0 = time.perf_counter()
        obs, info = env.reset(seed=0)
        reset_ms = (time.perf_counter() - t0) * 1000
        assert obs["instruction"] == "Open the control panel"
        x, y = centre(element(info, "button", "control panel"))
        t0 = time.perf_counter()
        reset_timings = info["timings"]
        obs, reward, terminated, truncated, info = env.step({"type": "tap", "x": x, "y": y})
        step_ms = (time.perf_counter() - t0) * 1000
        assert (terminated, truncated, reward) == (True, False, 1.0)
        assert (info["outcome"], info["verified_by"]) == ("success", "js")
        assert info["verdict"]["done"] and info["reward_parts"]["task"] == 1.0
        assert info["target"]["name"].lower() == "control panel" and info["executed"]
        print(
            f"\ntiddlywiki reset {reset_ms:.0f} ms {reset_timings}, step {step_ms:.0f} ms {info['timings']}"
        )
        with pytest.raises(RuntimeError, match="call reset"):
            env.step({"type": "wait"})
    finally:
        env.close()


@pytest.mark.parametrize(
    "profile, task_id, role, name",
    [
        ("qwen2.5-vl", "open-control-panel", "button", "control panel"),
        ("qwen3-vl", "open-recent", "tab", "Recent"),
    ],
)
def test_a_text_answer_is_read_in_its_profiles_frame_and_mapped_back(
    tiddlywiki_file, profile, task_id, role, name
):
    env = tf_envs.make(tiddlywiki_file, task_id=task_id, profile=profile)
    try:
        obs, info = env.reset(seed=1)
        height, width = obs["screenshot"].shape[:2]
        fw, fh = info["profile"]["frame"]
        assert (fw, fh) == model_profile(profile).frame(width, height)
        cx, cy = centre(element(info, role, name))
        if profile == "qwen2.5-vl":  # GUI-Libra JSON, pixels of the resized frame
            px, py = round(cx * fw / width), round(cy * fh / height)
            answer = (
                "<think>The control panel button is in the sidebar.</think><answer>"
                f'{{"action_description": "Open the control panel", "action_type": "Click", '
                f'"value": "None", "point_2d": [{px}, {py}]}}</answer>'
            )
            tolerance = (width / fw, height / fh)
        else:  # a mobile_use tool call on the 0-1000 grid
            px, py = round(cx / width * 1000), round(cy / height * 1000)
            answer = (
                '<thinking>The Recent tab.</thinking>\n<tool_call>\n{"name": "mobile_use", '
                f'"arguments": {{"action": "click", "coordinate": [{px}, {py}]}}}}\n</tool_call>'
            )
            tolerance = (width / 1000, height / 1000)
        obs, reward, terminated, truncated, info = env.step(answer)
        assert info["format_error"] is None and info["action"]["type"] == "tap"
        assert abs(info["action"]["x"] * width - cx) <= tolerance[0]
        assert abs(info["action"]["y"] * height - cy) <= tolerance[1]
        assert (
            info["thought"]
            and info["target"]["name"] == element({"elements": [info["target"]]}, role, name)["name"]
        )
        assert (terminated, reward, info["outcome"]) == (True, 1.0, "success")
    finally:
        env.close()


def test_without_a_task_the_file_gives_the_instruction_and_verdict_and_bad_answers_cost(tiny_file):
    env = tf_envs.make(tiny_file, alpha=0.25)
    try:
        obs, info = env.reset(seed=3)
        assert obs["instruction"] == "Press Add once"  # instruction_js: the app made it up
        assert info["task"]["params"]["explore"] and info["verifier"] == "js" and info["max_steps"] == 4
        assert obs["screenshot"].shape == (600, 800, 3)
        add = element(info, "button", "Add")
        # The boxes are in screenshot pixels: the page's own layout says where the button is.
        box = env.unwrapped.browser.page.evaluate(
            "() => { const r = [...document.querySelectorAll('button')][0].getBoundingClientRect();"
            " return [r.left, r.top, r.right, r.bottom]; }"
        )
        assert add["bbox"] == pytest.approx(box, abs=1.0) and add["visibility"]["centre_hit"]
        before = obs["screenshot"]
        for bad in ("I would press the Add button.", {"type": "tap", "x": 5000, "y": 10}, {"type": "jump"}):
            obs, reward, terminated, truncated, info = env.step(bad)  # never raises
            assert (reward, terminated, truncated) == (0.0, False, False)
            assert info["format_error"] and not info["executed"] and info["action"] is None
            assert info["reward_parts"]["format"] == -0.25 and info["reward_parts"]["shaped"] == -0.25
            assert np.array_equal(obs["screenshot"], before) and obs["screenshot"] is not before
        assert env.unwrapped.browser.page.evaluate("document.body.dataset.n") is None  # nothing ran
        obs, reward, terminated, truncated, info = env.step(
            {"type": "tap", "x": centre(add)[0], "y": centre(add)[1]}
        )
        assert (reward, terminated, truncated) == (1.0, True, False)
        assert (info["outcome"], info["reason"]) == ("success", "pressed 1")
        assert info["episode_reward_parts"]["format_ok"] is False
        assert info["episode_reward_parts"]["reward"] == 1.0  # r_task, and no format bonus
    finally:
        env.close()


def test_the_guard_refuses_a_payment_and_the_episode_ends(tiny_file):
    env = tf_envs.make(tiny_file)
    try:
        _, info = env.reset(seed=0)
        x, y = centre(element(info, "button", "Pay now"))
        _, reward, terminated, truncated, info = env.step({"type": "tap", "x": x, "y": y})
        assert (reward, terminated, truncated) == (0.0, True, False)
        assert info["guard"].startswith("blocked:payment") and not info["executed"]
        assert info["reward_parts"]["invalid"] == -2.0 and info["outcome"] == "failure"
        assert info["episode_reward_parts"]["invalid"] is True
        assert env.unwrapped.browser.page.evaluate("document.body.dataset.paid") is None  # never pressed
    finally:
        env.close()


def test_an_episode_is_truncated_at_max_steps(tiny_file):
    env = tf_envs.make(tiny_file, max_steps=2)
    try:
        env.reset(seed=0)
        _, _, terminated, truncated, _ = env.step({"type": "wait", "duration_ms": 50})
        assert (terminated, truncated) == (False, False)
        _, reward, terminated, truncated, info = env.step("not an action")  # counts toward the budget
        assert (reward, terminated, truncated) == (0.0, False, True)
        # The verifier is asked once more for the record: nothing pressed, a failure.
        assert (info["outcome"], info["reason"]) == ("failure", "pressed 0")
    finally:
        env.close()


def _oracle_episode(env) -> tuple[float, bool, dict]:
    """Play the sandbox's planner through step(), its actions given as pixel dicts."""
    _, info = env.reset(seed=0)
    oracle = oracle_policy(env.unwrapped.task)
    width, height = env.unwrapped.screen_size
    for _ in range(info["max_steps"]):
        action = oracle.act(env.unwrapped.observation).model_dump(exclude_none=True)
        for key, size in (("x", width), ("y", height), ("x2", width), ("y2", height)):
            if key in action:
                action[key] *= size
        _, reward, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            return reward, terminated, info
    raise AssertionError("the oracle did not finish")


def test_record_to_writes_a_rollout_the_store_reads_back(sandbox, tmp_path):
    env = tf_envs.make_sandbox(
        sandbox.url, apps=["notes"], task_id="notes.create:en:0", record_to=tmp_path, policy_id="planner-v1"
    )
    try:
        reward, terminated, info = _oracle_episode(env)
    finally:
        env.close()
    # The sandbox's state verifier (the session's state, checked by the task's template).
    assert (reward, terminated, info["outcome"], info["verified_by"], info["recorded"]) == (
        1.0,
        True,
        "success",
        "state",
        True,
    )
    store = RawStore(tmp_path / "raw")
    assert store.collections() == ["gym/sandbox"]
    (traj,) = store.iter_trajectories("gym/sandbox")
    assert traj.trajectory_id == info["trajectory_id"]
    assert (traj.source, traj.policy, traj.source_name) == ("rollout", "agent", "sandbox:agent:planner-v1")
    assert (traj.outcome, traj.verified_by, traj.reward, traj.verifier) == ("success", "state", 1.0, "state")
    assert traj.task.task_id == "notes.create:en:0" and traj.platform == "web"
    steps = sorted(store.iter_steps("gym/sandbox"), key=lambda s: s.index)
    assert len(steps) == traj.num_steps >= 2 and steps[-1].action.type.value in ("done", "answer")
    assert all(store.blobs.exists(s.screenshot, s.image_format) for s in steps)
    audit = (tmp_path / "raw" / "audit" / "gym" / "sandbox.jsonl").read_text().splitlines()
    assert len(audit) == len(steps)


def test_close_leaves_no_chromium_and_gymnasium_make_works(tiny_file):
    env = gymnasium.make(tf_envs.ENV_ID, env_file=str(tiny_file))
    _, info = env.reset(seed=0)
    x, y = centre(element(info, "button", "Add"))
    _, reward, terminated, _, _ = env.step({"type": "tap", "x": x, "y": y})
    assert (reward, terminated) == (1.0, True)
    pid = env.unwrapped.browser.browser_pid
    family = [pid, *descendant_pids(pid)]
    assert len(family) > 1 and all(process_running(p) for p in family)
    env.close()
    deadline = time.monotonic() + 10
    while any(process_running(p) for p in family) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in family if process_running(p)]
    env.close()  # twice is fine


def test_a_browser_killed_mid_episode_raises_is_recorded_as_error_and_the_next_reset_recovers(
    tiny_file, tmp_path
):
    import os
    import signal

    from crawlers.web_env import BrowserCrashed

    env = tf_envs.make(tiny_file, record_to=tmp_path)
    try:
        _, info = env.reset(seed=0)
        add = centre(element(info, "button", "Add"))
        env.step({"type": "wait", "duration_ms": 50})
        dead = env.unwrapped.browser.browser_pid
        os.kill(dead, signal.SIGKILL)
        with pytest.raises(BrowserCrashed):
            env.step({"type": "tap", "x": add[0], "y": add[1]})
        _, info = env.reset(seed=1)  # the lost episode is recorded; the browser restarted
        assert env.unwrapped.browser.browser_pid != dead
        _, reward, terminated, _, _ = env.step({"type": "tap", "x": add[0], "y": add[1]})
        assert (reward, terminated) == (1.0, True)
    finally:
        env.close()
    trajs = {t.trajectory_id: t for t in RawStore(tmp_path / "raw").iter_trajectories("gym/tiny")}
    # The lost episode is an error of the environment, never a failure of the policy.
    assert sorted((t.outcome, t.num_steps) for t in trajs.values()) == [("error", 1), ("success", 1)]
    lost = next(t for t in trajs.values() if t.outcome == "error")
    assert "the environment failed" in lost.error and lost.reward is None
