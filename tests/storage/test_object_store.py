"""The raw store on an S3-compatible server (moto, tests/s3_server.py): commit marker
last, readers see whole parts only, ids claimed once across writer processes."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq

from tests.storage.records import make_traj, png
from trajforge.store.consolidate import consolidate
from trajforge.store.object_store import ObjectRawStore, open_raw_store
from trajforge.store.raw import RawStore

ROOT = Path(__file__).resolve().parents[2]


def test_url_gives_the_object_store_and_a_path_the_local_one(s3_server, tmp_path):
    assert type(open_raw_store(tmp_path)) is RawStore
    assert type(open_raw_store(f"file://{tmp_path}")) is RawStore
    assert isinstance(
        open_raw_store(s3_server.url(), storage_options=s3_server.storage_options), ObjectRawStore
    )


def test_round_trip_resume_and_consolidate(s3_store, s3_server, tmp_path):
    with s3_store.writer("web/notes", batch_size=2) as w:
        for i in range(5):
            assert w.add(*make_traj(s3_store, f"a{i}", seed=i))
    # A fresh store object (another node) sees three committed parts and every blob.
    again = open_raw_store(s3_store.url, storage_options=s3_server.storage_options)
    assert again.collections() == ["web/notes"]
    assert len(again.commits("web/notes")) == 3
    assert again.committed_ids() == {f"a{i}" for i in range(5)}
    steps = list(again.iter_steps())
    assert len(steps) == 15
    assert again.blobs.get(steps[0].screenshot) == png(0)
    # Resume: committed ids are skipped, nothing new is written.
    with again.writer("web/notes") as w2:
        assert not w2.add(*make_traj(again, "a3", seed=3))
    assert len(again.commits("web/notes")) == 3
    res = consolidate(again, tmp_path / "raw_steps")
    assert (res.trajectories, res.steps, res.quarantined) == (5, 15, 0)
    assert pq.read_table(tmp_path / "raw_steps" / "steps.parquet").num_rows == 15


def test_blob_put_is_idempotent(s3_store):
    sha = s3_store.blobs.put(png(7))
    assert s3_store.blobs.put(png(7)) == sha
    assert s3_store.blobs.put_many([(png(7), "png"), (png(8), "png")])[0] == sha
    assert len(s3_store.fs.find(s3_store.blobs.root)) == 2


def test_a_part_without_its_marker_is_not_read(s3_store):
    with s3_store.writer("c", batch_size=2) as w:
        for i in range(2):
            w.add(*make_traj(s3_store, f"k{i}", seed=i))
    fs, folder = s3_store.fs, f"{s3_store.root}/c"
    # A writer that died after its tables, before its marker: its objects are ignored.
    for name in fs.ls(folder, detail=False):
        if name.endswith(".parquet"):
            fs.pipe_file(name.replace("part-000000", "part-000001-dead"), fs.cat_file(name))
    assert len(s3_store.step_files("c")) == 1
    assert s3_store.committed_ids("c") == {"k0", "k1"}


def test_two_writer_processes_never_claim_the_same_id(s3_server):
    url = s3_server.url("race")
    env = {**os.environ, **s3_server.env, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.storage.race_writer", url, "16", str(seed)],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for seed in (1, 2)
    ]
    for p in procs:  # both set up before either starts
        assert p.stdout.readline().strip() == "ready", p.stderr.read()[-2000:]
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=90)
        assert p.returncode == 0, err[-2000:]
        outs.append(json.loads(out.strip().splitlines()[-1]))
    a, b = (set(o["added"]) for o in outs)
    assert not a & b, f"both writers committed {sorted(a & b)}"
    assert a | b == {f"task-{i:03d}" for i in range(16)}
    assert a and b, "one writer did everything: the race did not happen"
    store = open_raw_store(url, storage_options=s3_server.storage_options)
    tids = [t.trajectory_id for t in store.iter_trajectories("race")]
    assert sorted(tids) == sorted(a | b)  # each id stored once
