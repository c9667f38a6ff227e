"""The Gym API on a desktop environment file: a real Xvfb, AT-SPI bus and mousepad, the
file's `command` verifier; and the faults of a desktop session (an app killed, a hung
accessibility bus or reader, an X server that dies or never starts), each an `error`
with its reason and nothing left running."""

from __future__ import annotations

import os
import signal
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import trajforge.envs as tf_envs
from crawlers.desktop_env import AppCrashed
from schemas.environment import load_environment
from tests.desktop.procs import assert_nothing_left, session_pids
from tests.desktop.test_desktop_env import EXAMPLE, crawl
from trajforge.store.raw import RawStore

pytestmark = pytest.mark.skipif(
    not all(Path(f"/usr/bin/{b}").exists() for b in ("Xvfb", "mousepad")),
    reason="needs Xvfb and mousepad (scripts/setup_desktop.sh)",
)


def textbox_centre(info: dict) -> tuple[float, float]:
    box = next(e for e in info["elements"] if e["role"] == "textbox" and e["bbox"])["bbox"]
    return (box[0] + box[2]) / 2, (box[1] + box[3]) / 2


def comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def session_process(env, match) -> int:
    """The pid of the desktop session's process whose (comm, cmdline) `match` accepts."""
    for pid in env.unwrapped.browser.session.pids():
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if match(comm(pid), cmdline):
            return pid
    raise AssertionError("no such process in the session")


def test_check_env_passes_and_close_leaves_no_x_server_bus_or_app():
    before = session_pids()
    env = tf_envs.make(EXAMPLE, task_id="note-en")
    try:
        assert env.spec.id == tf_envs.ENV_ID and env.unwrapped.screen_size == (1024, 768)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            check_env(env, skip_render_check=True)
        # make()'s env is wrapped (ShapedReward, PlayTask): the checker says so, nothing else.
        assert [
            str(w.message) for w in seen if "different from the unwrapped version" not in str(w.message)
        ] == []
        assert session_pids() - before  # the session is up between episodes
    finally:
        env.close()
    assert_nothing_left(before)
    env.close()  # twice is fine


@pytest.mark.parametrize(
    "task_id, text, answer",
    [
        ("note-en", "Buy milk and eggs", '{"action_type": "KeyboardPress", "value": "ctrl+s"}'),
        ("note-zh", "买牛奶和鸡蛋", '{"action_type": "KeyboardPress", "value": "ctrl+s"}'),
    ],
)
def test_a_dict_then_a_text_answer_earn_the_command_verifiers_reward(tmp_path, task_id, text, answer):
    env = tf_envs.make(EXAMPLE, task_id=task_id, record_to=tmp_path, policy_id="gym-test")
    try:
        obs, info = env.reset(seed=0)
        assert obs["screenshot"].shape == (768, 1024, 3) and obs["screenshot"].dtype == np.uint8
        assert (info["platform"], info["verifier"]) == ("desktop", "command")
        device = info["device"]  # the session's X screen, as the file's display says
        assert (device["viewport_width"], device["viewport_height"], device["is_mobile"]) == (
            1024,
            768,
            False,
        )
        assert device["theme"] == "light"  # the toolkit's own: no theme is drawn for a desktop
        assert obs["url"] == "desktop://mousepad/~/note.txt - Mousepad" and "textbox" in obs["a11y"]
        x, y = textbox_centre(info)
        obs, reward, terminated, truncated, info = env.step({"type": "type", "x": x, "y": y, "text": text})
        # Typed, not saved: the command verifier's exit status 1 is "not done yet".
        assert (reward, terminated, truncated) == (0.0, False, False) and info["error"] is None
        assert info["verdict"]["done"] is False and info["verdict"]["kind"] == "command"
        assert next(e for e in info["elements"] if e["role"] == "textbox")["name"] == text
        obs, reward, terminated, truncated, info = env.step(
            f"<think>Save it.</think><answer>{answer}</answer>"
        )
        assert info["format_error"] is None and info["action"] == {"type": "key", "text": "ctrl+s"}
        assert (reward, terminated, truncated) == (1.0, True, False)
        assert (info["outcome"], info["verified_by"], info["recorded"]) == ("success", "command", True)
        assert "exited with status 0" in info["reason"]
    finally:
        env.close()
    (traj,) = RawStore(tmp_path / "raw").iter_trajectories("gym/mousepad")
    assert (traj.platform, traj.outcome, traj.num_steps, traj.task.task_id) == (
        "desktop",
        "success",
        2,
        task_id,
    )
    assert traj.source_name.endswith(":agent:gym-test") and traj.verified_by == "command"


def _is_app(name: str, cmdline: str) -> bool:
    return name == "mousepad"


def _is_a11y_bus(name: str, cmdline: str) -> bool:
    return name == "dbus-daemon" and "accessibility.conf" in cmdline


def _x_server(name: str, cmdline: str) -> bool:
    return name == "Xvfb"


@pytest.mark.parametrize(
    "fault, victim, sig, expect",
    [
        ("app", _is_app, signal.SIGKILL, r"the app exited mid-episode .*status (-9|137)"),
        ("x server", _x_server, signal.SIGKILL, r"X server (is gone|stopped answering)"),
        ("reader", None, signal.SIGSTOP, r"the accessibility bus did not answer within 3 s"),
    ],
)
def test_a_fault_mid_episode_is_a_recorded_error_and_the_next_reset_recovers(
    tmp_path, fault, victim, sig, expect
):
    import re

    before = session_pids()
    env = tf_envs.make(EXAMPLE, task_id="note-en", record_to=tmp_path, step_timeout_s=3)
    try:
        _, info = env.reset(seed=0)
        x, y = textbox_centre(info)
        env.step({"type": "type", "x": x, "y": y, "text": "Buy"})
        pid = env.unwrapped.browser.reader.proc.pid if victim is None else session_process(env, victim)
        os.kill(pid, sig)
        t0 = time.monotonic()
        with pytest.raises(AppCrashed) as failed:
            env.step({"type": "key", "text": "ctrl+s"})
        assert time.monotonic() - t0 < 30, "the step's wait was not bounded"
        assert re.search(expect, str(failed.value)), str(failed.value)
        _, info = env.reset(seed=1)  # on a fresh session: the app plays again
        _, reward, terminated, _, _ = env.step({"type": "type", "x": x, "y": y, "text": "Buy milk and eggs"})
        _, reward, terminated, _, info = env.step({"type": "key", "text": "ctrl+s"})
        assert (reward, terminated, info["outcome"]) == (1.0, True, "success")
    finally:
        env.close()
    assert_nothing_left(before)
    trajs = sorted(RawStore(tmp_path / "raw").iter_trajectories("gym/mousepad"), key=lambda t: t.outcome)
    # The lost episode is the environment's error, never a failure of the policy.
    assert [(t.outcome, t.num_steps) for t in trajs] == [("error", 1), ("success", 2)], fault
    assert "the environment failed" in trajs[0].error and trajs[0].reward is None


def test_a_hung_accessibility_bus_costs_a_bounded_wait_and_a_fresh_session():
    """A stopped AT-SPI bus: the step's tree read either still works (an app already
    connected answers peer to peer) or fails within the read timeout; the next launch
    cannot register on that bus, so the reset gives that session up within the read
    timeout and plays on a fresh one."""
    before = session_pids()
    env = tf_envs.make(EXAMPLE, task_id="note-en", step_timeout_s=3)
    try:
        _, info = env.reset(seed=0)
        first = env.unwrapped.browser.session.token
        os.kill(session_process(env, _is_a11y_bus), signal.SIGSTOP)
        t0 = time.monotonic()
        try:
            env.step({"type": "key", "text": "ctrl+s"})
        except AppCrashed as e:
            assert "the accessibility bus did not answer within 3 s" in str(e)
        _, info = env.reset(seed=1)
        assert time.monotonic() - t0 < 60, "the waits were not bounded"
        assert env.unwrapped.browser.session.token != first and any(
            e["role"] == "textbox" for e in info["elements"]
        )
    finally:
        env.close()
    assert_nothing_left(before)


@pytest.mark.parametrize(
    "script, expect",
    [
        (
            "echo 'no screens found' >&2; exit 1",
            r"Xvfb exited at once \(status 1\); it said: no screens found",
        ),
        ("exec sleep 60", r"Xvfb did not start within 2 s"),
    ],
)
def test_an_x_server_that_does_not_start_is_an_error_and_leaves_nothing(
    tmp_path, monkeypatch, script, expect
):
    import re

    import crawlers.desktop_session as desktop_session

    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "Xvfb").write_text(f"#!/bin/sh\n{script}\n")
    (fake / "Xvfb").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(desktop_session, "_START_TIMEOUT_S", 2.0)
    before = session_pids()
    stats, trajs, _ = crawl(load_environment(EXAMPLE), tmp_path, retries=0)
    assert_nothing_left(before)
    assert stats.error == 2 and stats.success == 0 and {t.outcome for t in trajs} == {"error"}
    assert all(re.search(expect, t.error) for t in trajs), [t.error for t in trajs]
    assert all(t.num_steps == 0 for t in trajs)  # never a trajectory recorded as the app's work


def test_the_guard_refuses_a_sensitive_action_on_the_desktop_and_audits_it(tmp_path):
    """Typing a payment command is refused before XTEST sends a key: the app's text area
    stays empty, the episode ends as a failure with the invalid-action term, and the
    guard's audit log of the recording names the refusal."""
    from trajforge.store.audit import read_audit

    env = tf_envs.make(EXAMPLE, task_id="note-en", record_to=tmp_path, policy_id="guard-test")
    try:
        _, info = env.reset(seed=0)
        x, y = textbox_centre(info)
        _, reward, terminated, truncated, info = env.step({"type": "type", "x": x, "y": y, "text": "Pay now"})
        assert (reward, terminated, truncated) == (0.0, True, False)
        assert info["guard"].startswith("blocked:payment") and not info["executed"]
        assert info["reward_parts"]["invalid"] == -2.0 and info["outcome"] == "failure"
        textbox = next(e for e in info["elements"] if e["role"] == "textbox")
        assert "Pay now" not in (textbox["name"] or "")  # never typed
    finally:
        env.close()
    (entry,) = read_audit(tmp_path / "raw" / "audit" / "gym" / "mousepad.jsonl")
    assert (entry["decision"], entry["category"], entry["action"]["text"]) == (
        "blocked",
        "payment",
        "Pay now",
    )
