"""The S3 server stops (SIGSTOP: moto keeps its in-memory state) during writes:
the writes retry and land, or fail with an error naming the part; never a marker
without its tables, and a reader sees whole parts or none."""

import threading
import time

import pytest

from tests.storage.records import make_traj
from trajforge.store.object_store import ObjectStoreError, open_raw_store


@pytest.fixture
def impatient(s3_server):
    """Storage options that give up on a silent server after 1 s (the retries wait on)."""
    opts = dict(s3_server.storage_options)
    opts["config_kwargs"] = {"connect_timeout": 1, "read_timeout": 1, "retries": {"max_attempts": 1}}
    return opts


def _outage(server, after_s: float, for_s: float) -> threading.Thread:
    def run():
        time.sleep(after_s)
        server.pause()
        try:
            time.sleep(for_s)
        finally:
            server.resume()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def _assert_whole_parts(store, collection, expected_ids):
    """Every committed part reads whole: its two tables, the marker's row counts."""
    for m in store.commits(collection):
        folder = f"{store.root}/{collection}"
        steps = store.read_table(f"{folder}/{m['steps']}")
        trajs = store.read_table(f"{folder}/{m['trajectories']}")
        assert (steps.num_rows, trajs.num_rows) == (m["num_steps"], m["num_trajectories"])
    tids = [t.trajectory_id for t in store.iter_trajectories(collection)]
    assert sorted(tids) == sorted(expected_ids) and len(set(tids)) == len(tids)


def test_writes_retry_through_a_short_outage(s3_server, impatient):
    store = open_raw_store(s3_server.url("outage"), storage_options=impatient, timeout=2)
    records = [make_traj(store, f"o{i}", n=2, seed=100 + i) for i in range(6)]
    outage = _outage(s3_server, after_s=0.2, for_s=2.5)
    t0 = time.monotonic()
    with store.writer("c", batch_size=2) as w:
        for r in records:
            assert w.add(*r)
    outage.join()
    assert time.monotonic() - t0 >= 2.5, "the writes did not meet the outage"
    assert w.written == 6
    _assert_whole_parts(store, "c", [f"o{i}" for i in range(6)])


def test_a_long_outage_fails_naming_the_part_and_commits_nothing_half(s3_server, impatient):
    store = open_raw_store(s3_server.url("outage"), storage_options=impatient, attempts=2, timeout=2)
    w = store.writer("c", batch_size=100)
    for i in range(4):
        assert w.add(*make_traj(store, f"p{i}", n=2, seed=200 + i))
    s3_server.pause()
    try:
        with pytest.raises(ObjectStoreError, match=r"part s3://.*/c/part-000000-.*failed after 2"):
            w.flush()
    finally:
        s3_server.resume()
    # Whatever landed late, a marker only ever names whole tables.
    _assert_whole_parts(store, "c", store.committed_ids("c"))
    w.flush()  # the batch stayed buffered: now it commits, once
    _assert_whole_parts(store, "c", [f"p{i}" for i in range(4)])
