"""Each step filter on hand-made steps: scores and verdicts; thresholds move on stored scores."""

from __future__ import annotations

import io

import imagehash
import pyarrow as pa
import pytest
from PIL import Image

from filters.base import (
    BASE_COLUMNS,
    StepView,
    TrajectoryContext,
    check_order,
    decide,
    decide_table,
    score_columns,
)
from filters.phash import from_imagehash, hamming
from filters.steps import (
    BlankScreenshot,
    ExactDuplicate,
    Loop,
    NearDuplicate,
    NoElement,
    NoOp,
    OutOfBounds,
    TaskFailed,
    TrajectoryLength,
    action_signature,
    read_screen,
)
from schemas.actions import Action, ActionType
from schemas.arrow import row_to_step, step_to_row
from schemas.records import Element, Step
from tests.filters.conftest import H, W, _traj, blank, picture
from trajforge.store.raw import BlobStore


@pytest.fixture
def blobs(tmp_path) -> BlobStore:
    return BlobStore(tmp_path / "blobs")


def ctx_of(blobs, specs, traj=None, row0=0, reference=True) -> TrajectoryContext:
    """specs: (image bytes or None, action, extra Step fields) per step."""
    views = []
    for i, (image, action, kw) in enumerate(specs):
        sha = blobs.put(image) if image is not None else ""
        s = Step(
            trajectory_id="t",
            index=i,
            screenshot=sha,
            width=W,
            height=H,
            action=action,
            url=kw.pop("url", f"http://x/{i}"),
            a11y_tree=kw.pop("tree", f'- heading "{i}"'),
            **kw,
        )
        views.append(
            StepView(
                row=row0 + i, raw=step_to_row(s), step=s, error=None, screen=read_screen(blobs, sha, "png")
            )
        )
    return TrajectoryContext(trajectory=traj, steps=views, extra={"reference": reference})


def with_base(ctx, rows):
    return [{"action_type": v.step.action.type.value, **r} for v, r in zip(ctx.steps, rows)]


def test_read_screen_hash_matches_imagehash_and_states(blobs, tmp_path):
    data = picture(3)
    info = read_screen(blobs, blobs.put(data), "png")
    ref = from_imagehash(imagehash.phash(Image.open(io.BytesIO(data))))
    assert info.status == "ok" and hamming(info.phash, ref) <= 4
    assert read_screen(blobs, blobs.put(blank()), "png").gray_std == 0.0
    assert read_screen(blobs, "", "png").status == "empty"
    assert read_screen(blobs, "ab" * 32, "png").status == "missing"
    broken = read_screen(blobs, blobs.put(data[:100]), "png")
    assert broken.status == "broken" and broken.error
    jpeg = read_screen(blobs, blobs.put(picture(3, fmt="JPEG"), "jpeg"), "jpeg")
    assert jpeg.status == "ok" and hamming(jpeg.phash, info.phash) <= 6


def test_blank_threshold_moves_on_stored_std(blobs):
    ctx = ctx_of(blobs, [(blank(), Action.tap(0.5, 0.5), {}), (picture(1), Action.tap(0.5, 0.5), {})])
    f = BlankScreenshot(min_std=1.0)
    scores = f.score(ctx)
    assert scores[0]["gray_std"] == 0.0 and scores[1]["gray_std"] > 30
    assert [f.keep(s) for s in scores] == [False, True]
    assert [BlankScreenshot(min_std=100).keep(s) for s in scores] == [False, False]


def test_exact_duplicate_needs_same_screen_and_same_action(blobs):
    home = picture(1)
    f = ExactDuplicate()
    first = ctx_of(blobs, [(home, Action.tap(0.201, 0.2), {}), (home, Action.tap(0.6, 0.6), {})])
    s1 = f.score(first)
    # Same screen, other action: a different sample (screen-level count still 1).
    assert s1 == [{"dup_screen_count": 0, "dup_of": None}, {"dup_screen_count": 1, "dup_of": None}]
    # Same screen and a tap within the 0.01 grid cell: the same sample.
    second = ctx_of(blobs, [(home, Action.tap(0.199, 0.2), {})], row0=10)
    assert f.score(second) == [{"dup_screen_count": 2, "dup_of": 0}]
    assert not f.keep({"dup_of": 0}) and f.keep({"dup_of": None})


def test_exact_duplicate_ignores_non_reference_trajectories(blobs):
    f = ExactDuplicate()
    f.score(ctx_of(blobs, [(picture(1), Action.tap(0.2, 0.2), {})], reference=False))
    assert f.score(ctx_of(blobs, [(picture(1), Action.tap(0.2, 0.2), {})], row0=1))[0]["dup_of"] is None


def test_near_duplicate_same_key_only_and_threshold(blobs):
    f = NearDuplicate(max_distance=8)
    tap = Action.tap(0.2, 0.2)
    # the key is the screen signature (tree without boxes) + the action; the URL only
    # stands in for a step without a tree
    form = '- textbox "Message" [box=10,10,200,40]'
    moved = '- textbox "Message" [box=10,30,200,60]'  # scrolled: same signature
    f.score(
        ctx_of(
            blobs,
            [
                (picture(5), tap, {"url": "u", "tree": form}),
                (picture(5, tweak=True), tap, {"url": "u2", "tree": moved}),
                (picture(5, tweak=True), tap, {"url": "u", "tree": '- textbox "Search"'}),
                (picture(5, tweak=True), Action.tap(0.9, 0.9), {"url": "u", "tree": form}),
            ],
        )
    )
    dup_of, dist = f.resolve()
    assert dup_of.tolist() == [-1, 0, -1, -1]
    assert dist[1] <= 2
    s = {"neardup_of": 0, "neardup_distance": int(dist[1])}
    assert not f.keep(s) and NearDuplicate(max_distance=-1).keep(s)


def test_no_op_from_next_observation_or_recorded_flag(blobs):
    same = {"tree": '- button "Buy"', "url": "p"}
    ctx = ctx_of(
        blobs,
        [
            (picture(8), Action.tap(0.2, 0.2), dict(same)),
            (picture(8), Action.tap(0.5, 0.5), dict(same)),
            (picture(9), Action(type=ActionType.WAIT), {}),
            (picture(9), Action.tap(0.5, 0.5), {"screen_changed": True, "tree": '- heading "2"'}),
            (picture(9), Action.tap(0.5, 0.5), {}),
        ],
    )
    rows = with_base(ctx, NoOp().score(ctx))
    assert rows[0]["next_phash_distance"] == 0 and rows[0]["next_tree_same"]
    assert rows[1]["next_tree_same"] is False  # the tree changed: not a no-op
    assert rows[4]["next_phash_distance"] is None  # last step: no next observation
    # wait is not expected to change the screen; the crawler's True wins over pixels.
    assert [NoOp().keep(r) for r in rows] == [False, True, True, True, True]
    assert not NoOp().keep({**rows[3], "screen_changed_recorded": False})


def test_loop_kth_visit_dropped_and_k_moves(blobs):
    a = {"url": "list", "tree": '- list "Items"'}
    ctx = ctx_of(
        blobs,
        [
            (picture(11), Action.tap(0.1, 0.1), dict(a)),
            (picture(12), Action.tap(0.2, 0.1), {}),
            (picture(11), Action.tap(0.3, 0.1), dict(a)),
            (picture(11), Action.tap(0.4, 0.1), dict(a)),
        ],
    )
    scores = Loop().score(ctx)
    assert [s["loop_visits"] for s in scores] == [1, 1, 2, 3]
    assert [Loop(k=3).keep(s) for s in scores] == [True, True, True, False]
    assert all(Loop(k=4).keep(s) for s in scores)


def test_bounds_and_element_distance(blobs):
    boxed = [Element(role="button", name="OK", bbox=(0.4, 0.4, 0.6, 0.6))]
    ctx = ctx_of(
        blobs,
        [
            (picture(1), Action.tap(0.5, 0.5), {"elements": boxed}),
            (picture(2), Action.tap(0.9, 0.4), {"elements": boxed}),
            (picture(3), Action.tap(0.9, 0.4), {}),
            (picture(4), Action.scroll("down"), {"elements": boxed}),
        ],
    )
    ctx.steps[2].raw["action"]["x"] = 1.25  # a raw row outside the screen
    d = [s["element_distance"] for s in NoElement().score(ctx)]
    assert d[0] == 0.0 and d[1] == pytest.approx(0.3) and d[2] is None and d[3] is None
    assert [NoElement().keep({"element_distance": x}) for x in d] == [True, False, True, True]
    assert NoElement(max_distance=0.35).keep({"element_distance": d[1]})
    oob = [s["oob_excess"] for s in OutOfBounds().score(ctx)]
    assert oob[:3] == [0.0, 0.0, pytest.approx(0.25)] and oob[3] is None
    assert [OutOfBounds().keep({"oob_excess": x}) for x in oob] == [True, True, False, True]


def test_trajectory_filters_and_first_failing_reason(blobs):
    specs = [(picture(i), Action.tap(0.5, 0.5), {}) for i in range(2)]
    ctx = ctx_of(blobs, specs, traj=_traj("t", 2, outcome="failure"))
    filters = [TrajectoryLength(3, 50), TaskFailed(), BlankScreenshot()]
    check_order(filters)
    rows = [{} for _ in ctx.steps]
    for f in filters:
        for r, s in zip(rows, f.score(ctx)):
            r.update(s)
    assert rows[0]["traj_steps"] == 2 and rows[0]["outcome"] == "failure"
    assert decide(filters, rows[0]) == (False, "trajectory_length")
    assert decide([TrajectoryLength(2, 50)] + filters[1:], rows[0]) == (False, "task_failed")
    assert decide([TrajectoryLength(2, 50), TaskFailed(drop_failed=False)], rows[0]) == (True, None)
    with pytest.raises(ValueError, match="first"):
        check_order([BlankScreenshot(), TaskFailed()])


def test_decide_table_re_decides_from_stored_columns():
    table = pa.table({"loop_visits": pa.array([1, 3, 4], pa.int32())})
    assert decide_table(table, [Loop(k=3)]) == ([True, False, False], [None, "loop", "loop"])
    assert decide_table(table, [Loop(k=4)]) == ([True, True, False], [None, None, "loop"])
    assert set(score_columns([Loop(), NoOp()])) == {
        "loop_visits",
        "next_phash_distance",
        "next_tree_same",
        "screen_changed_recorded",
    }
    assert "row" in BASE_COLUMNS


def test_action_signature_grid():
    def sig(a):
        return action_signature(
            row_to_step(
                step_to_row(Step(trajectory_id="t", index=0, screenshot="", width=W, height=H, action=a))
            )
        )

    assert sig(Action.tap(0.5012, 0.3)) == sig(Action.tap(0.4991, 0.3))
    assert sig(Action.tap(0.52, 0.3)) != sig(Action.tap(0.50, 0.3))
    assert sig(Action.type_text("a")) != sig(Action.type_text("b"))
    assert sig(Action.scroll("up")) != sig(Action.scroll("down"))
