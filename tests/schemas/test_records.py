"""Step / Trajectory / Task records: validation names the field; Arrow and Parquet round trips."""

from __future__ import annotations

import hashlib
import json

import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from schemas.arrow import (
    STEP_SCHEMA,
    TRAJECTORY_SCHEMA,
    row_to_step,
    row_to_task,
    row_to_trajectory,
    step_to_row,
    steps_table,
    task_to_row,
    trajectories_table,
    trajectory_to_row,
    validate_step,
    validate_trajectory,
)
from schemas.errors import SchemaError
from schemas.records import DeviceProfile, Element, Step, Task, Trajectory, trajectory_id_for
from tests.schemas.test_actions import actions

SHA = hashlib.sha256(b"png bytes").hexdigest()


def step_dict(**over) -> dict:
    d = {
        "trajectory_id": "t1",
        "index": 3,
        "screenshot": SHA,
        "width": 1280,
        "height": 800,
        "action": {"type": "tap", "x": 0.5, "y": 0.5},
    }
    d.update(over)
    return d


def traj_dict(**over) -> dict:
    d = {
        "trajectory_id": "t1",
        "task": {"task_id": "k1", "instruction": "买一支笔", "language": "zh", "app": "shop"},
        "platform": "web",
        "app": "shop",
        "device": {"viewport_width": 1280, "viewport_height": 800},
        "policy": "oracle",
        "num_steps": 4,
    }
    d.update(over)
    return d


def located(expected_field: str, fn, data, **kw) -> SchemaError:
    """fn(data, source=..., record=...) raises a SchemaError naming file, record and field."""
    with pytest.raises(SchemaError) as info:
        fn(data, source="raw/steps-000.parquet", record=17, **kw)
    err = info.value
    assert err.field == expected_field, str(err)
    msg = str(err)
    assert "file raw/steps-000.parquet" in msg and "record 17" in msg
    assert f"field '{expected_field}'" in msg
    return err


def test_valid_records():
    s = validate_step(step_dict())
    assert s.action.x == 0.5 and s.image_format == "png" and s.elements == []
    t = validate_trajectory(traj_dict())
    assert t.task.language == "zh" and t.device.pixel_ratio == 1.0 and not t.success


@pytest.mark.parametrize(
    "over,field",
    [
        ({"action": {"type": "tap", "x": 1.5, "y": 0.5}}, "action.x"),
        ({"action": {"type": "swipe", "x": 0.1, "y": 0.1, "x2": 0.2, "y2": float("nan")}}, "action.y2"),
        ({"action": {"type": "tap", "x": -0.1, "y": 0.5}}, "action.x"),
        ({"action": {"type": "fly"}}, "action.type"),
        ({"action": {"type": "wait", "duration_ms": -5}}, "action.duration_ms"),
        ({"action": {"type": "tap"}}, "action"),  # needs a point: a rule across fields
        ({"screenshot": "abc"}, "screenshot"),
        ({"screenshot": SHA.upper()}, "screenshot"),
        ({"index": -1}, "index"),
        ({"width": 0}, "width"),
        ({"image_format": "gif"}, "image_format"),
        ({"elements": [{"role": "button", "bbox": [0.5, 0.5, 0.1, 0.9]}]}, "elements.0.bbox"),
        ({"target": {"role": "link", "bbox": [0, 0, float("inf"), 1]}}, "target.bbox"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_step_errors_name_the_field(over, field):
    err = located(field, validate_step, step_dict(**over))
    if field == "action":
        assert "needs a point" in str(err)


def test_missing_step_field_is_named():
    d = step_dict()
    del d["screenshot"]
    located("screenshot", validate_step, d)


@pytest.mark.parametrize(
    "over,field",
    [
        ({"platform": "windows"}, "platform"),
        ({"policy": "magic"}, "policy"),
        ({"num_steps": -1}, "num_steps"),
        ({"outcome": "great"}, "outcome"),
        ({"device": {"viewport_width": 0, "viewport_height": 800}}, "device.viewport_width"),
        ({"device": {"viewport_width": 10, "viewport_height": 10, "theme": "sepia"}}, "device.theme"),
        ({"task": {"task_id": "k", "instruction": "", "language": "en", "app": "a"}}, "task.instruction"),
        ({"task": {"task_id": "k", "instruction": "x", "language": "fr", "app": "a"}}, "task.language"),
    ],
)
def test_trajectory_errors_name_the_field(over, field):
    located(field, validate_trajectory, traj_dict(**over))


def test_row_errors_name_file_record_and_field():
    row = step_to_row(validate_step(step_dict()))
    row["action"] = {**row["action"], "x": 2.0}
    with pytest.raises(SchemaError) as info:
        row_to_step(row, source="raw/web/steps-000.parquet")
    msg = str(info.value)
    assert msg.startswith("file raw/web/steps-000.parquet, record t1#3, field 'action.x': ")
    assert "not a normalised coordinate" in msg

    trow = trajectory_to_row(validate_trajectory(traj_dict()))
    trow["platform"] = "tv"
    with pytest.raises(SchemaError) as info:
        row_to_trajectory(trow, source="raw/web/trajectories.parquet")
    assert str(info.value).startswith("file raw/web/trajectories.parquet, record t1, field 'platform'")


def test_schema_error_message_and_located():
    assert str(SchemaError("bad")) == "bad"
    e = SchemaError("not a pair", field="point_2d")
    assert str(e) == "field 'point_2d': not a pair"
    full = e.located(source="a.jsonl", record=5)
    assert str(full) == "file a.jsonl, record 5, field 'point_2d': not a pair"
    assert (full.reason, full.field) == ("not a pair", "point_2d")
    # what is already known is kept
    kept = SchemaError("x", source="b.jsonl", record=0).located(source="c", record=9)
    assert (kept.source, kept.record) == ("b.jsonl", 0)
    assert isinstance(e, ValueError)


# --- Arrow / Parquet round trips -------------------------------------------------------------

finite = st.floats(-1e9, 1e9, allow_nan=False)
names = st.text(max_size=20)


@st.composite
def elements(draw) -> Element:
    bbox = None
    if draw(st.booleans()):
        # boxes may lie outside [0, 1] when the element is off-screen
        x0, y0 = draw(st.floats(-2, 2)), draw(st.floats(-2, 2))
        bbox = (x0, y0, x0 + draw(st.floats(0, 2)), y0 + draw(st.floats(0, 2)))
    return Element(
        role=draw(st.sampled_from(["button", "link", "textbox", "img"])), name=draw(names), bbox=bbox
    )


@st.composite
def steps(draw) -> Step:
    return Step(
        trajectory_id=draw(st.text(min_size=1, max_size=16)),
        index=draw(st.integers(0, 2**31 - 1)),
        screenshot=hashlib.sha256(draw(st.binary(max_size=8))).hexdigest(),
        image_format=draw(st.sampled_from(["png", "jpeg", "webp"])),
        width=draw(st.integers(1, 2**31 - 1)),
        height=draw(st.integers(1, 4000)),
        url=draw(names),
        a11y_tree=draw(st.text(max_size=60)),
        elements=draw(st.lists(elements(), max_size=4)),
        action=draw(actions()),
        target=draw(st.none() | elements()),
        screen_changed=draw(st.none() | st.booleans()),
        error=draw(st.none() | names),
        guard=draw(st.none() | names),
        thought=draw(st.none() | st.text(max_size=40)),
        started_at=draw(finite),
        observe_ms=draw(finite),
        act_ms=draw(finite),
        probes_json=draw(st.none() | st.dictionaries(names, names, max_size=2).map(json.dumps)),
    )


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**60), 2**60)
    | st.floats(allow_nan=False, allow_infinity=False)
    | names,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(names, inner, max_size=3),
    max_leaves=8,
)


@st.composite
def trajectories(draw) -> Trajectory:
    task = Task(
        task_id=draw(names),
        instruction=draw(st.text(min_size=1, max_size=30)),
        language=draw(st.sampled_from(["en", "zh"])),
        app=draw(names),
        template_id=draw(st.none() | names),
        params=draw(st.dictionaries(names, json_values, max_size=4)),
        start_url=draw(st.none() | names),
    )
    device = DeviceProfile(
        name=draw(names),
        viewport_width=draw(st.integers(1, 5000)),
        viewport_height=draw(st.integers(1, 5000)),
        pixel_ratio=draw(st.floats(0.1, 4)),
        is_mobile=draw(st.booleans()),
        locale=draw(st.sampled_from(["en-US", "zh-CN"])),
        theme=draw(st.sampled_from(["light", "dark"])),
        font_scale=draw(st.floats(0.5, 2)),
    )
    return Trajectory(
        trajectory_id=draw(names),
        task=task,
        platform=draw(st.sampled_from(["web", "android", "ios"])),
        app=task.app,
        device=device,
        source=draw(st.sampled_from(["crawl", "import", "rollout"])),
        source_name=draw(names),
        policy=draw(st.sampled_from(["oracle", "random_walk", "replay", "agent", "imported"])),
        seed=draw(st.integers(-(2**63), 2**63 - 1)),
        outcome=draw(st.sampled_from(["success", "failure", "error", "unknown"])),
        verified_by=draw(st.sampled_from(["state", "judge", "dataset", "none"])),
        num_steps=draw(st.integers(0, 2**31 - 1)),
        distractions=draw(st.lists(names, max_size=3)),
        error=draw(st.none() | names),
        created_at=draw(finite),
    )


@given(st.lists(steps(), min_size=1, max_size=4))
def test_steps_round_trip_through_arrow(batch):
    table = steps_table(batch)
    assert table.schema == STEP_SCHEMA
    assert [row_to_step(r) for r in table.to_pylist()] == batch


@given(st.lists(trajectories(), min_size=1, max_size=3))
def test_trajectories_round_trip_through_arrow(batch):
    table = trajectories_table(batch)
    assert table.schema == TRAJECTORY_SCHEMA
    assert [row_to_trajectory(r) for r in table.to_pylist()] == batch


def test_task_row_round_trip():
    task = Task(
        task_id="k",
        instruction="Find 价格",
        language="zh",
        app="shop",
        params={"b": [1, 2.5, None], "a": {"名": "笔"}},
    )
    row = task_to_row(task)
    assert row["params_json"] == '{"a": {"名": "笔"}, "b": [1, 2.5, null]}'  # sorted keys, UTF-8
    assert row_to_task(row) == task


def test_parquet_file_round_trip(tmp_path):
    step = Step(
        trajectory_id="t1",
        index=0,
        screenshot=SHA,
        width=1080,
        height=2400,
        url="https://example.test/购物",
        a11y_tree='- button "Go" [ref=e4]',
        elements=[
            Element(role="button", name="Go", bbox=(0.1, 0.2, 0.3, 0.25)),
            Element(role="img", name="", bbox=None),
        ],
        action=validate_step(step_dict()).action.model_copy(update={"description": "点击"}),
        target=Element(role="button", name="Go", bbox=(0.1, 0.2, 0.3, 0.25)),
        screen_changed=True,
        thought="先点 Go\n然后输入",
        started_at=1.7e9,
        observe_ms=12.5,
        probes_json='{"saved_note": "买牛奶", "files": ["a.txt"]}',
    )
    path = tmp_path / "steps.parquet"
    pq.write_table(steps_table([step]), path)
    back = pq.read_table(path)
    assert back.schema == STEP_SCHEMA
    assert row_to_step(back.to_pylist()[0], source=str(path)) == step
    assert step.probes == {"saved_note": "买牛奶", "files": ["a.txt"]}
    # A part written before steps had probes (schema 1.1) reads them as not read.
    old = back.drop_columns(["probes_json"])
    pq.write_table(old, tmp_path / "old.parquet")
    was = row_to_step(pq.read_table(tmp_path / "old.parquet").to_pylist()[0])
    assert was.probes_json is None and was.probes is None
    assert was == step.model_copy(update={"probes_json": None})


def test_trajectory_id_for_is_stable_and_distinguishes_parts():
    a = trajectory_id_for("crawl", "shop.buy", 7, "oracle")
    assert a == trajectory_id_for("crawl", "shop.buy", 7, "oracle")
    assert len(a) == 16 and int(a, 16) >= 0
    assert a != trajectory_id_for("crawl", "shop.buy", 8, "oracle")
    assert trajectory_id_for("ab", "c") != trajectory_id_for("a", "bc")


def test_element_helpers():
    e = Element(role="button", name="Go", bbox=(0.1, 0.2, 0.3, 0.4))
    assert e.centre() == pytest.approx((0.2, 0.3))
    assert e.contains(0.2, 0.3) and not e.contains(0.5, 0.3)
    assert not Element(role="img").contains(0.5, 0.5)


def test_one_definition_of_the_verifier_kinds():
    """The kinds an environment file may name, the verdicts counted as verified and the
    values `verified_by` takes all come from schemas.records.VerifierKind."""
    from typing import get_args

    from schemas.environment import VerifierSpec
    from schemas.records import VERIFIER_KINDS, VerifiedBy, is_verified, is_verified_success

    assert set(VERIFIER_KINDS) == {"state", "js", "http", "python", "judge", "command", "predicates"}
    assert get_args(VerifierSpec.model_fields["kind"].annotation) == VERIFIER_KINDS
    flat = {a for part in get_args(VerifiedBy) for a in get_args(part)}
    assert flat == {*VERIFIER_KINDS, "dataset", "none"}
    assert all(is_verified(k) for k in VERIFIER_KINDS)
    assert not any(is_verified(k) for k in ("dataset", "none", None))
    assert is_verified_success("success", "js") and not is_verified_success("failure", "js")
    assert not is_verified_success("success", "dataset")
