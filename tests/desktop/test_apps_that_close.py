"""An app that closes after the agent's action (a dialog's Cancel or OK, an editor's Quit)
ends the episode, as the agent's doing: the verifier judges what is left and the exit
status is recorded. Only an exit with no input before it, or a death by a signal, is the
environment's error. Played on yad's entry dialog (Debian's `yad`, used by no other test)
and mousepad; a desktop session's bus starts the same processes on any machine."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

import trajforge.envs as tf_envs
from schemas.environment import load_environment

from .procs import assert_nothing_left, session_pids
from .test_desktop_env import crawl

pytestmark = pytest.mark.skipif(
    shutil.which("Xvfb") is None or shutil.which("yad") is None or shutil.which("mousepad") is None,
    reason="needs Xvfb, yad and mousepad (scripts/setup_desktop.sh)",
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "environments"
YAD = EXAMPLES / "yad-entry.yaml"


def test_a_random_walk_on_a_dialog_that_closes_records_outcomes_not_errors(tmp_path):
    before = session_pids()
    environment = load_environment(YAD)
    stats, oracle, _ = crawl(environment, tmp_path / "oracle")
    assert {t.outcome for t in oracle} == {"success"} and stats.success == 4
    walks, closed = [], []
    for seed in (3, 4):  # the random walk plays each task: a tap, a key or text, at random
        stats, played, store = crawl(
            environment,
            tmp_path / f"walk-{seed}",
            policy="random_walk",
            seed=seed,
            tasks=environment.as_tasks(),
        )
        assert stats.error == 0, [(t.outcome, t.error) for t in played]
        walks += played
        for t in played:
            found = re.match(r"the app exited \(status (\d+)\) after step (\d+)", t.verifier_reason or "")
            if found:
                steps = [s for s in store.iter_steps() if s.trajectory_id == t.trajectory_id]
                closed.append((int(found.group(1)), steps[-1].action.type.value, t.outcome))
    assert_nothing_left(before)
    assert len(walks) == 8 and {t.outcome for t in walks} <= {"success", "failure"}
    assert {t.verified_by for t in walks} == {"command"}
    # The walks that pressed Cancel, OK or Escape: a judged ending, with the dialog's status.
    assert closed and all(status in (0, 1, 252) for status, _, _ in closed), closed
    assert all(action in ("tap", "key", "double_tap", "long_press") for _, action, _ in closed), closed


def test_quitting_the_editor_is_a_judged_failure_and_the_next_reset_plays(tmp_path):
    before = session_pids()
    env = tf_envs.make(EXAMPLES / "mousepad.yaml", task_id="note-en", record_to=tmp_path)
    try:
        env.reset(seed=0)
        _, reward, terminated, truncated, info = env.step({"type": "key", "text": "ctrl+q"})
        assert (reward, terminated, truncated, info["outcome"]) == (0.0, True, False, "failure")
        _, info = env.reset(seed=1)  # the app is launched again
        assert any(e["role"] == "textbox" for e in info["elements"])
    finally:
        env.close()
    assert_nothing_left(before)


def test_the_session_bus_starts_only_the_accessibility_bus():
    """Whatever the machine installed (xdg-desktop-portal, dconf, printing services), a
    session's own bus can activate only the accessibility bus."""
    from crawlers.desktop_env import DesktopEnv

    before = session_pids()
    env = DesktopEnv(load_environment(YAD))
    try:
        env.reset("desktop://yad-entry")
        call = (
            "dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus "
            "org.freedesktop.DBus.ListActivatableNames"
        )
        status, out, err = env.session.run(call, timeout_s=10)
    finally:
        env.close()
    assert_nothing_left(before)
    assert status == 0, err
    assert set(re.findall(r'string "([^"]+)"', out)) == {"org.freedesktop.DBus", "org.a11y.Bus"}
