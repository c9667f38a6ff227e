"""Goals from state the screen does not show, on a real desktop app: a mousepad walk
that types a note and saves it records the file's `saved_note` probe on each step, and
task synthesis's candidates make the saved text a goal that validation keeps."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from crawlers.crawl_driver import EnvCrawl
from crawlers.env_crawl import crawl_environment
from crawlers.task_candidates import candidate_tasks
from crawlers.task_synthesis import recorded_walks
from crawlers.task_validation import ValidationSettings, validate_tasks
from schemas.actions import Action, ActionType
from schemas.environment import TaskSpec, load_environment
from trajforge.store.raw import RawStore

from .procs import assert_nothing_left, session_pids

ENVIRONMENTS = Path(__file__).resolve().parents[2] / "examples" / "environments"
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        any(shutil.which(p) is None for p in ("Xvfb", "mousepad")),
        reason="needs Xvfb and mousepad (scripts/setup_desktop.sh)",
    ),
]


def test_a_typed_and_saved_note_is_a_kept_probe_goal(tmp_path):
    before = session_pids()
    environment = load_environment(ENVIRONMENTS / "mousepad.yaml")
    store = RawStore(tmp_path / "raw")
    walk = [
        Action(type=ActionType.TYPE, x=0.5, y=0.5, text="oat milk", description="Type 'oat milk'"),
        Action.key("ctrl+s", description="Press ctrl+s"),
        Action(type=ActionType.TAP, x=0.5, y=0.5, description="Tap the text"),
    ]
    how = EnvCrawl(policy="replay", episodes=1, retries=1, replay={"mousepad-explore-00000": walk})
    crawl_environment(environment, how, store=store, collection="mousepad-explore")
    [(traj, steps)] = recorded_walks(store, "mousepad-explore")
    # Every step holds what the file's probe read on its screen: empty until the save.
    assert [s.probes for s in sorted(steps, key=lambda s: s.index)] == [
        {"saved_note": ""},
        {"saved_note": ""},
        {"saved_note": "oat milk"},
        {"saved_note": "oat milk"},
    ], traj.error
    rows = candidate_tasks([(traj, steps)], environment, ("en",), max_goals=1)
    saved = [
        r for r in rows if r["verifier"]["predicates"] == [{"probe": "saved_note", "equals": "oat milk"}]
    ]
    assert [r["instruction"] for r in saved] == ['Set the saved note to "oat milk"']
    assert saved[0]["params"]["walk_steps"] == [0, 1]
    # Validation plays it on fresh sessions: false at reset, true after its demonstration,
    # false after the other goals' demonstrations and after short random walks.
    candidates = environment.model_copy(update={"tasks": [TaskSpec.model_validate(r) for r in rows]})
    report = validate_tasks(candidates, ValidationSettings(random_tries=3, random_steps=2))
    assert saved[0]["task_id"] in report.kept, report.rejections
    assert report.figures[saved[0]["task_id"]].random_success == 0
    assert_nothing_left(before)
