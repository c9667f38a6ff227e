"""The store's fast paths keep the slow paths' results: TrajectoryWriter's columnar
parts hold the same Parquet as the dict rows did, and BlobStore.put_many the same
blobs as put, each on disk when it returns."""

from __future__ import annotations

import hashlib

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from schemas.actions import Action
from schemas.arrow import STEP_SCHEMA, TRAJECTORY_SCHEMA, step_to_row, trajectory_to_row
from schemas.records import DeviceProfile, Element, Step, Task, Trajectory
from trajforge.store.raw import RawStore, atomic_write_table


def trajectory(store: RawStore, tid: str, n: int = 3):
    task = Task(task_id=f"t-{tid}", instruction="Buy shoes", language="en", app="shop", params={"size": 42})
    els = [
        Element(role="button", name=f"Buy {i}", bbox=(0.1, 0.1 * i, 0.3, 0.1 * i + 0.05)) for i in range(3)
    ] + [Element(role="img")]
    steps = []
    for i in range(n):
        sha = store.blobs.put(f"{tid}-{i}".encode(), "png")
        act = Action.tap(0.2, 0.15) if i % 2 else Action.scroll("down")
        steps.append(
            Step(
                trajectory_id=tid,
                index=i,
                screenshot=sha,
                width=64,
                height=40,
                url="http://shop/",
                a11y_tree='- button "Buy 1"',
                elements=els[: i + 1],
                action=act,
                target=els[1] if i % 2 else None,
                thought="go",
                screen_changed=bool(i % 2),
                started_at=1.7e9 + i,
            )
        )
    traj = Trajectory(
        trajectory_id=tid,
        task=task,
        platform="web",
        app="shop",
        device=DeviceProfile(viewport_width=64, viewport_height=40),
        policy="oracle",
        num_steps=n,
        distractions=["cookie_banner"],
    )
    return traj, steps


def test_writer_parts_hold_the_same_parquet_as_the_dict_rows(tmp_path):
    store = RawStore(tmp_path / "raw")
    batches = [
        [trajectory(store, f"a{i}", n=2 + i) for i in range(3)],
        [trajectory(store, f"b{i}", n=3) for i in range(2)],
    ]
    with store.writer("web/shop", batch_size=3) as w:
        for batch in batches:
            for traj, steps in batch:
                assert w.add(traj, steps)
    folder = tmp_path / "raw/web/shop"
    for n, batch in enumerate(batches):
        # The reference: the rows path the writer used before, same write options.
        ref_steps = pa.Table.from_pylist([step_to_row(s) for _, st in batch for s in st], schema=STEP_SCHEMA)
        ref_trajs = pa.Table.from_pylist([trajectory_to_row(t) for t, _ in batch], schema=TRAJECTORY_SCHEMA)
        atomic_write_table(tmp_path / "ref/steps.parquet", ref_steps)
        atomic_write_table(tmp_path / "ref/trajs.parquet", ref_trajs)
        got_steps = folder / f"part-{n:06d}.steps.parquet"
        got_trajs = folder / f"part-{n:06d}.trajectories.parquet"
        assert pq.read_table(got_steps).to_pylist() == ref_steps.to_pylist()
        assert got_steps.read_bytes() == (tmp_path / "ref/steps.parquet").read_bytes()
        assert got_trajs.read_bytes() == (tmp_path / "ref/trajs.parquet").read_bytes()
    assert [s for _, st in batches[0] + batches[1] for s in st] == list(store.iter_steps())


def test_an_id_queued_but_not_yet_committed_is_not_added_twice(tmp_path):
    store = RawStore(tmp_path)
    with store.writer("web/shop", batch_size=10) as w:
        assert w.add(*trajectory(store, "x"))
        assert w.has("x") and not w.add(*trajectory(store, "x"))
        w.flush()
        assert w.has("x") and not w.add(*trajectory(store, "x"))
        assert w.add(*trajectory(store, "y"))
    assert store.committed_ids() == {"x", "y"}
    assert sum(1 for _ in store.iter_steps()) == 6


def test_put_many_writes_what_put_writes_in_order(tmp_path):
    blobs = RawStore(tmp_path).blobs
    items = [
        (f"shot {i % 5}".encode() * 300, "jpeg" if i % 3 == 0 else "png") for i in range(12)
    ]  # repeats: the same screen twice in an episode
    shas = blobs.put_many(items)
    assert shas == [hashlib.sha256(data).hexdigest() for data, _ in items]
    for sha, (data, ext) in zip(shas, items):
        assert blobs.get(sha, ext) == data
    on_disk = sorted(p.name for p in (tmp_path / "blobs").rglob("*") if p.is_file())
    assert on_disk == sorted({f"{sha}.{ext}" for sha, (_, ext) in zip(shas, items)})
    assert blobs.put_many(items) == shas  # again: nothing to do, same answer
    assert blobs.put_many([]) == []


def test_put_many_names_where_it_could_not_write_and_writes_the_others(tmp_path):
    blobs = RawStore(tmp_path).blobs
    good, bad = b"good bytes", b"bad bytes"
    bad_sha = hashlib.sha256(bad).hexdigest()
    (tmp_path / "blobs").mkdir()
    (tmp_path / "blobs" / bad_sha[:2]).write_bytes(b"")  # a file where its folder goes
    with pytest.raises(OSError) as err:
        blobs.put_many([(good, "png"), (bad, "png")])
    assert bad_sha[:2] in str(err.value)
    assert blobs.get(hashlib.sha256(good).hexdigest()) == good
    assert not list((tmp_path / "blobs").rglob("*.tmp"))
