"""Uncommitting trajectories: readers see the replacement only, never two records of an id."""

from __future__ import annotations

from collections import Counter

import duckdb
import pytest

from tests.store.test_store import make_traj
from trajforge.store.raw import RawStore


def _error(store, tid, n):
    traj, steps = make_traj(store, tid, n=n)
    return traj.model_copy(
        update={"outcome": "error", "verified_by": "none", "error": "WaitForTimeout"}
    ), steps


def _ids_in_files(store, collection):
    """What a reader of the Parquet files (DuckDB) sees, not only the store's own readers."""
    files = [str(f) for f in store.trajectory_files(collection)]
    steps = [str(f) for f in store.step_files(collection)]
    trajs = duckdb.sql(f"SELECT trajectory_id FROM read_parquet({files})").fetchall()
    step_ids = duckdb.sql(f"SELECT trajectory_id FROM read_parquet({steps})").fetchall()
    return Counter(t for (t,) in trajs), Counter(t for (t,) in step_ids)


def test_errored_records_are_replaced_under_the_same_ids(tmp_path):
    store = RawStore(tmp_path)
    with store.writer("env/notes", batch_size=3) as w:
        w.add(*make_traj(store, "ok", n=2))
        w.add(*_error(store, "crashed", n=0))  # out of retries: no steps
        w.add(*_error(store, "verifier", n=2))  # a verifier error: its steps are stored
        w.add(*_error(store, "alone", n=0))  # a part of errors only
    folder = tmp_path / "env/notes"
    assert len(list(folder.glob("*.trajectories.parquet"))) == 2
    assert store.errored_ids("env/notes") == {"crashed", "verifier", "alone"}

    assert store.uncommit("env/notes", {"crashed", "verifier", "alone", "never-stored"}) == 3
    assert [t.trajectory_id for t in store.iter_trajectories("env/notes")] == ["ok"]
    assert {s.trajectory_id for s in store.iter_steps("env/notes")} == {"ok"}
    assert sorted(p.name for p in folder.iterdir() if not p.name.startswith(".")) == [
        "part-000000.steps.parquet",
        "part-000000.trajectories.parquet",
    ]

    with store.writer("env/notes") as w:  # the re-run records them again
        for tid in ("crashed", "verifier", "alone"):
            assert w.add(*make_traj(store, tid, n=2))
    trajs = {t.trajectory_id: t.outcome for t in store.iter_trajectories("env/notes")}
    assert trajs == dict.fromkeys(["ok", "crashed", "verifier", "alone"], "success")
    traj_ids, step_ids = _ids_in_files(store, "env/notes")
    assert set(traj_ids.values()) == {1}  # no id twice
    assert step_ids == dict.fromkeys(["ok", "crashed", "verifier", "alone"], 2)
    assert store.errored_ids("env/notes") == set() and store.uncommit("env/notes", []) == 0


def test_an_object_store_refuses_clearly():
    from trajforge.store.object_store import ObjectRawStore

    store = ObjectRawStore.__new__(ObjectRawStore)
    store.protocol, store.root = "s3", "bucket/raw"
    with pytest.raises(NotImplementedError, match="s3://bucket/raw: .* local raw store only"):
        store.uncommit("env/notes", {"x"})
