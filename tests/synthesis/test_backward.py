"""Backward-curriculum slices, and restoring s_{T-k} in real Chromium against the real sandbox."""

from __future__ import annotations

import pytest

from crawlers.episode import EpisodeContext
from crawlers.guard import SafetyGuard
from crawlers.randomise import fixed
from sandbox.episode import fetch_state, run_episode
from sandbox.oracle_policy import OraclePolicy
from sandbox.restore import restore_state
from sandbox.tasks import TEMPLATES, build_catalog
from schemas.actions import Action, ActionType
from schemas.records import DeviceProfile, Step, Task, Trajectory
from schemas.screen_signature import screen_signature
from synthesis.backward import backward_slices
from trajforge.store.raw import RawStore

ACTIONS = [Action.tap(0.1, 0.1), Action.type_text("hi"), Action.tap(0.2, 0.2), Action(type=ActionType.DONE)]


def recorded(distractions=(), guard_at=None, drop=()):
    task = Task(task_id="t", instruction="Say hi", language="en", app="notes")
    traj = Trajectory(
        trajectory_id="tr",
        task=task,
        platform="web",
        app="notes",
        device=DeviceProfile(viewport_width=1280, viewport_height=800),
        policy="oracle",
        num_steps=4,
        distractions=list(distractions),
    )
    steps = [
        Step(
            trajectory_id="tr",
            index=i,
            screenshot=f"{i:064x}",
            width=1280,
            height=800,
            url=f"http://x/notes/{i}",
            action=a,
            guard="blocked:x" if i == guard_at else None,
        )
        for i, a in enumerate(ACTIONS)
        if i not in drop
    ]
    return traj, steps


def test_backward_slices_count_back_from_the_goal():
    traj, steps = recorded()
    slices = backward_slices(traj, list(reversed(steps)))  # order of the input does not matter
    assert [(s.k, s.start_position, s.start_index) for s in slices] == [
        (1, 3, 3),
        (2, 2, 2),
        (3, 1, 1),
        (4, 0, 0),
    ]
    assert slices[0].actions == (ACTIONS[3],)  # k=1: only `done` is left
    assert slices[3].actions == tuple(ACTIONS)  # k=T: the whole task
    assert slices[1].start_url == "http://x/notes/2" and slices[1].start_screenshot == f"{2:064x}"
    assert {s.goal for s in slices} == {"Say hi"}
    # A curated trajectory with step 1 dropped: T = 3 kept steps, indices keep their gaps.
    traj, steps = recorded(drop=(1,))
    assert [(s.k, s.start_index) for s in backward_slices(traj, steps)] == [(1, 3), (2, 2), (3, 0)]


def test_restore_refuses_what_it_cannot_replay():
    traj, steps = recorded(drop=(1,))
    with pytest.raises(ValueError, match="gaps"):
        restore_state(None, "http://x", traj, steps, k=1)
    traj, steps = recorded()
    with pytest.raises(ValueError, match=r"k=5 is not in 1\.\.4"):
        restore_state(None, "http://x", traj, steps, k=5)
    traj, steps = recorded(guard_at=1)
    with pytest.raises(ValueError, match="step 1: the guard blocked"):
        restore_state(None, "http://x", traj, steps, k=1)
    traj, steps = recorded(distractions=["cookie_dialog"])
    with pytest.raises(ValueError, match="distraction_rate"):
        restore_state(None, "http://x", traj, steps, k=1)


# -- real Chromium, real sandbox ---------------------------------------------------------
def crawl_one(env, sandbox, tmp_path, task_id: str, tid: str, distraction_rate: float):
    """Solve the task with its oracle; the session's state after every action is kept."""
    task = next(t for t in build_catalog(per_template=1, languages=("en",), seed=0) if t.task_id == task_id)
    template = TEMPLATES[task.template_id]
    states = []  # states[i]: the session after action i, i.e. at s_{i+1}
    ctx = EpisodeContext(
        trajectory_id=tid,
        seed=0,
        device=fixed("desktop", "en"),
        blobs=RawStore(tmp_path / "raw").blobs,
        guard=SafetyGuard(),
        max_steps=30,
        on_step=lambda s: states.append(fetch_state(sandbox.url, tid)),
    )
    traj, steps = run_episode(
        env,
        task,
        OraclePolicy(template, task),
        ctx,
        server_url=sandbox.url,
        distraction_rate=distraction_rate,
        template=template,
    )
    env.close_episode()
    assert (traj.outcome, traj.verified_by) == ("success", "state")
    return traj, steps, states


@pytest.mark.slow
def test_restore_replays_into_a_fresh_session(sandbox, env, tmp_path):
    traj, steps, states = crawl_one(
        env, sandbox, tmp_path, "mail.mark_read:en:0", "bw-mark-read", distraction_rate=0.0
    )
    T = len(steps)
    assert T >= 3 and traj.distractions == []
    for k in (1, T - 1):
        r = restore_state(env, sandbox.url, traj, steps, k)
        try:
            assert r.matches, (k, r.observation.url, r.expected_url)
            assert (r.replayed, r.errors, r.sid) == (T - k, [], f"bw-mark-read-restore-{k}")
            assert r.observation.url == steps[T - k].url
            assert screen_signature(env.observe().a11y_tree) == r.expected_signature
            # The fresh session holds the state the original run had at s_{T-k}.
            assert fetch_state(sandbox.url, r.sid)["state"] == states[T - k - 1]["state"]
        finally:
            env.close_episode()
    # The original session was left alone: it still holds the finished run.
    assert fetch_state(sandbox.url, "bw-mark-read")["state"] == states[-1]["state"]
    # The restored screen is not just any screen: s_{T-1} differs from s_1 here.
    assert screen_signature(steps[T - 1].a11y_tree) != screen_signature(steps[1].a11y_tree)


@pytest.mark.slow
def test_restore_replays_the_distractions_under_the_original_session(sandbox, env, tmp_path):
    # Seeded by (seed, sid, page load): this run meets two pop-ups and dismisses them.
    traj, steps, states = crawl_one(
        env, sandbox, tmp_path, "mail.mark_read:en:0", "bw-distracted", distraction_rate=0.6
    )
    T = len(steps)
    assert len(traj.distractions) == 2
    r = restore_state(env, sandbox.url, traj, steps, 1, distraction_rate=0.6)
    try:
        assert r.matches and r.sid == "bw-distracted" and r.errors == []
        snap = fetch_state(sandbox.url, r.sid)
        assert snap["state"] == states[T - 2]["state"]
        assert snap["distractions"] == states[T - 2]["distractions"] == traj.distractions
    finally:
        env.close_episode()
