"""steps_table / trajectories_table build Arrow by column: the same table, and the
same Parquet bytes, as the per-record dict rows (step_to_row, trajectory_to_row)."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from schemas.actions import Action
from schemas.arrow import (
    STEP_SCHEMA,
    TRAJECTORY_SCHEMA,
    step_to_row,
    steps_table,
    trajectories_table,
    trajectory_to_row,
)
from schemas.records import DeviceProfile, Element, Step, Task, Trajectory
from tests.schemas.test_records import steps as step_records
from tests.schemas.test_records import trajectories as trajectory_records

SHA = "ab" * 32


def rows_reference(records, to_row, schema) -> pa.Table:
    return pa.Table.from_pylist([to_row(r) for r in records], schema=schema)


def parquet_bytes(table: pa.Table) -> bytes:
    buf = io.BytesIO()  # the store's write options (trajforge.store.raw.atomic_write_table)
    pq.write_table(table, buf, compression="zstd", write_page_checksum=True)
    return buf.getvalue()


def assert_same(table: pa.Table, reference: pa.Table) -> None:
    assert table.schema == reference.schema
    assert table.to_pylist() == reference.to_pylist()
    assert table.equals(reference)
    assert parquet_bytes(table) == parquet_bytes(reference)


@settings(max_examples=8, deadline=None)
@given(st.lists(step_records(), min_size=0, max_size=5))
def test_steps_table_equals_the_dict_rows(batch):
    assert_same(steps_table(batch), rows_reference(batch, step_to_row, STEP_SCHEMA))


@settings(max_examples=6, deadline=None)
@given(st.lists(trajectory_records(), min_size=0, max_size=4))
def test_trajectories_table_equals_the_dict_rows(batch):
    assert_same(trajectories_table(batch), rows_reference(batch, trajectory_to_row, TRAJECTORY_SCHEMA))


def test_lone_surrogates_are_replaced_in_every_kind_of_column():
    # Half an emoji from a page, in a top-level string, a nested struct, a list
    # of structs and a task's params: each column is cleaned as the rows were.
    half = "\ud83d"
    el = Element(role="button", name=f"Pay {half}", bbox=(0.1, 0.1, 0.2, 0.2))
    steps = [
        Step(
            trajectory_id="t",
            index=0,
            screenshot=SHA,
            width=10,
            height=10,
            a11y_tree=f'- button "Pay {half}"',
            elements=[el, Element(role="img")],
            action=Action.type_text(f"hi {half}", 0.5, 0.5),
            target=el,
            thought=half,
        ),
        Step(trajectory_id="t", index=1, screenshot="", width=10, height=10, action=Action(type="done")),
    ]
    table = steps_table(steps)
    assert_same(table, rows_reference(steps, step_to_row, STEP_SCHEMA))
    assert table.column("a11y_tree")[0].as_py() == '- button "Pay \ufffd"'
    assert table.column("elements")[0].as_py()[0]["name"] == "Pay \ufffd"
    assert table.column("target")[1].as_py() is None

    task = Task(task_id="k", instruction="Buy", language="en", app="shop", params={"q": half})
    trajs = [
        Trajectory(
            trajectory_id="t",
            task=task,
            platform="web",
            app="shop",
            device=DeviceProfile(viewport_width=10, viewport_height=10),
            policy="oracle",
            num_steps=2,
            distractions=[half, "ok"],
        )
    ]
    table = trajectories_table(trajs)
    assert_same(table, rows_reference(trajs, trajectory_to_row, TRAJECTORY_SCHEMA))
    assert table.column("distractions")[0].as_py() == ["\ufffd", "ok"]
