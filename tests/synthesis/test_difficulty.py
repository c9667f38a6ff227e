"""Difficulty features, score and levels, with the arithmetic done by hand."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from schemas.actions import Action, ActionType
from schemas.records import DeviceProfile, Step, Task, Trajectory
from synthesis.difficulty import (
    DEFAULT_NORMS,
    DIFFICULTY_SCHEMA,
    assign_levels,
    difficulty_rows,
    difficulty_score,
    difficulty_table,
    fit_norms,
    gesture_score,
    merge_task_features,
    normalise,
    task_features,
)
from trajforge.importers.tasks_table import TaskRow, write_tasks
from trajforge.store.raw import RawStore


def make(
    tid: str,
    task_id: str,
    actions: list[Action],
    *,
    outcome="failure",
    verified_by="none",
    distractions=(),
    app="shop",
    num_steps=None,
) -> tuple[Trajectory, list[Step]]:
    task = Task(task_id=task_id, instruction=f"do {task_id}", language="en", app=app)
    traj = Trajectory(
        trajectory_id=tid,
        task=task,
        platform="web",
        app=app,
        device=DeviceProfile(viewport_width=1280, viewport_height=800),
        policy="oracle",
        outcome=outcome,
        verified_by=verified_by,
        num_steps=len(actions) if num_steps is None else num_steps,
        distractions=list(distractions),
    )
    steps = [
        Step(trajectory_id=tid, index=i, screenshot="", width=1280, height=800, action=a)
        for i, a in enumerate(actions)
    ]
    return traj, steps


TAP = Action.tap(0.5, 0.5)
SCROLL = Action.scroll("down")
TYPE = Action.type_text("hello")
LONG = Action(type=ActionType.LONG_PRESS, x=0.2, y=0.2)
DONE = Action(type=ActionType.DONE)
OPEN_MAIL = Action(type=ActionType.OPEN_APP, text=" Mail ")


def test_gesture_scores_follow_the_issue():
    assert [
        gesture_score(t) for t in ("tap", "double_tap", "swipe", "scroll", "long_press", "type", "done")
    ] == [1, 1, 2, 2, 3, 0, 0]
    assert gesture_score("pinch") == 5  # multi-touch: no such ActionType yet, scored when it comes


def test_features_and_score_of_one_verified_trajectory():
    traj, steps = make(
        "a",
        "t1",
        [OPEN_MAIL, TAP, SCROLL, TYPE, LONG, DONE],
        outcome="success",
        verified_by="state",
        distractions=["cookie_dialog"],
    )
    f = task_features(traj, steps, optimal_steps=99)  # a verified success beats the import
    assert f == {
        "min_steps": 6,
        "min_steps_source": "verified",
        "apps": 2,  # shop + mail
        "gesture": 3,
        "distractions": 1,
    }  # max(1,2,0,3)=3
    # steps (6-1)/29 = 5/29; apps (2-1)/(4-1) = 1/3; gesture (3-1)/(5-1) = 1/2; distr. 1/2
    assert normalise(f) == pytest.approx(
        {"min_steps": 5 / 29, "apps": 1 / 3, "gesture": 0.5, "distractions": 0.5}
    )
    # 0.4*5/29 + 0.2/3 + 0.2*0.5 + 0.2*0.5 = 0.068966 + 0.066667 + 0.1 + 0.1 = 0.335632
    assert difficulty_score(f) == pytest.approx(0.335632, abs=1e-6)
    # Other weights: (1*5/29 + 1*0.5) / 2 = 0.336207
    assert difficulty_score(f, {"min_steps": 1, "gesture": 1}) == pytest.approx(0.336207, abs=1e-6)
    with pytest.raises(ValueError, match="unknown difficulty weight"):
        difficulty_score(f, {"steps": 1})


def test_min_steps_prefers_verified_then_imported_then_recorded():
    failed, fsteps = make("f", "t", [TAP, TAP, DONE], num_steps=3)
    assert task_features(failed, fsteps)["min_steps_source"] == "recorded"
    assert task_features(failed, fsteps, optimal_steps=7)["min_steps"] == 7
    # A curated trajectory with a dropped step keeps its recorded length.
    assert task_features(failed, fsteps[:2])["min_steps"] == 3
    merged = merge_task_features(
        [
            {"min_steps": 3, "min_steps_source": "recorded", "apps": 1, "gesture": 1, "distractions": 2},
            {"min_steps": 5, "min_steps_source": "verified", "apps": 2, "gesture": 1, "distractions": 0},
            {"min_steps": 4, "min_steps_source": "verified", "apps": 1, "gesture": 2, "distractions": 0},
        ]
    )
    assert merged == {
        "min_steps": 4,
        "min_steps_source": "verified",
        "apps": 2,
        "gesture": 2,
        "distractions": 2,
        "trajectories": 3,
    }


@pytest.mark.parametrize("kind", ["js", "http", "python", "state", "judge"])
def test_a_success_of_every_verifier_kind_is_verified(kind):
    """A js, http or python verdict is a verifier's like a state one: its length is the
    task's measured minimum, trusted over an imported optimum."""
    traj, steps = make("v", "t", [TAP, TAP, DONE], outcome="success", verified_by=kind)
    f = task_features(traj, steps, optimal_steps=7)
    assert (f["min_steps"], f["min_steps_source"]) == (3, "verified")


def test_a_js_verified_success_sets_the_task_minimum_in_difficulty_rows():
    pairs = [
        make("long", "t", [TAP, TAP, TAP, TAP, DONE], outcome="success", verified_by="state"),
        make("short", "t", [TAP, DONE], outcome="success", verified_by="js"),
        make("fail", "t", [DONE]),  # shorter, but a failure
    ]
    [row] = difficulty_rows(pairs, optimal_steps={"t": 9})
    assert (row["min_steps"], row["min_steps_source"], row["trajectories"]) == (2, "verified", 3)


@pytest.mark.parametrize(
    ("verified_by", "outcome"), [("dataset", "success"), ("none", "success"), ("js", "failure")]
)
def test_a_label_or_an_unverified_success_is_not_verified(verified_by, outcome):
    """A dataset's own success label is no verdict (as in stats): the import's optimum wins."""
    traj, steps = make("d", "t", [TAP, DONE], outcome=outcome, verified_by=verified_by)
    f = task_features(traj, steps, optimal_steps=7)
    assert (f["min_steps"], f["min_steps_source"]) == (7, "optimal_steps")


def three_tasks():
    return [
        make("a1", "easy", [TAP, DONE], outcome="success", verified_by="state"),
        make("a2", "easy", [TAP, TAP, TAP, DONE]),
        make("b1", "mid", [SCROLL, TAP, TYPE, DONE], distractions=["coupon_popup"]),
        make(
            "c1",
            "hard",
            [OPEN_MAIL, LONG, TAP, DONE],
            outcome="success",
            verified_by="judge",
            distractions=["a", "b"],
        ),
    ]


# easy: min 2 (verified), 1 app, tap, 0 distr: 0.4*1/29                  = 0.013793
# mid:  min 8 (import), 1 app, scroll, 1:      0.4*7/29 + 0.2*1/4 + 0.2/2 = 0.246552
# hard: min 4 (verified), 2 apps, long, 2:     0.4*3/29 + 0.2/3 + 0.1 + 0.2 = 0.408046
EXPECTED = {
    "easy": (2, "verified", 0.013793, "easy"),
    "mid": (8, "optimal_steps", 0.246552, "medium"),
    "hard": (4, "verified", 0.408046, "hard"),
}


def test_difficulty_rows_from_pairs_and_from_a_store_agree(tmp_path):
    pairs = three_tasks()
    table_path = tmp_path / "tasks.parquet"
    write_tasks(table_path, [TaskRow(task=pairs[2][0].task, source_name="android_world", optimal_steps=8)])
    rows = difficulty_rows(pairs, optimal_steps=table_path)
    got = {
        r["task_id"]: (r["min_steps"], r["min_steps_source"], round(r["score"], 6), r["level"]) for r in rows
    }
    assert got == EXPECTED
    assert [r["task_id"] for r in rows] == ["easy", "hard", "mid"]

    store = RawStore(tmp_path / "store")
    with store.writer("curated") as w:
        for traj, steps in pairs:
            w.add(traj, steps)
    table = difficulty_table(store, collections="curated", optimal_steps={"mid": 8})
    assert table.schema == DIFFICULTY_SCHEMA
    assert table.to_pylist() == rows
    pq.write_table(table, tmp_path / "d.parquet")  # writable as an asset's output


def test_minmax_norms_and_levels():
    rows = difficulty_rows(three_tasks(), norms="minmax", levels="fixed")
    norms = fit_norms(rows)
    # min_steps over {2, 4 (mid: 4 recorded, no import), 4}; apps {1, 2}; gesture {1, 2, 3};
    # distractions {0, 1, 2}
    assert norms == {
        "min_steps": (2.0, 4.0),
        "apps": (1.0, 2.0),
        "gesture": (1.0, 3.0),
        "distractions": (0.0, 2.0),
    }
    # mid: 0.4*(4-2)/2 + 0.2*0 + 0.2*(2-1)/2 + 0.2*1/2 = 0.4 + 0.1 + 0.1 = 0.6 -> "medium" (<= 2/3)
    mid = next(r for r in rows if r["task_id"] == "mid")
    assert mid["score"] == pytest.approx(0.6) and mid["level"] == "medium"
    assert {r["task_id"]: r["level"] for r in rows} == {
        "easy": "easy",
        "mid": "medium",
        "hard": "hard",
    }  # hard scores 1.0
    assert (
        normalise(
            {"min_steps": 5, "apps": 1, "gesture": 1, "distractions": 0},
            {**DEFAULT_NORMS, "apps": (1.0, 1.0)},
        )["apps"]
        == 0.0
    )  # constant feature
    assert assign_levels([0.1, 1 / 3, 0.5, 2 / 3, 0.9], "fixed") == [
        "easy",
        "easy",
        "medium",
        "medium",
        "hard",
    ]
    with pytest.raises(ValueError, match="levels"):
        assign_levels([0.1], "quartile")
