"""The raw store and its blobs on object storage (an fsspec URL: s3://bucket/prefix).

`open_raw_store("s3://...")` returns an `ObjectRawStore`; a local path keeps the
local store (trajforge/store/raw.py) as it is. Object storage has no rename, so a
batch is committed by a marker written last instead:

    <root>/blobs/<sha[:2]>/<sha>.<ext>                        put if absent (same name, same bytes)
    <root>/<collection>/part-<n>-<writer>.steps.parquet       unique names: writers never collide
    <root>/<collection>/part-<n>-<writer>.trajectories.parquet
    <root>/<collection>/_commits/part-<n>-<writer>.json       the commit, put after both tables
    <root>/<collection>/_claims/<trajectory id>               who owns an id (conditional put)
    <root>/_collections/<collection>                          so listing never walks the blobs

A reader lists `_commits/` and reads only the parts named there, so it sees a
whole part or none. An id is claimed by a conditional put (`If-None-Match: *`,
atomic on S3, MinIO and moto) of `_claims/<id>` holding the writer's name: of
two writers on two nodes exactly one gets it, the other skips that trajectory.
A claim found holding one's own name is one's own (a retried put whose first
answer was lost, or a writer restarted under the same `writer_id`, which is
how a crashed writer's claimed-but-uncommitted ids are taken back).

Every request is retried with bounded exponential backoff; when the attempts
run out, `ObjectStoreError` names the object and the part, the batch stays
buffered, and no marker has been written, so the store holds no half part.
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar
from urllib.parse import quote, unquote

import pyarrow as pa
import pyarrow.parquet as pq

from schemas.arrow import steps_table, trajectories_table
from schemas.errors import SchemaError
from schemas.records import Step, Trajectory
from trajforge.store.audit import AuditLog
from trajforge.store.parquet_seal import damaged, parquet_bytes, verify
from trajforge.store.raw import BlobStore, RawStore, TrajectoryWriter

T = TypeVar("T")

RETRIES = 6  # attempts per request
BACKOFF_S = 0.25  # first wait; doubles, capped at BACKOFF_MAX_S (about 8 s in all)
BACKOFF_MAX_S = 3.0
# Per request, enforced on the event loop: a stalled server does not always trip
# the client's socket timeouts (a PUT to a stopped server waited for ever).
REQUEST_TIMEOUT_S = 30.0
# Not worth a retry: the answer is the answer.
_FINAL = (FileExistsError, FileNotFoundError, PermissionError, ValueError, TypeError)


class ObjectStoreError(OSError):
    """A request to object storage that failed every attempt (names the object and the part)."""


def is_url(root) -> bool:
    """True for an fsspec URL other than a local file (s3://, gs://, memory://...)."""
    if not isinstance(root, str) or "://" not in root:
        return False
    return root.split("://", 1)[0] not in ("file", "local")


def open_raw_store(root, storage_options: dict | None = None, **options) -> RawStore:
    """The raw store `root` names: an ObjectRawStore on an fsspec URL (`storage_options`
    go to fsspec, `options` are ObjectRawStore's attempts and timeout), else the local
    store under that folder."""
    if is_url(root):
        return ObjectRawStore(root, storage_options, **options)
    return RawStore(root)


def retry(op: Callable[[], T], what: str, attempts: int = RETRIES) -> T:
    """op(), again after a growing pause on a transient error; ObjectStoreError naming `what` at the end."""
    for i in range(attempts):
        try:
            return op()
        except _FINAL:
            raise
        except Exception as exc:  # botocore/aiohttp timeouts are not OSErrors
            if i == attempts - 1:
                raise ObjectStoreError(
                    f"{what}: failed after {attempts} attempts: {type(exc).__name__}: {exc}"
                ) from exc
            time.sleep(min(BACKOFF_MAX_S, BACKOFF_S * 2**i))
    raise AssertionError("unreachable")


def filesystem(url: str, storage_options: dict | None = None):
    import fsspec

    protocol = url.split("://", 1)[0]
    # No listing cache: another node's commits must show on the next listing.
    fs = fsspec.filesystem(protocol, use_listings_cache=False, **(storage_options or {}))
    if hasattr(fs, "retries"):  # s3fs retries timeouts 5x by itself: ours are the bounded ones
        fs.retries = 1
    return fs


def put_if_absent(fs, path: str, data: bytes, timeout: float | None = None) -> bool:
    """Conditional put; False if the object already exists (then it is left as it is)."""
    try:
        fs.pipe_file(path, data, mode="create", timeout=timeout)
        return True
    except FileExistsError:
        return False


class ObjectBlobStore(BlobStore):
    def __init__(
        self, fs, root: str, protocol: str, attempts: int = RETRIES, timeout: float = REQUEST_TIMEOUT_S
    ):
        self.fs, self.root, self.protocol = fs, root.rstrip("/"), protocol
        self.attempts, self.timeout = attempts, timeout

    def _retry(self, op: Callable[[], T], what: str) -> T:
        return retry(op, what, self.attempts)

    def path(self, sha: str, ext: str = "png") -> str:  # type: ignore[override]
        return f"{self.root}/{sha[:2]}/{sha}.{ext}"

    def url(self, sha: str, ext: str = "png") -> str:
        return f"{self.protocol}://{self.path(sha, ext)}"

    def _write(self, sha: str, ext: str, data: bytes) -> None:
        p = self.path(sha, ext)
        self._retry(lambda: put_if_absent(self.fs, p, data, self.timeout), f"blob {self.url(sha, ext)}")

    def get(self, sha: str, ext: str = "png") -> bytes:
        p = self.path(sha, ext)
        return self._retry(lambda: self.fs.cat_file(p, timeout=self.timeout), f"blob {self.url(sha, ext)}")

    def exists(self, sha: str, ext: str = "png") -> bool:
        p = self.path(sha, ext)
        return self._retry(lambda: self.fs.exists(p, timeout=self.timeout), f"blob {self.url(sha, ext)}")


class ObjectRawStore(RawStore):
    """`attempts`: tries per request (see `retry`), `timeout`: seconds per request;
    the client's own retries are turned off so that one bounded policy applies."""

    def __init__(
        self,
        root: str,
        storage_options: dict | None = None,
        attempts: int = RETRIES,
        timeout: float = REQUEST_TIMEOUT_S,
    ):
        self.url = root.rstrip("/")
        self.protocol = self.url.split("://", 1)[0]
        self.fs = filesystem(self.url, storage_options)
        self.root = self.fs._strip_protocol(self.url)  # bucket/prefix: what fs calls take
        self.attempts, self.timeout = attempts, timeout
        self.blobs = ObjectBlobStore(self.fs, f"{self.root}/blobs", self.protocol, attempts, timeout)

    def _retry(self, op: Callable[[], T], what: str) -> T:
        return retry(op, what, self.attempts)

    def audit_log(self, collection: str, writer_id: str | None = None):  # type: ignore[override]
        """Appended line by line to a local spool file (a bucket has no append), put to
        <root>/audit/<collection>/<writer>.jsonl when the crawl closes it: one object per
        writer, so writers on different nodes never overwrite each other's log."""
        writer = writer_id or default_writer_id()
        spool = Path(os.environ.get("TRAJFORGE_SPOOL_DIR") or Path(tempfile.gettempdir()) / "trajforge-spool")
        local = spool / self.protocol / self.root / "audit" / collection / f"{writer}.jsonl"
        return SpooledAuditLog(local, self, f"{self.root}/audit/{collection}/{writer}.jsonl")

    def full_url(self, path: str) -> str:
        return f"{self.protocol}://{path}"

    def _ls(self, path: str) -> list[str]:
        try:
            return sorted(
                self._retry(
                    lambda: self.fs.ls(path, detail=False, timeout=self.timeout),
                    f"listing {self.full_url(path)}",
                )
            )
        except FileNotFoundError:
            return []

    # -- reading -------------------------------------------------------------
    def collections(self) -> list[str]:
        names = [unquote(p.rsplit("/", 1)[-1]) for p in self._ls(f"{self.root}/_collections")]
        return sorted(c for c in names if self.commits(c))

    def commits(self, collection: str) -> list[dict]:
        """The commit markers of a collection, in part order."""
        out = []
        for p in self._ls(f"{self.root}/{collection}/_commits"):
            if p.endswith(".json"):
                data = self._retry(
                    lambda: self.fs.cat_file(p, timeout=self.timeout), f"commit {self.full_url(p)}"
                )
                out.append(json.loads(data))
        return sorted(out, key=lambda m: (m["part"], m["writer"]))

    def _parts(self, collection: str) -> list[tuple[str, str]]:  # type: ignore[override]
        folder = f"{self.root}/{collection}"
        return [(f"{folder}/{m['steps']}", f"{folder}/{m['trajectories']}") for m in self.commits(collection)]

    def read_table(self, path, **kw) -> pa.Table:
        try:
            data = self._retry(
                lambda: self.fs.cat_file(path, timeout=self.timeout), f"reading {self.full_url(path)}"
            )
            verify(data, self.full_url(path))
            return pq.read_table(pa.BufferReader(data), page_checksum_verification=True, **kw)
        except (ObjectStoreError, FileNotFoundError, SchemaError):
            raise
        except (pa.ArrowInvalid, OSError) as exc:
            raise damaged(self.full_url(path), str(exc)) from exc

    def iter_batches(self, path, batch_size: int) -> Iterator[pa.RecordBatch]:
        # A part is read whole (parts are batch-sized); a partial stream cannot be retried.
        yield from self.read_table(path).to_batches(max_chunksize=batch_size)

    def claim_owner(self, collection: str, trajectory_id: str) -> str | None:
        p = f"{self.root}/{collection}/_claims/{quote(trajectory_id, safe='')}"
        try:
            return self._retry(
                lambda: self.fs.cat_file(p, timeout=self.timeout), f"claim {self.full_url(p)}"
            ).decode()
        except FileNotFoundError:
            return None

    def uncommit(self, collection: str, ids) -> int:  # type: ignore[override]
        raise NotImplementedError(
            f"{self.full_url(self.root)}: taking committed trajectories out (to record errored "
            f"episodes again) works on a local raw store only"
        )

    def writer(
        self,
        collection: str,
        batch_size: int = 16,  # type: ignore[override]
        writer_id: str | None = None,
    ) -> ObjectTrajectoryWriter:
        return ObjectTrajectoryWriter(self, collection, batch_size, writer_id)


def default_writer_id() -> str:
    """Unique per process: host, pid and a random tail (pass writer_id to resume one's claims)."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


class ObjectTrajectoryWriter(TrajectoryWriter):
    """TrajectoryWriter on object storage: claim on add, commit marker last on flush."""

    def __init__(
        self, store: ObjectRawStore, collection: str, batch_size: int = 16, writer_id: str | None = None
    ):
        self.store = store
        self.collection = collection
        self.folder = f"{store.root}/{collection}"
        self.batch_size = batch_size
        self.writer_id = writer_id or default_writer_id()
        if "/" in self.writer_id or "." in self.writer_id:
            raise ValueError(f"writer_id {self.writer_id!r}: no '/' or '.' (it is part of object names)")
        marker = f"{store.root}/_collections/{quote(collection, safe='')}"
        store._retry(
            lambda: put_if_absent(store.fs, marker, b"", store.timeout),
            f"collection {store.full_url(marker)}",
        )
        self.committed = store.committed_ids(collection)
        self._trajs: list[Trajectory] = []
        self._steps: list[Step] = []
        self._pending: set[str] = set()
        self._part = len(store.commits(collection))
        self.written = 0
        self.lost_claims = 0  # ids another writer owns: skipped, counted

    def claim(self, trajectory_id: str) -> bool:
        """Own `trajectory_id` in this collection, or learn that another writer does."""
        p = f"{self.folder}/_claims/{quote(trajectory_id, safe='')}"
        mine = self.writer_id.encode()
        if self.store._retry(
            lambda: put_if_absent(self.store.fs, p, mine, self.store.timeout),
            f"claim {self.store.full_url(p)}",
        ):
            return True
        return self.store.claim_owner(self.collection, trajectory_id) == self.writer_id

    def add(self, traj: Trajectory, steps: list[Step]) -> bool:
        if self.has(traj.trajectory_id):
            return False
        if len(steps) != traj.num_steps:
            raise ValueError(
                f"trajectory {traj.trajectory_id}: num_steps={traj.num_steps} but {len(steps)} steps given"
            )
        if not self.claim(traj.trajectory_id):
            self.lost_claims += 1
            self.committed.add(traj.trajectory_id)  # someone else's: never ask again
            return False
        self._trajs.append(traj)
        self._pending.add(traj.trajectory_id)
        self._steps.extend(steps)
        if len(self._trajs) >= self.batch_size:
            self.flush()
        return True

    def flush(self) -> None:
        if not self._trajs:
            return
        self._commit(steps_table(self._steps), trajectories_table(self._trajs))
        self._trajs, self._steps = [], []
        self._pending.clear()

    def add_tables(self, steps: pa.Table, trajs: pa.Table) -> None:
        """Commit prebuilt tables as one part, unclaimed: for a single writer filling a
        prefix of its own (a curated generation, trajforge/store/curated_object.py)."""
        self.flush()
        self._commit(steps, trajs)

    def _commit(self, steps: pa.Table, trajs: pa.Table) -> None:
        """Both tables under names no one else writes, then the commit marker."""
        fs, name = self.store.fs, f"part-{self._part:06d}-{self.writer_id}"
        timeout = self.store.timeout
        url = self.store.full_url(f"{self.folder}/{name}")
        # Plain puts under names no one else writes: a retry rewrites the same bytes.
        for kind, table in (("steps", steps), ("trajectories", trajs)):
            data = parquet_bytes(table)
            path = f"{self.folder}/{name}.{kind}.parquet"
            self.store._retry(lambda: fs.pipe_file(path, data, timeout=timeout), f"part {url}: {kind} table")
        marker = json.dumps(
            {
                "part": self._part,
                "writer": self.writer_id,
                "steps": f"{name}.steps.parquet",
                "trajectories": f"{name}.trajectories.parquet",
                "num_steps": steps.num_rows,
                "num_trajectories": trajs.num_rows,
            },
            sort_keys=True,
        ).encode()
        mpath = f"{self.folder}/_commits/{name}.json"
        # The commit. A lost answer to a put that did land shows as our own marker.
        what = f"part {url}: commit marker"
        if not self.store._retry(lambda: put_if_absent(fs, mpath, marker, timeout), what):
            if self.store._retry(lambda: fs.cat_file(mpath, timeout=timeout), what) != marker:
                raise ObjectStoreError(f"part {url}: another commit marker holds this name")
        self.committed.update(trajs.column("trajectory_id").to_pylist())
        self.written += trajs.num_rows
        self._part += 1


class SpooledAuditLog(AuditLog):
    """An AuditLog whose close puts the spooled file to the object store (with the
    store's bounded retries). A crawl killed before its close leaves its log in the
    local spool only ($TRAJFORGE_SPOOL_DIR, else the temp folder), named by writer."""

    def __init__(self, local: Path, store: ObjectRawStore, key: str):
        super().__init__(local)
        self._store, self._key = store, key

    def close(self) -> None:
        super().close()
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        store = self._store
        store._retry(
            lambda: store.fs.pipe_file(self._key, data, timeout=store.timeout),
            f"audit log {store.full_url(self._key)}",
        )
