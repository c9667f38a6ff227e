"""The raw store: Parquet tables (a row per step) and content-addressed blobs.

Layout under a root (normally $TRAJFORGE_DATA/raw):

    blobs/<sha[:2]>/<sha>.<ext>                       screenshots, by sha256
    <collection>/part-<n>.steps.parquet               steps of a batch of trajectories
    <collection>/part-<n>.trajectories.parquet        their trajectory rows (the commit)

A batch is committed when its trajectories file exists: it is renamed into
place after the steps file, so a reader never sees half a batch, and a steps
file without its trajectories file is an interrupted write that the next
writer removes. Trajectory ids are stable, so a resumed crawl skips what is
committed and never writes a duplicate. To record an id again (an errored
episode played once more), `uncommit` takes it out first.

Writers of one collection may run at once (threads or processes: every Gym
environment and server session records through its own): each numbers and
commits its batch, and cleans up at its start, holding the collection's lock
(`<collection>/.writers.lock`, flock), so no two batches take one number and no
writer removes a batch another is committing.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import tempfile
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from schemas.arrow import TRAJECTORY_SCHEMA, row_to_step, row_to_trajectory, steps_table, trajectories_table
from schemas.records import Step, Trajectory
from trajforge.store.audit import AuditLog
from trajforge.store.parquet_seal import damaged, parquet_bytes, verify

# Threads of BlobStore.put_many (fsync-bound: more than the cores is right).
PUT_THREADS = 8


def model_slug(model_id: str) -> str:
    """A model id made safe as one folder name (a collection per model: rollouts/<slug>)."""
    return re.sub(r"[^A-Za-z0-9._@-]+", "_", model_id).strip("_") or "model"


_PART = re.compile(r"^part-(\d{6})\.(steps|trajectories)\.parquet$")
WRITERS_LOCK = ".writers.lock"


def path_error(path: Path, exc: OSError) -> OSError:
    """The same OSError (errno kept: ENOSPC, EFBIG...) with the path it was writing."""
    if exc.errno is None:
        return OSError(f"cannot write {path}: {exc}")
    return type(exc)(exc.errno, os.strerror(exc.errno), str(path))


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write to a temporary name in the same folder, fsync, then rename.

    On failure (a full disk) the temporary file is removed and the OSError
    names `path`: nothing half-written is ever visible under the final name.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise path_error(path, exc) from exc
        raise


def atomic_write_table(path: Path, table: pa.Table) -> None:
    """Sealed Parquet (parquet_seal: a whole-file sha256 the readers verify)
    through a temporary name, like atomic_write_bytes."""
    atomic_write_bytes(path, parquet_bytes(table))


def _verified_bytes(path: Path) -> pa.BufferReader:
    data = path.read_bytes()  # FileNotFoundError stays itself: a part removed under us
    verify(data, str(path))
    return pa.BufferReader(data)


def _read_table(path: Path, **kw) -> pa.Table:
    source = _verified_bytes(path)
    try:
        return pq.read_table(source, page_checksum_verification=True, **kw)
    except (pa.ArrowException, OSError) as exc:
        raise damaged(str(path), str(exc)) from exc


def _iter_batches(path: Path, batch_size: int) -> Iterator[pa.RecordBatch]:
    source = _verified_bytes(path)  # parts are batch-sized: whole in memory is fine
    try:
        yield from pq.ParquetFile(source, page_checksum_verification=True).iter_batches(batch_size=batch_size)
    except (pa.ArrowException, OSError) as exc:
        raise damaged(str(path), str(exc)) from exc


def _rows(path: Path, data: pa.Table | pa.RecordBatch) -> list[dict]:
    try:  # a damaged page can hold bytes that are not UTF-8
        return data.to_pylist()
    except (pa.ArrowException, UnicodeDecodeError) as exc:
        raise damaged(str(path), str(exc)) from exc


class BlobStore:
    """Content-addressed files: the name is the sha256 of the bytes."""

    def __init__(self, root: Path):
        self.root = Path(root)

    # `ext` is the step's image_format ("png", "jpeg", "webp"), used as is.
    def path(self, sha: str, ext: str = "png") -> Path:
        return self.root / sha[:2] / f"{sha}.{ext}"

    def put(self, data: bytes, ext: str = "png") -> str:
        sha = hashlib.sha256(data).hexdigest()
        self._write(sha, ext, data)
        return sha

    def _write(self, sha: str, ext: str, data: bytes) -> None:
        p = self.path(sha, ext)
        if not p.exists():  # same name means same bytes: nothing to do
            atomic_write_bytes(p, data)

    def put_many(self, items: Iterable[tuple[bytes, str]], threads: int = PUT_THREADS) -> list[str]:
        """put() of each (bytes, ext), on a thread pool; the shas in order.

        Why threads: a put is mostly fsync, which lets go of the GIL, and the
        disk commits concurrent fsyncs together (8 threads: 5.6x one,
        benchmarks/raw_store_scale.py). Every blob is fsync'd and renamed
        into place before this returns, so a commit written after it never
        names a blob that is not on disk. On an error (a full disk) the first
        one is raised after the other writes have finished.
        """
        items = list(items)
        if len(items) <= 1 or threads <= 1:
            return [self.put(data, ext) for data, ext in items]
        with ThreadPoolExecutor(min(threads, len(items)), thread_name_prefix="blob-put") as pool:
            shas = list(pool.map(lambda it: hashlib.sha256(it[0]).hexdigest(), items))
            unique: dict[tuple[str, str], bytes] = {}  # a screen seen twice is written once
            for sha, (data, ext) in zip(shas, items):
                unique.setdefault((sha, ext), data)
            futures = [pool.submit(self._write, sha, ext, data) for (sha, ext), data in unique.items()]
            for f in futures:  # raising leaves the `with`, which waits for the rest
                f.result()
        return shas

    def get(self, sha: str, ext: str = "png") -> bytes:
        return self.path(sha, ext).read_bytes()

    def exists(self, sha: str, ext: str = "png") -> bool:
        return self.path(sha, ext).exists()


class RawStore:
    """The store under a local folder (or a file:// URL). On an fsspec URL such as
    s3://bucket/prefix it is an ObjectRawStore: `open_raw_store` (object_store.py)
    gives the one a root names."""

    def __init__(self, root: Path):
        if isinstance(root, str) and root.startswith("file://"):
            root = root[len("file://") :]
        self.root = Path(root)
        self.blobs = BlobStore(self.root / "blobs")

    def audit_log(self, collection: str):
        """The guard's audit log of a crawl into `collection` (<root>/audit/<collection>.jsonl)."""
        return AuditLog(self.root / "audit" / f"{collection}.jsonl")

    def read_table(self, path, **kw) -> pa.Table:
        """A committed part's table, page checksums verified (SchemaError if damaged)."""
        return _read_table(path, **kw)

    def iter_batches(self, path, batch_size: int) -> Iterator[pa.RecordBatch]:
        return _iter_batches(path, batch_size)

    # -- reading -------------------------------------------------------------
    def collections(self) -> list[str]:
        """Every collection (a folder holding committed parts), sorted."""
        out = set()
        for p in self.root.rglob("part-*.trajectories.parquet"):
            out.add(p.parent.relative_to(self.root).as_posix())
        return sorted(out)

    def _parts(self, collection: str) -> list[tuple[Path, Path]]:
        """(steps, trajectories) file pairs of the committed batches."""
        folder = self.root / collection
        if not folder.is_dir():
            return []
        pairs = []
        for p in sorted(folder.glob("part-*.trajectories.parquet")):
            n = _PART.match(p.name).group(1)
            pairs.append((folder / f"part-{n}.steps.parquet", p))
        return pairs

    def _select(self, collections: str | Iterable[str] | None) -> list[str]:
        if collections is None:
            return self.collections()
        if isinstance(collections, str):
            return [collections]
        return list(collections)

    def trajectory_files(self, collections=None) -> list[Path]:
        return [t for c in self._select(collections) for _, t in self._parts(c)]

    def step_files(self, collections=None) -> list[Path]:
        return [s for c in self._select(collections) for s, _ in self._parts(c)]

    def committed_ids(self, collections=None) -> set[str]:
        ids: set[str] = set()
        for f in self.trajectory_files(collections):
            ids.update(r["trajectory_id"] for r in _rows(f, self.read_table(f, columns=["trajectory_id"])))
        return ids

    def iter_trajectories(self, collections=None) -> Iterator[Trajectory]:
        for f in self.trajectory_files(collections):
            for row in _rows(f, self.read_table(f, schema=TRAJECTORY_SCHEMA)):
                yield row_to_trajectory(row, source=str(f))

    def iter_step_batches(self, collections=None, batch_size: int = 256) -> Iterator[pa.RecordBatch]:
        """Arrow batches of steps, streamed file by file (memory stays flat)."""
        for f in self.step_files(collections):
            yield from self.iter_batches(f, batch_size)

    def iter_steps(self, collections=None) -> Iterator[Step]:
        for f in self.step_files(collections):
            for batch in self.iter_batches(f, 256):
                for row in _rows(f, batch):
                    yield row_to_step(row, source=str(f))

    def writer(self, collection: str, batch_size: int = 16) -> TrajectoryWriter:
        return TrajectoryWriter(self, collection, batch_size)

    # -- replacing -----------------------------------------------------------
    # A crawl stores an episode that ran out of retries as an `error` under its stable
    # id, and a re-run skips every id already committed. To play such a task again
    # (`trajforge crawl --retry-errors`), its error record is uncommitted first, then the
    # crawl records the new episode under the same id: readers see the latest episode
    # only, never two records of one id. A crash after the error records are out and
    # before the new episodes are committed leaves those tasks unstored: the next crawl
    # plays them, as it resumes any crawl. Object storage is not covered (its parts are
    # claimed per id by their writer and committed by a marker that is never rewritten).
    def errored_ids(self, collection: str) -> set[str]:
        """The committed trajectories of `collection` whose outcome is `error`."""
        out: set[str] = set()
        for path in self.trajectory_files(collection):
            table = self.read_table(path, columns=["trajectory_id", "outcome"])
            errored = table.filter(pc.equal(table.column("outcome"), "error"))
            out.update(errored.column("trajectory_id").to_pylist())
        return out

    def uncommit(self, collection: str, ids: Iterable[str]) -> int:
        """Take trajectories (and their steps) out of `collection` so that a writer opened
        afterwards records them again under the same ids; how many went.

        Each file is replaced by an atomic rename. When every trajectory of a part goes,
        its trajectories file (the commit) is removed first, then its steps file. When
        some go, the steps file without their steps is written first (skipped when they
        had none, as an episode out of retries has), then the trajectories file without
        their rows: a crash between the two leaves the part's other trajectories whole
        and an uncommitted one listed without its steps; it is still an `error`, so the
        next `--retry-errors` takes it out again.
        """
        drop = pa.array(sorted(set(ids)), pa.string())
        if len(drop) == 0:
            return 0
        with writers_lock(self.root / collection):  # no writer commits a part while it is rewritten
            return sum(self._uncommit_part(steps, trajs, drop) for steps, trajs in self._parts(collection))

    def _uncommit_part(self, steps_path: Path, trajs_path: Path, drop: pa.Array) -> int:
        trajs = self.read_table(trajs_path)
        gone = pc.is_in(trajs.column("trajectory_id"), value_set=drop)
        n = pc.sum(gone).as_py() or 0
        if n == 0:
            return 0
        if n == trajs.num_rows:
            trajs_path.unlink()  # the part is uncommitted at once
            steps_path.unlink(missing_ok=True)
            return n
        steps = self.read_table(steps_path)
        kept_steps = steps.filter(pc.invert(pc.is_in(steps.column("trajectory_id"), value_set=drop)))
        if kept_steps.num_rows != steps.num_rows:
            atomic_write_table(steps_path, kept_steps)
        atomic_write_table(trajs_path, trajs.filter(pc.invert(gone)))
        return n


@contextmanager
def writers_lock(folder: Path) -> Iterator[None]:
    """A collection's writers' lock (held across threads and processes): taken to number
    and commit a batch, to clean up, and to rewrite parts (uncommit)."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / WRITERS_LOCK, "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


class TrajectoryWriter:
    """Buffers whole trajectories and commits them a batch at a time.

    A trajectory is added only once complete (with all its steps), so no
    trajectory is ever half-written; ids already committed are skipped.
    """

    def __init__(self, store: RawStore, collection: str, batch_size: int = 16):
        self.store = store
        self.collection = collection
        self.folder = store.root / collection
        self.folder.mkdir(parents=True, exist_ok=True)
        self.batch_size = batch_size
        with self._locked():
            self._clean_interrupted()
        self.committed = store.committed_ids(collection)
        self._trajs: list[Trajectory] = []
        self._steps: list[Step] = []
        self._pending: set[str] = set()  # ids of self._trajs (has() is asked per record)
        self.written = 0

    def _locked(self):
        return writers_lock(self.folder)

    def _clean_interrupted(self) -> None:
        for p in self.folder.glob("part-*.steps.parquet"):
            n = _PART.match(p.name).group(1)
            if not (self.folder / f"part-{n}.trajectories.parquet").exists():
                p.unlink()  # a batch killed between its two renames
        for p in self.folder.glob(".part-*.tmp"):
            p.unlink()

    def _next_part(self) -> int:
        nums = [
            int(_PART.match(p.name).group(1))
            for p in self.folder.glob("part-*.parquet")
            if _PART.match(p.name)
        ]
        return max(nums, default=-1) + 1

    def has(self, trajectory_id: str) -> bool:
        return trajectory_id in self.committed or trajectory_id in self._pending

    def add(self, traj: Trajectory, steps: list[Step]) -> bool:
        """Queue a finished trajectory; False if it is already stored."""
        if self.has(traj.trajectory_id):
            return False
        if len(steps) != traj.num_steps:
            raise ValueError(
                f"trajectory {traj.trajectory_id}: num_steps={traj.num_steps} but {len(steps)} steps given"
            )
        self._trajs.append(traj)
        self._pending.add(traj.trajectory_id)
        self._steps.extend(steps)
        if len(self._trajs) >= self.batch_size:
            self.flush()
        return True

    def flush(self) -> None:
        if not self._trajs:
            return
        # Both tables built before either file is written: a value Arrow refuses
        # fails the batch with nothing on disk.
        steps, trajs = steps_table(self._steps), trajectories_table(self._trajs)
        with self._locked():  # one number per batch, even with other writers at work
            n = self._next_part()
            steps_path = self.folder / f"part-{n:06d}.steps.parquet"
            traj_path = self.folder / f"part-{n:06d}.trajectories.parquet"
            atomic_write_table(steps_path, steps)
            try:
                atomic_write_table(traj_path, trajs)  # the commit
            except BaseException:
                # Not committed: drop the batch's steps now rather than at the next
                # writer's start. The batch stays buffered for a later flush.
                steps_path.unlink(missing_ok=True)
                raise
        self.committed.update(t.trajectory_id for t in self._trajs)
        self.written += len(self._trajs)
        self._trajs, self._steps = [], []
        self._pending.clear()

    def close(self) -> None:
        self.flush()

    def __enter__(self) -> TrajectoryWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        # Commit what is complete even when the run fails part-way.
        self.flush()
