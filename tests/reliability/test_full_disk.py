"""Fault: the disk fills up while the raw store or the shard export is writing.

The disk is a small tmpfs mounted for the test (we run as root); where mount
is refused, the same writes run in a child process under RLIMIT_FSIZE, which
fails a file past the limit with EFBIG instead of ENOSPC. Either way the
writer must raise an OSError naming the path, leave no half-written file
visible, keep what it committed readable, and a re-run once space is back
must complete without a duplicate.
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from schemas.actions import Action
from schemas.records import DeviceProfile, Step, Task, Trajectory
from trajforge.publish import shards
from trajforge.publish.export import export_shards
from trajforge.store.raw import RawStore

from .conftest import blob_files_intact, check_store_whole

ROOT = Path(__file__).resolve().parents[2]
N_TRAJ, STEPS = 12, 2
DISK = 4 << 20  # tmpfs size: room for everything once the filler is gone
FSIZE_LIMIT = 64 << 10  # per-file limit of the fallback
COLLECTION = "web/disk"


def noise_png(side: int, seed: int) -> bytes:
    """Incompressible screenshots: trajectory i's are (24 * (i + 1))^2 pixels."""
    pixels = np.random.default_rng(seed).integers(0, 256, (side, side, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


def trajectories(n: int = N_TRAJ, first: int = 0):
    """(trajectory, steps, screenshots) of growing size, fixed by their index."""
    for i in range(first, first + n):
        tid = f"disk{i:03d}"
        side = 24 * (i + 1)
        images = [noise_png(side, 100 * i + j) for j in range(STEPS)]
        steps = [
            Step(
                trajectory_id=tid,
                index=j,
                screenshot=hashlib.sha256(img).hexdigest(),
                width=side,
                height=side,
                url="http://x/",
                action=Action.tap(0.5, 0.5) if j < STEPS - 1 else Action(type="done"),
            )
            for j, img in enumerate(images)
        ]
        task = Task(task_id=f"t{i}", instruction=f"task {i}", language="en", app="shop")
        traj = Trajectory(
            trajectory_id=tid,
            task=task,
            platform="web",
            app="shop",
            device=DeviceProfile(viewport_width=side, viewport_height=side),
            policy="oracle",
            outcome="success",
            verified_by="state",
            num_steps=STEPS,
        )
        yield traj, steps, images


def write_all(root: str, first: int = 0, n: int = N_TRAJ) -> str | None:
    """Write trajectories as the crawl does (blobs first, then the whole trajectory);
    the OSError's errno and message, or None when everything was written."""
    store = RawStore(Path(root))
    try:
        with store.writer(COLLECTION, batch_size=2) as writer:
            for traj, steps, images in trajectories(n, first):
                for img in images:
                    store.blobs.put(img, "png")
                writer.add(traj, steps)
    except OSError as exc:
        return f"{exc.errno} {exc}"
    return None


def export_all(store_root: str, out_dir: str) -> str | None:
    try:
        export_shards(RawStore(Path(store_root)), Path(out_dir), dataset="disk", max_samples_per_shard=4)
    except OSError as exc:
        return f"{exc.errno} {exc}"
    return None


class SmallDisk:
    """A folder where writes run out of space: a tmpfs, else a file-size rlimit."""

    def __init__(self, path: Path):
        self.path = path
        path.mkdir()
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={DISK}", "tmpfs", str(path)], capture_output=True, text=True
        )
        self.tmpfs = done.returncode == 0
        self.errno = errno.ENOSPC if self.tmpfs else errno.EFBIG
        self.filler = path / "filler"

    def fill(self, leave: int) -> None:
        """Take all the free space but `leave` bytes (tmpfs only)."""
        if self.tmpfs:
            self.free()
            st = os.statvfs(self.path)
            size = max(st.f_bavail * st.f_frsize - leave, 0)
            with open(self.filler, "wb") as f:
                f.write(b"\0" * size)

    def free(self) -> None:
        self.filler.unlink(missing_ok=True)

    def run_full(self, func, *args) -> str | None:
        """func(*args) while the disk is full: in-process on tmpfs, else in a child
        process whose files may not grow past FSIZE_LIMIT."""
        if self.tmpfs:
            return func(*args)
        code = (
            "import resource, signal, sys; "
            "signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
            f"resource.setrlimit(resource.RLIMIT_FSIZE, ({FSIZE_LIMIT}, {FSIZE_LIMIT})); "
            "from tests.reliability.test_full_disk import *; "
            f"print(json.dumps({func.__name__}(*{list(args)!r})))"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
        )
        assert out.returncode == 0, out.stderr[-2000:]
        return json.loads(out.stdout.strip().splitlines()[-1])

    def unmount(self) -> None:
        if self.tmpfs:
            subprocess.run(["umount", str(self.path)], check=True)


@pytest.fixture
def disk(tmp_path):
    d = SmallDisk(tmp_path / "disk")
    try:
        yield d
    finally:
        d.unmount()


def test_raw_store_on_a_full_disk_fails_cleanly_and_resumes(disk):
    root = disk.path / "raw"
    disk.fill(leave=400_000)
    error = disk.run_full(write_all, str(root))
    # A clear error: the errno of a full disk (or file too big) and the file it was writing.
    assert error is not None and error.startswith(f"{disk.errno} ") and str(root) in error
    store = RawStore(root)
    committed, _ = check_store_whole(store, COLLECTION)
    assert 0 < len(committed) < N_TRAJ, "the disk should fill part-way"
    blob_files_intact(store)  # no torn screenshot under its final name

    disk.free()  # space is back: the same crawl re-run completes, skipping what is stored
    assert write_all(str(root)) is None
    trajs, steps = check_store_whole(store, COLLECTION)
    assert sorted(t.trajectory_id for t in trajs) == [f"disk{i:03d}" for i in range(N_TRAJ)]
    assert len(steps) == N_TRAJ * STEPS
    assert blob_files_intact(store) == N_TRAJ * STEPS


def test_shard_export_on_a_full_disk_keeps_the_previous_export(disk, tmp_path):
    store_root, out = tmp_path / "raw", disk.path / "shards"
    assert write_all(str(store_root), 0, 6) is None

    # 1. No previous export: a failed run leaves nothing that looks like shards.
    disk.fill(leave=150_000)
    error = disk.run_full(export_all, str(store_root), str(out))
    assert error is not None and error.startswith(f"{disk.errno} ") and str(out) in error
    assert not (out / shards.MANIFEST).exists()
    assert not [p for p in out.rglob("*") if p.suffix in (".tar", ".tmp") or p.name.startswith(".")], (
        "half-written shards left behind"
    )
    disk.free()
    assert export_all(str(store_root), str(out)) is None
    assert shards.verify(out) == []
    first_manifest = (out / shards.MANIFEST).read_bytes()

    # 2. More data, disk full again: the failed export leaves the first one whole.
    assert write_all(str(store_root), 6, 6) is None
    disk.fill(leave=150_000)
    error = disk.run_full(export_all, str(store_root), str(out))
    assert error is not None and error.startswith(f"{disk.errno} ")
    assert (out / shards.MANIFEST).read_bytes() == first_manifest and shards.verify(out) == []
    assert len(list(shards.iter_samples(out, images=False))) == 6 * STEPS

    disk.free()
    assert export_all(str(store_root), str(out)) is None
    assert shards.verify(out) == []
    keys = [k for k, _ in shards.iter_samples(out, images=False)]
    assert len(keys) == len(set(keys)) == N_TRAJ * STEPS
    assert {k.split("_s")[0] for k in keys} == {f"disk{i:03d}" for i in range(N_TRAJ)}
