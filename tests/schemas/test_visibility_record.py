"""The element's visibility record (issue 18): validation, is_target, the Arrow column
(built by column equals the dict rows), Parquet round trip, and parts written before
the field existed read with it null, through the store and consolidation."""

from __future__ import annotations

import hashlib

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from schemas.actions import Action
from schemas.arrow import (
    ELEMENT_TYPE,
    STEP_SCHEMA,
    VISIBILITY_TYPE,
    row_to_step,
    step_to_row,
    steps_table,
    trajectories_table,
)
from schemas.errors import SchemaError
from schemas.records import DeviceProfile, Element, Step, Task, Trajectory, Visibility
from trajforge.store.raw import RawStore

SHA = hashlib.sha256(b"png").hexdigest()
SEEN = Visibility(
    on_screen=True, visible_fraction=1.0, hit_fraction=1.0, centre_hit=True, modal_covered=False
)
# ELEMENT_TYPE as it was before the visibility record: parts on disk have this shape.
OLD_ELEMENT_TYPE = pa.struct([f for f in ELEMENT_TYPE if f.name != "visibility"])
OLD_STEP_SCHEMA = pa.schema(
    [
        pa.field(f.name, pa.list_(OLD_ELEMENT_TYPE))
        if f.name == "elements"
        else pa.field(f.name, OLD_ELEMENT_TYPE)
        if f.name == "target"
        else f
        for f in STEP_SCHEMA
    ]
)


def _step(tid: str, i: int, elements: list[Element], target: Element | None = None) -> Step:
    return Step(
        trajectory_id=tid,
        index=i,
        screenshot=SHA,
        width=1280,
        height=800,
        elements=elements,
        target=target,
        action=Action.tap(0.5, 0.5),
    )


def _traj(tid: str, n: int) -> Trajectory:
    return Trajectory(
        trajectory_id=tid,
        task=Task(task_id=f"k-{tid}", instruction="click", language="en", app="web"),
        platform="web",
        app="web",
        policy="random_walk",
        num_steps=n,
        device=DeviceProfile(viewport_width=1280, viewport_height=800),
    )


def test_is_target_needs_every_condition():
    assert SEEN.is_target
    for change in (
        {"on_screen": False},
        {"centre_hit": False},
        {"modal_covered": True},
        {"visible_fraction": 0.98},
    ):
        assert not SEEN.model_copy(update=change).is_target, change
    # Probe points other than the centre may miss (a rounded corner, a label's padding).
    assert SEEN.model_copy(update={"hit_fraction": 0.2}).is_target


def test_fractions_are_shares_and_extra_fields_are_refused():
    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValidationError, match="visible_fraction"):
            Visibility(**{**SEEN.model_dump(), "visible_fraction": bad})
    with pytest.raises(ValidationError, match="extra"):
        Visibility(**SEEN.model_dump(), zorder=3)


def test_a_bad_visibility_in_a_row_names_the_field():
    row = step_to_row(_step("t", 0, [Element(role="button", visibility=SEEN)]))
    row["elements"][0]["visibility"]["hit_fraction"] = 2.0
    with pytest.raises(SchemaError) as err:
        row_to_step(row, source="part-000001.steps.parquet")
    text = str(err.value)
    assert "elements.0.visibility.hit_fraction" in text and "part-000001" in text and "t#0" in text


visibilities = st.none() | st.builds(
    Visibility,
    on_screen=st.booleans(),
    visible_fraction=st.floats(0, 1),
    hit_fraction=st.sampled_from([0, 0.2, 0.4, 0.6, 0.8, 1.0]),
    centre_hit=st.booleans(),
    modal_covered=st.booleans(),
)
elements = st.builds(
    Element,
    role=st.sampled_from(["button", "link"]),
    name=st.text(max_size=5),
    bbox=st.none() | st.just((0.1, 0.1, 0.2, 0.2)),
    visibility=visibilities,
)


@settings(max_examples=10, deadline=None)
@given(st.lists(st.lists(elements, max_size=4), max_size=4), st.data())
def test_steps_table_with_visibility_equals_the_dict_rows(element_lists, data):
    steps = [
        _step("t", i, els, data.draw(st.none() | st.sampled_from(els)) if els else None)
        for i, els in enumerate(element_lists)
    ]
    table = steps_table(steps)
    assert table.schema == STEP_SCHEMA
    reference = pa.Table.from_pylist([step_to_row(s) for s in steps], schema=STEP_SCHEMA)
    assert table.equals(reference)
    assert [row_to_step(r) for r in table.to_pylist()] == steps


def test_visibility_round_trips_through_parquet(tmp_path):
    covered = SEEN.model_copy(update={"centre_hit": False, "modal_covered": True, "hit_fraction": 0.4})
    els = [
        Element(role="button", name="Send", bbox=(0.1, 0.1, 0.2, 0.15), visibility=SEEN),
        Element(role="link", name="Help", bbox=(0.3, 0.3, 0.4, 0.35), visibility=covered),
        Element(role="img", name=""),
    ]  # not measured
    step = _step("t", 0, els, target=els[0])
    path = tmp_path / "steps.parquet"
    pq.write_table(steps_table([step]), path)
    back = pq.read_table(path)
    assert back.schema.field("elements").type.value_type.field("visibility").type == VISIBILITY_TYPE
    got = row_to_step(back.to_pylist()[0], source=str(path))
    assert got == step
    assert [e.visibility for e in got.elements] == [SEEN, covered, None]
    assert got.target.visibility.is_target and not got.elements[1].visibility.is_target


def _old_part(folder, n: int, tid: str) -> None:
    """A committed part as trajforge wrote it before issue 18: elements without visibility."""
    els = [Element(role="button", name="Go", bbox=(0.1, 0.1, 0.2, 0.2))]
    rows = [step_to_row(_step(tid, 0, els, target=els[0]))]
    for r in rows:
        for e in r["elements"] + [r["target"]]:
            e.pop("visibility")
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=OLD_STEP_SCHEMA), folder / f"part-{n:06d}.steps.parquet")
    pq.write_table(trajectories_table([_traj(tid, 1)]), folder / f"part-{n:06d}.trajectories.parquet")


def test_old_parts_read_with_visibility_null_and_consolidate(tmp_path):
    from trajforge.store.consolidate import consolidate

    store = RawStore(tmp_path / "raw")
    _old_part(store.root / "crawl" / "web", 0, "old")
    with store.writer("crawl/web") as w:
        w.add(_traj("new", 1), [_step("new", 0, [Element(role="button", visibility=SEEN)])])
    steps = {s.trajectory_id: s for s in store.iter_steps()}
    assert steps["old"].elements[0].visibility is None
    assert steps["old"].target.visibility is None
    assert steps["new"].elements[0].visibility == SEEN

    consolidate(store, tmp_path / "consolidated")
    table = pq.read_table(tmp_path / "consolidated" / "steps.parquet")
    assert table.schema.field("elements").type.value_type == ELEMENT_TYPE
    vis = {r["trajectory_id"]: r["elements"][0]["visibility"] for r in table.to_pylist()}
    assert vis == {"old": None, "new": SEEN.model_dump()}
