"""The right_click action and the scroll amount: validation, Arrow round trip, old parts
(written before `amount` existed) still read through the store, consolidation and the catalog."""

from __future__ import annotations

import hashlib

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pydantic import ValidationError

from schemas.actions import SCREEN_CHANGING, Action, ActionType
from schemas.arrow import ACTION_TYPE, STEP_SCHEMA, row_to_step, step_to_row, steps_table, trajectories_table
from schemas.converters import from_gui_libra, to_autoglm, to_gui_libra, to_qwen25vl
from schemas.errors import SchemaError
from schemas.records import DeviceProfile, Step, Task, Trajectory
from trajforge.store.raw import RawStore

SHA = hashlib.sha256(b"png").hexdigest()
# ACTION_TYPE as it was before the scroll amount: parts on disk have this shape.
OLD_ACTION_TYPE = pa.struct([f for f in ACTION_TYPE if f.name != "amount"])
OLD_STEP_SCHEMA = pa.schema(
    [pa.field("action", OLD_ACTION_TYPE) if f.name == "action" else f for f in STEP_SCHEMA]
)


def _traj(tid: str, n: int) -> Trajectory:
    return Trajectory(
        trajectory_id=tid,
        task=Task(task_id=f"k-{tid}", instruction="scroll", language="en", app="web"),
        platform="web",
        app="web",
        policy="imported",
        num_steps=n,
        device=DeviceProfile(viewport_width=1280, viewport_height=800),
    )


def _step(tid: str, i: int, action: Action) -> Step:
    return Step(trajectory_id=tid, index=i, screenshot=SHA, width=1280, height=800, action=action)


def test_right_click_needs_a_point_and_is_not_a_long_press():
    a = Action.right_click(0.3, 0.4)
    assert a.type == ActionType.RIGHT_CLICK != ActionType.LONG_PRESS
    assert a.type in SCREEN_CHANGING
    with pytest.raises(ValidationError, match="right_click needs a point"):
        Action(type="right_click")


def test_scroll_amount_is_positive_and_scroll_only():
    assert Action.scroll("down", amount=5).amount == 5
    assert Action.scroll("down").amount is None  # the driver's default distance
    for bad in (0, -3, float("inf"), float("nan")):
        with pytest.raises(ValidationError, match="amount"):
            Action.scroll("down", amount=bad)
    with pytest.raises(ValidationError, match="amount is for scroll only"):
        Action(type="tap", x=0.1, y=0.1, amount=2)
    assert Action.scroll("up", 0.5, 0.5, amount=2.5).brief() == "scroll (0.500,0.500) up 2.5 notches"


def test_new_fields_round_trip_through_arrow():
    steps = [
        _step("t", 0, Action.right_click(0.25, 0.75)),
        _step("t", 1, Action.scroll("down", 0.5, 0.5, amount=3)),
        _step("t", 2, Action.scroll("up")),
    ]
    table = steps_table(steps)
    assert table.schema == STEP_SCHEMA
    assert (
        table.to_pylist()
        == pa.Table.from_pylist([step_to_row(s) for s in steps], schema=STEP_SCHEMA).to_pylist()
    )
    back = [row_to_step(r) for r in table.to_pylist()]
    assert back == steps
    assert [s.action.amount for s in back] == [None, 3, None]


def _old_part(folder, n: int, tid: str) -> None:
    """A committed part as an older trajforge wrote it: no `amount` in the action struct."""
    steps = [_step(tid, 0, Action.scroll("down", 0.5, 0.5)), _step(tid, 1, Action.key("Enter"))]
    rows = [step_to_row(s) for s in steps]
    for r in rows:
        r["action"].pop("amount")
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=OLD_STEP_SCHEMA), folder / f"part-{n:06d}.steps.parquet")
    pq.write_table(trajectories_table([_traj(tid, 2)]), folder / f"part-{n:06d}.trajectories.parquet")


def _store_with_old_and_new_parts(tmp_path) -> RawStore:
    store = RawStore(tmp_path / "raw")
    _old_part(store.root / "crawl" / "web", 0, "old")
    assert (
        pq.read_schema(store.root / "crawl/web/part-000000.steps.parquet").field("action").type
        == OLD_ACTION_TYPE
    )
    with store.writer("crawl/web") as w:
        w.add(
            _traj("new", 2),
            [_step("new", 0, Action.scroll("down", amount=4)), _step("new", 1, Action.right_click(0.5, 0.5))],
        )
    return store


def test_old_steps_parts_still_read(tmp_path):
    store = _store_with_old_and_new_parts(tmp_path)
    steps = {(s.trajectory_id, s.index): s for s in store.iter_steps()}
    assert steps["old", 0].action == Action.scroll("down", 0.5, 0.5)  # amount None
    assert steps["old", 1].action.text == "Enter"
    assert steps["new", 0].action.amount == 4
    assert steps["new", 1].action.type == ActionType.RIGHT_CLICK


def test_old_parts_consolidate_and_catalogue_with_new_ones(tmp_path):
    from trajforge.read.duckdb_catalog import build_catalog, query
    from trajforge.store.consolidate import consolidate

    store = _store_with_old_and_new_parts(tmp_path)
    consolidate(store, tmp_path / "consolidated")
    table = pq.read_table(tmp_path / "consolidated" / "steps.parquet")
    assert table.schema.field("action").type == ACTION_TYPE
    amounts = {(r["trajectory_id"], r["index"]): r["action"]["amount"] for r in table.to_pylist()}
    assert amounts == {("old", 0): None, ("old", 1): None, ("new", 0): 4.0, ("new", 1): None}

    # The catalog over the raw parts (union by name across the old and new struct).
    data = tmp_path / "catalogue"
    (data / "raw").parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / "raw").rename(data / "raw")
    result = build_catalog(data)
    _, rows = query(
        result.path, 'SELECT trajectory_id, "index", action.type FROM steps ORDER BY trajectory_id, "index"'
    )
    assert rows == [("new", 0, "scroll"), ("new", 1, "right_click"), ("old", 0, "scroll"), ("old", 1, "key")]


def test_gui_libra_round_trips_right_click_and_other_formats_refuse_it():
    a = Action.right_click(0.25, 0.5)
    text = to_gui_libra(a, 1000, 800)
    assert '"action_type": "RightClick"' in text and "[250, 400]" in text
    assert from_gui_libra(text, 1000, 800)[0] == a
    back, _ = from_gui_libra(
        '<answer>{"action_type": "right_click", "point_2d": [10, 20]}</answer>', 100, 100
    )
    assert back == Action.right_click(0.1, 0.2)
    with pytest.raises(SchemaError, match="RightClick needs a point"):
        from_gui_libra('<answer>{"action_type": "RightClick", "point_2d": [-100, -100]}</answer>', 100, 100)
    # Phone formats have no right click, and it is never passed off as a long press.
    for write in (lambda: to_autoglm(a), lambda: to_qwen25vl(a, 100, 100)):
        with pytest.raises(SchemaError, match="cannot express a right_click"):
            write()


def test_gui_libra_keeps_the_direction_of_a_scroll_with_an_amount():
    a = Action.scroll("down", 0.5, 0.5, amount=3)
    back, _ = from_gui_libra(to_gui_libra(a, 100, 100), 100, 100)
    assert back.direction == "down" and back.amount is None  # the format has no amount
