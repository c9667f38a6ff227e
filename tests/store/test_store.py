"""The raw store: whole trajectories, atomic batches, resumable, validated on consolidation."""

import hashlib
import io
import json
import threading

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from schemas.actions import Action
from schemas.records import DeviceProfile, Step, Task, Trajectory
from trajforge.store.consolidate import consolidate
from trajforge.store.raw import RawStore, atomic_write_table


def _png(seed: int) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (64, 40), (seed % 255, 10, 20)).save(buf, format="PNG")
    return buf.getvalue()


def make_traj(store: RawStore, tid: str, n: int = 3, lang: str = "en"):
    task = Task(
        task_id=f"t-{tid}", instruction="do it" if lang == "en" else "去做", language=lang, app="notes"
    )
    steps = []
    for i in range(n):
        sha = store.blobs.put(_png(hash((tid, i)) % 1000), "png")
        act = Action.tap(0.5, 0.5) if i < n - 1 else Action(type="done")
        steps.append(Step(trajectory_id=tid, index=i, screenshot=sha, width=64, height=40, action=act))
    traj = Trajectory(
        trajectory_id=tid,
        task=task,
        platform="web",
        app="notes",
        device=DeviceProfile(viewport_width=64, viewport_height=40),
        policy="oracle",
        outcome="success",
        verified_by="state",
        num_steps=n,
    )
    return traj, steps


def test_blobs_are_content_addressed_and_idempotent(tmp_path):
    store = RawStore(tmp_path)
    data = _png(1)
    sha = store.blobs.put(data)
    assert sha == hashlib.sha256(data).hexdigest()
    assert store.blobs.put(data) == sha
    assert store.blobs.get(sha) == data
    assert len(list((tmp_path / "blobs").rglob("*.png"))) == 1


def test_writer_commits_batches_and_skips_committed_ids(tmp_path):
    store = RawStore(tmp_path)
    with store.writer("web/notes", batch_size=2) as w:
        for i in range(5):
            assert w.add(*make_traj(store, f"a{i}"))
    assert len(list((tmp_path / "web/notes").glob("*.trajectories.parquet"))) == 3
    assert store.committed_ids() == {f"a{i}" for i in range(5)}
    with store.writer("web/notes") as w:  # a resumed run
        assert not w.add(*make_traj(store, "a3"))
        assert w.add(*make_traj(store, "b0"))
    assert sorted(t.trajectory_id for t in store.iter_trajectories()) == [*(f"a{i}" for i in range(5)), "b0"]
    assert sum(1 for _ in store.iter_steps()) == 18


def test_writer_refuses_a_half_trajectory(tmp_path):
    store = RawStore(tmp_path)
    traj, steps = make_traj(store, "x", n=3)
    with pytest.raises(ValueError, match="num_steps=3 but 2"):
        store.writer("web/notes").add(traj, steps[:2])


def test_interrupted_batch_is_invisible_and_cleaned(tmp_path):
    store = RawStore(tmp_path)
    with store.writer("web/notes") as w:
        w.add(*make_traj(store, "ok"))
    # A batch killed between its two renames: the steps file without its commit.
    folder = tmp_path / "web/notes"
    (folder / "part-000001.steps.parquet").write_bytes((folder / "part-000000.steps.parquet").read_bytes())
    assert sum(1 for _ in store.iter_steps()) == 3
    store.writer("web/notes")  # opening a writer removes the orphan
    assert not (folder / "part-000001.steps.parquet").exists()


def test_writers_sharing_a_collection_lose_no_commit(tmp_path):
    # One writer per thread on one collection, as `trajforge serve` has one per session:
    # each flush numbers its part under the folder's lock, so no commit replaces another.
    store = RawStore(tmp_path)
    made = [[make_traj(store, f"w{w}-{i}", n=1) for i in range(12)] for w in range(4)]
    start = threading.Barrier(4)

    def write(batch) -> None:
        writer = store.writer("gym/shared", batch_size=1)
        start.wait()
        for traj, steps in batch:
            assert writer.add(traj, steps)
        writer.close()

    threads = [threading.Thread(target=write, args=(batch,)) for batch in made]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ids = {traj.trajectory_id for batch in made for traj, _ in batch}
    assert {t.trajectory_id for t in store.iter_trajectories("gym/shared")} == ids
    assert sum(1 for _ in store.iter_steps("gym/shared")) == len(ids)
    assert len(list((tmp_path / "gym/shared").glob("part-*.trajectories.parquet"))) == len(ids)


def test_consolidate_counts_and_quarantines_with_location(tmp_path):
    store = RawStore(tmp_path / "raw")
    with store.writer("web/notes") as w:
        w.add(*make_traj(store, "a", lang="en"))
        w.add(*make_traj(store, "b", n=4, lang="zh"))
    # Plant a bad row: a coordinate outside [0, 1] written behind the schema's back.
    f = next((tmp_path / "raw/web/notes").glob("*.steps.parquet"))
    rows = pq.read_table(f).to_pylist()
    rows[1]["action"]["x"] = 1.7
    atomic_write_table(f, pa.Table.from_pylist(rows, schema=pq.read_schema(f)))

    res = consolidate(store, tmp_path / "out")
    assert res.trajectories == 2 and res.steps == 6 and res.quarantined == 2
    assert res.languages == {"en": 1, "zh": 1}
    q = [json.loads(l) for l in (tmp_path / "out/quarantine.jsonl").read_text().splitlines()]
    assert "action.x" in q[0]["error"] and str(f) in q[0]["error"] and "a#1" in q[0]["error"]
    assert "num_steps=3 but 2 steps stored" in q[1]["error"]
    assert pq.read_metadata(tmp_path / "out/steps.parquet").num_rows == 6


def test_writers_of_one_collection_in_parallel_lose_nothing(tmp_path):
    """Several writers on one collection at once (the environment server's sessions, a
    rollout loop's threads: each Gym env has its own writer) commit every trajectory:
    parts are numbered one writer at a time, and no writer's start cleans away the batch
    another is committing."""

    store = RawStore(tmp_path)
    made = {f"w{k}-{i}": make_traj(store, f"w{k}-{i}", n=1) for k in range(4) for i in range(6)}
    start = threading.Barrier(4)

    def write(k: int) -> None:
        start.wait()
        for i in range(6):
            # A writer per episode, as a server session's env opens and closes its own.
            w = store.writer("gym/tiny", batch_size=1)
            w.add(*made[f"w{k}-{i}"])
            w.close()

    threads = [threading.Thread(target=write, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got = sorted(t.trajectory_id for t in store.iter_trajectories("gym/tiny"))
    assert got == sorted(made)
    assert len(list((tmp_path / "gym/tiny").glob("part-*.steps.parquet"))) == len(made)
