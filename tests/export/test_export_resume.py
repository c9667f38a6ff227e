"""A killed export resumes from its last journaled shard: same bytes, no duplicates."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.export.shard_fixtures import build_store
from trajforge.publish.export import export_shards
from trajforge.publish.plan import split_of
from trajforge.publish.resume import STAGING_PREFIX
from trajforge.publish.shards import iter_samples, read_manifest, sample_key, verify
from trajforge.publish.writer import JOURNAL

ROOT = Path(__file__).resolve().parents[2]
SPLITS = (("train", 0.6), ("val", 0.2), ("test", 0.2))
# Small shards (trajectories of 2-5 steps straddle them) and a resize, so that
# resumed shards must also match re-encoded images byte for byte.
OPTIONS = dict(dataset="demo", splits=SPLITS, max_samples_per_shard=2, resolution="448")

# Runs the export in a child process. mode "slow": sleep after each trajectory
# (the test kills it from outside); mode "self": SIGKILL itself after trajectory n.
CHILD = """
import os, signal, sys, time
from pathlib import Path
from trajforge.publish.export import export_shards
from trajforge.store.raw import RawStore
root, out, mode, arg, options = sys.argv[1:6]
done = 0
def progress(_):
    global done
    done += 1
    if mode == "slow":
        time.sleep(float(arg))
    elif done == int(arg):
        os.kill(os.getpid(), signal.SIGKILL)
options = eval(options)
export_shards(RawStore(Path(root)), Path(out), progress=progress, **options)
"""


def _child(root: Path, out: Path, mode: str, arg) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(root), str(out), mode, str(arg), repr(OPTIONS)], cwd=ROOT, env=env
    )


def _journal(out: Path) -> tuple[Path, list[dict]]:
    staging = [p for p in out.glob(f"{STAGING_PREFIX}*")]
    if len(staging) != 1 or not (staging[0] / JOURNAL).exists():
        return None, []
    lines = (staging[0] / JOURNAL).read_text().splitlines()
    return staging[0], [json.loads(line) for line in lines]


def _files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def _kill_self(root: Path, out: Path, after: int) -> tuple[Path, list[dict]]:
    child = _child(root, out, "self", after)
    assert child.wait(timeout=60) == -signal.SIGKILL
    assert not (out / "manifest.json").exists()
    return _journal(out)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return build_store(tmp_path_factory.mktemp("raw"))


@pytest.fixture(scope="module")
def reference(store, tmp_path_factory) -> Path:
    """An uninterrupted export of the same store."""
    out = tmp_path_factory.mktemp("ref")
    result = export_shards(store.store, out, **OPTIONS)
    assert result.resumed_shards == 0 and result.samples == 42 and result.shards > 12
    return out


def test_sigkill_halfway_then_resume_gives_the_same_shards(store, reference, tmp_path):
    out = tmp_path / "out"
    child = _child(store.root, out, "slow", 0.15)
    deadline = time.monotonic() + 60
    try:
        while len(_journal(out)[1]) < 4:  # poll: at least 4 shards are durable
            assert child.poll() is None, "the export finished before it could be killed"
            assert time.monotonic() < deadline
            time.sleep(0.02)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    staging, journaled = _journal(out)
    total = len(read_manifest(reference)["shards"])
    assert 4 <= len(journaled) < total and not (out / "manifest.json").exists()

    result = export_shards(store.store, out, **OPTIONS)
    assert result.resumed_shards == len(journaled)
    assert _files(out) == _files(reference)  # every shard, manifest, quarantine; no staging left
    keys = [k for k, _ in iter_samples(out)]
    assert len(keys) == len(set(keys)) == 42 and verify(out) == []


def test_damaged_staging_is_checked_and_rewritten(store, reference, tmp_path):
    out = tmp_path / "out"
    staging, journaled = _kill_self(store.root, out, after=8)
    assert len(journaled) >= 4
    # Some split's last durable shard ends inside a trajectory: resume mid-trajectory.
    ends = {sample_key(t, len(steps) - 1) for t, steps in store.steps.items()}
    lasts = {e["split"]: e for e in journaled}
    assert any(e["last_key"] not in ends for e in lasts.values()), lasts
    # Flip a byte in the second shard of one split; a torn journal line; a stray file.
    split = journaled[0]["split"]
    mine = [e for e in journaled if e["split"] == split]
    victim = staging / (mine[1] if len(mine) > 1 else mine[0])["name"]
    data = bytearray(victim.read_bytes())
    data[700] ^= 0xFF
    victim.write_bytes(bytes(data))
    with open(staging / JOURNAL, "a") as f:
        f.write('{"name": "train-0000')
    (staging / "stray.tar").write_bytes(b"junk")

    result = export_shards(store.store, out, **OPTIONS)
    kept_of_split = 1 if len(mine) > 1 else 0
    assert result.resumed_shards == len(journaled) - len(mine) + kept_of_split
    assert _files(out) == _files(reference)


def test_a_changed_option_or_input_starts_over(tmp_path):
    b = build_store(tmp_path / "raw", n_traj=8)
    out = tmp_path / "out"
    staging, journaled = _kill_self(b.root, out, after=4)
    assert journaled
    shutil.copytree(staging, tmp_path / "kept")  # to try the same staging twice
    # Other options name another staging folder; the killed run's one is stale.
    other = export_shards(b.store, out, **dict(OPTIONS, resolution="native"))
    assert other.resumed_shards == 0 and not staging.exists()

    shutil.copytree(tmp_path / "kept", staging)
    # A new trajectory committed since the kill: the inputs differ.
    tid = next(iter(b.trajectories))
    with b.store.writer("web") as w:
        traj = b.trajectories[tid].model_copy(update={"trajectory_id": "new-one"})
        w.add(traj, [s.model_copy(update={"trajectory_id": "new-one"}) for s in b.steps[tid]])
    result = export_shards(b.store, out, **OPTIONS)
    assert result.resumed_shards == 0 and not staging.exists()
    fresh = export_shards(b.store, tmp_path / "fresh", **OPTIONS)
    assert _files(out) == _files(tmp_path / "fresh")
    assert result.samples == fresh.samples == b.num_steps + len(b.steps[tid])


def test_a_resume_that_does_not_line_up_starts_over(tmp_path):
    """A screenshot that cannot be decoded is quarantined when it is resized; a
    resumed run does not resize what it skips, counts differently, notices at
    the end of the kept shards and starts over instead of leaving a gap."""
    b = build_store(tmp_path / "raw", n_traj=8)
    # The first trajectory of train, so that the kept train shards come after it.
    bad = next(t for t in sorted(b.trajectories) if split_of(t, list(SPLITS), "v1") == "train")
    for step in b.steps[bad]:
        b.store.blobs.path(step.screenshot, step.image_format).write_bytes(b"not an image")
    out = tmp_path / "out"
    _, journaled = _kill_self(b.root, out, after=6)
    assert len(journaled) >= 3
    result = export_shards(b.store, out, **OPTIONS)
    fresh = export_shards(b.store, tmp_path / "fresh", **OPTIONS)
    assert result.resumed_shards == 0 and result.skipped == fresh.skipped == {"bad_screenshot": 1}
    assert _files(out) == _files(tmp_path / "fresh")
    quarantined = json.loads((out / "quarantine.jsonl").read_text())
    assert quarantined["trajectory_id"] == bad and "cannot decode" in quarantined["detail"]
