"""Export the raw store to WebDataset shards, split by trajectory, byte-reproducible.

One sample per step: `<key>.png` (or `.jpg` / `.webp`, the screenshot as
stored) and `<key>.json` (the step's row, its trajectory's row and the schema
version; see `sample_json`). Keys are `<trajectory_id>_s0004` made safe by
`shards.key_stem`.

- Splits are by trajectory: a stable hash of (split_seed, trajectory_id) picks
  the split, so a trajectory never straddles train and evaluation, and adding
  data never moves an existing trajectory to another split.
- Reproducible: samples go out sorted by (trajectory_id, index) whatever the
  store's batching; tar members carry mtime 0, uid/gid 0, fixed names and
  mode, JSON has sorted keys. The same input gives the same bytes.
- Streamed: DuckDB sorts the step rows out of core and hands them back in
  batches; only one trajectory's rows are held at a time.
- Atomic: shards are written under a staging folder inside out_dir and
  renamed into place only when all are complete; the manifest is written last
  (atomically) and is the commit. A failed run leaves the previous export as
  it was.
- Resumable: the staging folder's name is a fingerprint of the inputs (ids,
  their committed part files) and the options, and a journal there records
  each finished shard (fsync'd). A run killed part-way (SIGKILL, OOM, lost
  node) is resumed by the next run with the same fingerprint: the journaled
  shards are verified (size, sha256) and kept, their samples skipped, and the
  final shards are byte-identical to an uninterrupted run's. Any other staging
  folder is stale and removed. (An exception raised inside the run still
  removes the staging folder, so a failed run leaves out_dir as it was.)
- Resolution profiles (`trajforge.resolution`): images are resized at export
  to what the target model wants; the sample's width/height follow.
- Bad trajectories (a missing screenshot, an invalid step, a step count that
  does not match) are quarantined with their reason and counted, never dropped
  silently. A step recorded without an image (screenshot "", an import whose
  dataset ships none) is skipped on its own, counted in `skipped_steps` and
  listed in the quarantine file with its index.
- Index gaps: a curated store keeps each trajectory's num_steps but only its
  kept steps. With `allow_index_gaps=True` step indices must be unique,
  increasing and < num_steps instead of exactly 0..num_steps-1; the manifest
  then says `"index_gaps": true` (as it does when a step was skipped), which
  `trajforge validate` follows.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import pyarrow as pa
from PIL import __version__ as _PILLOW_VERSION

from schemas.arrow import row_to_step, step_to_row, trajectory_to_row
from schemas.errors import SchemaError
from schemas.records import PIPELINE_VERSION, SCHEMA_VERSION, Trajectory

from .resolution import Resolution, resize_image, resolution_profile
from .shards import IMAGE_EXT, MANIFEST, SHARD_NAME, sample_key
from .store import RawStore, atomic_write_bytes, path_error

DEFAULT_SPLITS = (("train", 0.9), ("val", 0.05), ("test", 0.05))
QUARANTINE = "quarantine.jsonl"
JOURNAL = "journal.jsonl"  # in the staging folder: one line per finished shard
STAGING_PREFIX = ".export-"
DUCKDB_MEMORY = "512MB"  # past this the sort spills to disk
_SPLIT_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_TAR_BLOCK = 512
_TAR_RECORD = 10240  # tarfile pads an archive to a multiple of this
_TAR_END = 2 * _TAR_BLOCK


@dataclass
class ExportResult:
    out_dir: Path
    manifest: dict[str, Any]
    samples: int
    trajectories: int
    shards: int
    bytes: int
    skipped: dict[str, int]
    seconds: float
    resumed_shards: int = 0  # shards kept from a killed run's staging folder
    skipped_steps: dict[str, int] | None = None  # steps left out of exported trajectories

    @property
    def manifest_path(self) -> Path:
        return self.out_dir / MANIFEST


# -- splits -------------------------------------------------------------------

def check_splits(splits: Iterable[tuple[str, float]]) -> list[tuple[str, float]]:
    splits = [(str(n), float(f)) for n, f in splits]
    names = [n for n, _ in splits]
    if not splits:
        raise ValueError("splits: none given")
    for name, frac in splits:
        if not _SPLIT_NAME.match(name):
            raise ValueError(f"splits: name {name!r} must match {_SPLIT_NAME.pattern}")
        if not 0.0 <= frac <= 1.0:
            raise ValueError(f"splits: fraction of {name!r} is {frac}, not in [0, 1]")
    if len(set(names)) != len(names):
        raise ValueError(f"splits: duplicate names in {names}")
    if abs(sum(f for _, f in splits) - 1.0) > 1e-6:
        raise ValueError(f"splits: fractions sum to {sum(f for _, f in splits)}, not 1")
    return splits


def split_of(trajectory_id: str, splits: list[tuple[str, float]], seed: str) -> str:
    """The split of a trajectory: a stable hash of seed and id, never random state."""
    digest = hashlib.sha256(f"{seed}\x1f{trajectory_id}".encode()).digest()
    u = int.from_bytes(digest[:8], "big") / 2 ** 64
    edge = 0.0
    for name, frac in splits:
        edge += frac
        if u < edge:
            return name
    return [n for n, f in splits if f > 0][-1]  # u just under 1 with rounding


# -- samples ------------------------------------------------------------------

def sample_json(step_row: dict, traj_row: dict) -> bytes:
    """The step's row and its trajectory's row in one flat object, sorted keys.

    The trajectory's own `error` becomes `trajectory_error` (the step has an
    `error` too); task params stay a JSON string (`task.params_json`) so every
    sample has the same column types whatever the template.
    """
    obj = dict(step_row)
    for k, v in traj_row.items():
        if k == "trajectory_id":
            continue
        obj["trajectory_error" if k == "error" else k] = v
    obj["schema_version"] = SCHEMA_VERSION
    return json.dumps(obj, sort_keys=True, ensure_ascii=False,
                      separators=(",", ":"), allow_nan=False).encode("utf-8")


@dataclass
class ShardSample:
    trajectory_id: str
    key: str
    image_ext: str
    image_path: Path
    image_size: int
    json: bytes
    image_format: str = "png"
    resize_to: tuple[int, int] | None = None  # None: the stored bytes as they are
    _resized: bytes | None = None

    def prepare(self) -> None:
        """Resize now (before the shard-rolling decision needs the size)."""
        if self.resize_to is not None and self._resized is None:
            try:
                self._resized = resize_image(self.image_path.read_bytes(), self.image_format,
                                             self.resize_to, source=str(self.image_path))
            except ValueError as err:
                raise _Unusable("bad_screenshot", str(SchemaError(
                    str(err), source=str(self.image_path), record=self.key,
                    field="screenshot"))) from None

    def tar_bytes(self) -> int:
        self.prepare()
        size = self.image_size if self._resized is None else len(self._resized)
        return _member_bytes(size) + _member_bytes(len(self.json))

    def record(self) -> dict[str, bytes | str]:
        self.prepare()
        image, self._resized = self._resized, None  # written once: free it
        if image is None:
            image = self.image_path.read_bytes()
        return {"__key__": self.key, self.image_ext: image, "json": self.json}


def _tar_file_bytes(members: int) -> int:
    """The archive's size: members, the end blocks, padding to a whole record."""
    return -(-(members + _TAR_END) // _TAR_RECORD) * _TAR_RECORD


def _member_bytes(size: int) -> int:
    return _TAR_BLOCK + -(-size // _TAR_BLOCK) * _TAR_BLOCK


# -- writing shards -------------------------------------------------------------

class _HashingFile:
    """A write-only file that hashes and counts what goes through it.

    Why not hash and write each piece inline: tarfile's stream hands over 10
    KiB pieces, and inline sha256 plus a syscall per piece made shard writing
    about half as fast as plain tarfile (benchmarks/shard_io.py). Pieces are
    gathered into 1 MiB blocks; each block is written here while a helper
    thread hashes it (hashlib lets go of the GIL), in order.
    """

    BLOCK = 1 << 20
    _IN_FLIGHT = 4  # blocks hashed behind the writes at most (bounds memory)

    def __init__(self, f):
        self.f, self.sha, self.size = f, hashlib.sha256(), 0
        self._buf = bytearray()
        self._hasher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="shard-sha256")
        self._pending: deque = deque()

    def tell(self) -> int:  # tarfile's "w" mode asks where it starts
        return self.size

    def write(self, data) -> int:
        self._buf += data
        self.size += len(data)
        if len(self._buf) >= self.BLOCK:
            self._write_block()
        return len(data)

    def _write_block(self) -> None:
        block, self._buf = self._buf, bytearray()  # never changed again: shared read-only
        self._pending.append(self._hasher.submit(self.sha.update, block))
        self.f.write(block)
        while len(self._pending) > self._IN_FLIGHT:
            self._pending.popleft().result()

    def flush(self) -> str:
        """Writes what is buffered; the sha256 of everything written."""
        if self._buf:
            self._write_block()
        while self._pending:
            self._pending.popleft().result()
        self._hasher.shutdown()
        self.f.flush()
        return self.sha.hexdigest()

    def discard(self) -> None:
        self._hasher.shutdown(cancel_futures=True)


@functools.cache
def _direct_tar_writer(wds):
    """webdataset's TarWriter on tarfile's plain "w" mode instead of its "w|" stream.

    Why: the stream re-chunks every write into 10 KiB records (copies in
    Python); our file already gathers 1 MiB blocks. Same bytes either way.
    """
    class DirectTarWriter(wds.TarWriter):
        @staticmethod
        def tarmode(fileobj, compress=None):
            return "w"

    return DirectTarWriter


class SplitWriter:
    """Writes one split's shards into the staging folder, rolling by count and bytes.

    A trajectory stays in one shard unless it alone is over a limit, so that a
    shard reader sees a trajectory's steps together.
    """

    def __init__(self, staging: Path, split: str, max_samples: int, max_bytes: int,
                 journal: "ShardJournal", resumed: list[dict] = ()):
        self.staging, self.split = staging, split
        self.max_samples, self.max_bytes = max_samples, max_bytes
        self.journal = journal
        # Shards finished by a killed run: numbering goes on after them.
        self.shards: list[dict] = [{k: e[k] for k in _MANIFEST_SHARD_FIELDS} for e in resumed]
        self.image_exts: set[str] = {x for e in resumed for x in e["image_exts"]}  # for hf_features()
        self._tar = None

    def add_trajectory(self, samples: list[ShardSample]) -> None:
        try:
            self._add(samples)
        except OSError as exc:  # a full disk: say which shard could not be written
            raise self._write_error(exc) from exc

    def _write_error(self, exc: OSError) -> OSError:
        if exc.filename is not None:
            return exc
        where = self.staging / self._cur["name"] if self._tar is not None else self.staging
        return path_error(where, exc)

    def _add(self, samples: list[ShardSample]) -> None:
        sizes = [s.tar_bytes() for s in samples]
        if self._tar is not None and not self._fits(len(samples), sum(sizes)):
            self._close()
        for sample, size in zip(samples, sizes):
            if self._tar is not None and not self._fits(1, size):
                self._close()  # this trajectory alone is over a limit
            if self._tar is None:
                self._open()
            self._tar.write(sample.record())
            self.image_exts.add(sample.image_ext)
            cur = self._cur
            cur["samples"] += 1
            cur["payload"] += size
            cur["tids"].add(sample.trajectory_id)
            cur["exts"].add(sample.image_ext)
            cur["last"] = sample

    def _fits(self, n: int, size: int) -> bool:
        cur = self._cur
        return (cur["samples"] + n <= self.max_samples
                and _tar_file_bytes(cur["payload"] + size) <= self.max_bytes)

    def _open(self) -> None:
        import webdataset as wds  # imports torch: only when writing

        name = f"{self.split}-{len(self.shards):06d}.tar"
        f = open(self.staging / name, "wb")
        self._file = _HashingFile(f)
        self._tar = _direct_tar_writer(wds)(self._file, encoder=False, mtime=0, mode=0o644,
                                            user="trajforge", group="trajforge")
        self._cur = {"name": name, "f": f, "samples": 0, "payload": 0, "tids": set(),
                     "exts": set(), "last": None}

    def _close(self) -> None:
        self._tar.close()
        f = self._cur["f"]
        digest = self._file.flush()
        os.fsync(f.fileno())
        f.close()
        cur = self._cur
        shard = {"name": cur["name"], "split": self.split, "samples": cur["samples"],
                 "trajectories": len(cur["tids"]), "bytes": self._file.size,
                 "sha256": digest}
        self.shards.append(shard)
        self._tar = None
        _fsync_dir(self.staging)
        # Durable before it counts: the shard is fsync'd above, its line here.
        self.journal.append(dict(shard, last_trajectory_id=cur["last"].trajectory_id,
                                 last_key=cur["last"].key, image_exts=sorted(cur["exts"])))

    def finish(self) -> list[dict]:
        if self._tar is not None:
            try:
                self._close()
            except OSError as exc:
                raise self._write_error(exc) from exc
        return self.shards

    def abort(self) -> None:
        if self._tar is not None:
            try:  # close the tar stream first, or its finaliser writes to a closed file
                self._tar.close()
            finally:
                self._file.discard()
                self._cur["f"].close()
                self._tar = None


# -- resuming -----------------------------------------------------------------------

_MANIFEST_SHARD_FIELDS = ("name", "split", "samples", "trajectories", "bytes", "sha256")


class ShardJournal:
    """The staging folder's list of finished shards: JSON lines, each fsync'd."""

    def __init__(self, staging: Path):
        self.path = staging / JOURNAL

    def load(self) -> list[dict]:
        """The journaled shards; a torn last line (killed mid-write) is ignored."""
        try:
            lines = self.path.read_bytes().split(b"\n")
        except FileNotFoundError:
            return []
        entries = []
        for line in lines[:-1]:  # the part after the last newline was never finished
            try:
                entry = json.loads(line)
            except ValueError:
                break
            if not isinstance(entry, dict):
                break
            entries.append(entry)
        return entries

    def append(self, entry: dict) -> None:
        with open(self.path, "ab") as f:
            f.write(json.dumps(entry, sort_keys=True, ensure_ascii=False).encode() + b"\n")
            f.flush()
            os.fsync(f.fileno())

    def rewrite(self, entries: list[dict]) -> None:
        atomic_write_bytes(self.path, b"".join(
            json.dumps(e, sort_keys=True, ensure_ascii=False).encode() + b"\n" for e in entries))


def _file_sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _resume(staging: Path, splits: list[tuple[str, float]]) -> dict[str, list[dict]]:
    """{split: journaled shards still whole}, in order; everything else in staging goes.

    A split keeps the longest run of its shards, from 000000 on, whose files
    match their journal line; the first one that does not (and all after it)
    is written again.
    """
    journal = ShardJournal(staging)
    entries = journal.load()
    kept: dict[str, list[dict]] = {name: [] for name, _ in splits}
    broken: set[str] = set()
    survivors = []
    for e in entries:
        split = e.get("split")
        if split not in kept or split in broken:
            continue
        path = staging / str(e.get("name"))
        ok = (e.get("name") == f"{split}-{len(kept[split]):06d}.tar" and path.is_file()
              and path.stat().st_size == e.get("bytes") and _file_sha256(path) == e.get("sha256"))
        if ok:
            kept[split].append(e)
            survivors.append(e)
        else:
            broken.add(split)
    keep = {e["name"] for e in survivors} | {JOURNAL}
    for p in staging.iterdir():
        if p.name not in keep:
            shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
    if survivors != entries or not journal.path.exists():
        journal.rewrite(survivors)
    return kept


def _fingerprint(store: RawStore, chosen: dict[str, tuple[Trajectory, str]], options: dict) -> str:
    """Names the inputs and options: a resumed run must see exactly the same ones.

    Part files are named relative to the store (a moved store still resumes)
    with their size and mtime: committed parts are never rewritten in place,
    so a change there means the input changed.
    """
    h = hashlib.sha256()
    root = Path(store.root)

    def rel(f) -> str:
        try:
            return Path(f).relative_to(root).as_posix()
        except ValueError:
            return str(f)

    for tid in sorted(chosen):
        h.update(f"{tid}\x1f{rel(chosen[tid][1])}\n".encode())
    parts = {Path(f) for _, f in chosen.values()}
    parts |= {Path(str(f).replace(".steps.parquet", ".trajectories.parquet")) for f in parts}
    for f in sorted(parts):
        st = f.stat()
        h.update(f"{rel(f)}\x1f{st.st_size}\x1f{st.st_mtime_ns}\n".encode())
    h.update(json.dumps(options, sort_keys=True).encode())
    return h.hexdigest()


# -- reading the store ------------------------------------------------------------

class _Unusable(Exception):
    """A trajectory that cannot be exported: quarantined with this reason."""

    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason, self.detail = reason, detail

    def record(self, trajectory_id: str) -> dict:
        return {"trajectory_id": trajectory_id, "reason": self.reason, "detail": self.detail}


def committed_trajectories(store: RawStore, collections) -> tuple[dict[str, tuple[Trajectory, str]], list[dict]]:
    """{id: (trajectory, its steps file)} and the quarantined rows.

    An invalid row is quarantined; a repeated id keeps its first copy.
    """
    import pyarrow.parquet as pq

    from schemas.arrow import TRAJECTORY_SCHEMA, row_to_trajectory
    chosen: dict[str, tuple[Trajectory, str]] = {}
    quarantine = []
    for tfile in store.trajectory_files(collections):
        steps_file = str(tfile).replace(".trajectories.parquet", ".steps.parquet")
        for row in pq.read_table(tfile, schema=TRAJECTORY_SCHEMA).to_pylist():
            tid = row["trajectory_id"]
            try:
                traj = row_to_trajectory(row, source=str(tfile))
            except SchemaError as err:
                quarantine.append(_Unusable("invalid_trajectory", str(err)).record(tid))
                continue
            if tid in chosen:
                quarantine.append(_Unusable(
                    "duplicate_id", f"also in {chosen[tid][1]}; kept that one, skipped "
                                    f"{steps_file}").record(tid))
                continue
            chosen[tid] = (traj, steps_file)
    return chosen, quarantine


def sorted_step_rows(chosen: dict[str, tuple[Trajectory, str]], tmp_dir: Path,
                      batch_size: int = 256) -> Iterator[dict]:
    """Step rows of the chosen trajectories sorted by (trajectory_id, index).

    DuckDB sorts out of core (spilling to tmp_dir past its memory limit), so
    the order is global whatever the store's batching, and memory stays flat.
    """
    import duckdb

    files = sorted({f for _, f in chosen.values()})
    if not files:
        return
    keys = pa.table({"trajectory_id": list(chosen), "filename": [chosen[t][1] for t in chosen]})
    con = duckdb.connect(config={"memory_limit": DUCKDB_MEMORY, "temp_directory": str(tmp_dir)})
    try:
        con.register("chosen", keys)
        rel = con.sql(
            """SELECT s.* EXCLUDE (filename) FROM read_parquet(?, filename = true, union_by_name = true) s
               JOIN chosen c ON s.trajectory_id = c.trajectory_id AND s.filename = c.filename
               ORDER BY s.trajectory_id, s."index" """, params=[files])
        # duckdb 2 renamed fetch_arrow_reader to to_arrow_reader.
        reader = getattr(rel, "to_arrow_reader", None) or rel.fetch_arrow_reader
        for batch in reader(batch_size):
            yield from batch.to_pylist()
    finally:
        con.close()


def group_by_trajectory(rows: Iterator[dict]) -> Iterator[tuple[str, list[dict]]]:
    """(trajectory_id, rows) runs of rows sorted by trajectory."""
    tid, group = None, []
    for row in rows:
        if row["trajectory_id"] != tid:
            if group:
                yield tid, group
            tid, group = row["trajectory_id"], []
        group.append(row)
    if group:
        yield tid, group


def _samples(store: RawStore, traj: Trajectory, rows: list[dict], source: str,
             resolution: Resolution, allow_index_gaps: bool = False,
             step_skips: list[dict] | None = None) -> list[ShardSample]:
    """The samples of one trajectory, or _Unusable saying why there are none.

    Images are not read here (a resumed run skips most samples); `prepare`
    resizes them when they are about to be written.
    """
    try:
        steps = [row_to_step(r, source=source) for r in rows]
    except SchemaError as err:
        raise _Unusable("invalid_step", str(err)) from None
    indices = [s.index for s in steps]
    if allow_index_gaps:
        ok = all(a < b for a, b in zip(indices, indices[1:])) and (
            not indices or indices[-1] < traj.num_steps)
        want = f"unique, increasing and < num_steps={traj.num_steps}"
    else:
        ok = indices == list(range(traj.num_steps))
        want = f"0..{traj.num_steps - 1} (num_steps={traj.num_steps})"
    if not ok:
        shown = f"{indices[:8]}{'...' if len(indices) > 8 else ''}"
        raise _Unusable("step_count_mismatch", str(SchemaError(
            f"step indices {shown} are not {want}",
            source=source, record=traj.trajectory_id, field="index")))
    if steps and not any(s.screenshot for s in steps):
        raise _Unusable("no_screenshots", str(SchemaError(
            "no step has a screenshot", source=source, record=traj.trajectory_id,
            field="screenshot")))
    traj_row = trajectory_to_row(traj)
    out = []
    for step in steps:
        if not step.screenshot:
            # Recorded without an image: nothing to train on, the rest still is.
            if step_skips is not None:
                step_skips.append({"trajectory_id": step.trajectory_id, "index": step.index,
                                   "reason": "no_screenshot",
                                   "detail": str(SchemaError("step has no screenshot", source=source,
                                                             record=f"{step.trajectory_id}#{step.index}",
                                                             field="screenshot"))})
            continue
        path = store.blobs.path(step.screenshot, step.image_format)
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            raise _Unusable("missing_screenshot", str(SchemaError(
                f"screenshot blob {path} is missing", source=source,
                record=f"{step.trajectory_id}#{step.index}", field="screenshot"))) from None
        try:
            size_to = resolution.target(step.width, step.height)
        except ValueError as err:
            raise _Unusable("bad_screenshot", str(SchemaError(
                str(err), source=source, record=f"{step.trajectory_id}#{step.index}",
                field="width"))) from None
        row = step_to_row(step)
        # Coordinates are normalised, so only the pixel size changes with the image.
        row["width"], row["height"] = size_to
        out.append(ShardSample(trajectory_id=step.trajectory_id,
                           key=sample_key(step.trajectory_id, step.index),
                           image_ext=IMAGE_EXT[step.image_format], image_path=path,
                           image_size=size, json=sample_json(row, traj_row),
                           image_format=step.image_format,
                           resize_to=None if size_to == (step.width, step.height) else size_to))
    return out


# -- the export -------------------------------------------------------------------

def export_shards(store: RawStore, out_dir: Path, *, dataset: str, collections=None,
                  max_samples_per_shard: int = 1000, max_bytes_per_shard: int = 500_000_000,
                  splits=DEFAULT_SPLITS, split_seed: str = "v1",
                  resolution: "str | Resolution" = "native",
                  progress: Callable[[int], Any] | None = None,
                  allow_index_gaps: bool = False) -> ExportResult:
    """Write the store's steps as WebDataset shards under out_dir; see the module doc.

    `resolution` is a profile name ("native", "1120", "448", "qwen") or a
    `trajforge.resolution.Resolution`. `progress`, if given, is called with the
    number of samples done after each trajectory (a tqdm's `update` fits);
    samples kept from a resumed run count as done. `allow_index_gaps`: see the
    module doc (for a curated store, whose dropped steps leave gaps).
    """
    started = time.perf_counter()
    splits = check_splits(splits)
    profile = resolution_profile(resolution)
    if max_samples_per_shard < 1 or max_bytes_per_shard < 1:
        raise ValueError("max_samples_per_shard and max_bytes_per_shard must be positive")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)

    chosen, quarantine = committed_trajectories(store, collections)
    options = {"dataset": dataset, "collections": _collection_names(store, collections),
               "max_samples_per_shard": max_samples_per_shard,
               "max_bytes_per_shard": max_bytes_per_shard, "splits": splits,
               "split_seed": split_seed, "resolution": profile.describe(),
               "schema_version": SCHEMA_VERSION, "trajforge": package_version(),
               "pillow": _PILLOW_VERSION, "webdataset": _dist_version("webdataset")}
    if allow_index_gaps:
        options["allow_index_gaps"] = True
    # Shards are written here and moved into out_dir only once all are done,
    # so a failed run leaves the previous export whole. The name is fixed by
    # the inputs and options, so a killed run's finished shards are found again.
    staging = out_dir / f"{STAGING_PREFIX}{_fingerprint(store, chosen, options)[:24]}"
    _remove_leftovers(out_dir, keep=staging.name)
    staging.mkdir(exist_ok=True)
    _fsync_dir(out_dir)
    resumed = _resume(staging, splits)
    step_skips: list[dict] = []
    args = (store, chosen, staging, splits, split_seed, profile, max_samples_per_shard,
            max_bytes_per_shard, progress, allow_index_gaps, step_skips)
    try:
        shards, image_exts, exported, seen, bad = _write_shards(*args, resumed)
    except _ResumeMismatch:
        # The kept shards do not line up with the input (a screenshot that
        # failed to decode before the kill is counted differently): start over
        # rather than risk a duplicate or a gap.
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        resumed = {name: [] for name, _ in splits}
        step_skips.clear()
        shards, image_exts, exported, seen, bad = _write_shards(*args, resumed)
    quarantine += bad

    for tid in sorted(set(chosen) - seen):
        if chosen[tid][0].num_steps == 0:
            quarantine.append(_Unusable("no_steps", "num_steps=0").record(tid))
        else:
            quarantine.append(_Unusable("steps_missing", f"no step rows in {chosen[tid][1]}").record(tid))
    quarantine.sort(key=lambda q: (q["trajectory_id"], q["reason"]))
    skipped: dict[str, int] = {}
    for q in quarantine:
        skipped[q["reason"]] = skipped.get(q["reason"], 0) + 1
    skipped_steps: dict[str, int] = {}
    for q in step_skips:
        skipped_steps[q["reason"]] = skipped_steps.get(q["reason"], 0) + 1
    quarantine += sorted(step_skips, key=lambda q: (q["trajectory_id"], q["index"]))

    for shard in shards:
        path = staging / shard["name"]
        os.chmod(path, 0o644)
        os.replace(path, out_dir / shard["name"])
    shutil.rmtree(staging, ignore_errors=True)
    _publish(out_dir / QUARANTINE, "".join(
        json.dumps(q, sort_keys=True, ensure_ascii=False) + "\n" for q in quarantine).encode())
    manifest = _manifest(dataset, splits, split_seed, shards, image_exts, exported, skipped,
                         store, collections, profile)
    if skipped_steps:
        manifest["totals"]["skipped_steps"] = skipped_steps
    if allow_index_gaps or skipped_steps:
        manifest["index_gaps"] = True  # trajforge validate then accepts gaps
    _publish(out_dir / MANIFEST, (json.dumps(manifest, indent=2, sort_keys=True,
                                                       ensure_ascii=False) + "\n").encode())
    _remove_stale_shards(out_dir, {s["name"] for s in shards})
    totals = manifest["totals"]
    return ExportResult(out_dir=out_dir, manifest=manifest, samples=totals["samples"],
                        trajectories=totals["trajectories"], shards=totals["shards"],
                        bytes=totals["bytes"], skipped=skipped,
                        seconds=time.perf_counter() - started,
                        resumed_shards=sum(len(v) for v in resumed.values()),
                        skipped_steps=skipped_steps)


class _ResumeMismatch(Exception):
    """The journaled shards do not end where the input says they should."""


def _write_shards(store, chosen, staging, splits, split_seed, profile, max_samples, max_bytes,
                  progress, allow_index_gaps, step_skips, resumed):
    """Writes every split's shards into staging, after the ones kept from a killed run.

    Returns (shards, image_exts, trajectories per split, ids seen, quarantined).
    """
    journal = ShardJournal(staging)
    writers = {name: SplitWriter(staging, name, max_samples, max_bytes, journal, resumed[name])
               for name, _ in splits}
    # Samples of each split already in kept shards: the first ones in stream order.
    to_skip = {name: sum(e["samples"] for e in resumed[name]) for name, _ in splits}
    exported: dict[str, int] = {name: 0 for name, _ in splits}
    seen: set[str] = set()
    quarantine = []
    resizer = ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1),
                                 thread_name_prefix="export-resize")
    try:
        for tid, rows in group_by_trajectory(sorted_step_rows(chosen, staging / "duckdb")):
            seen.add(tid)
            traj, source = chosen[tid]
            split = split_of(tid, splits, split_seed)
            try:
                samples = _samples(store, traj, rows, source, profile, allow_index_gaps, step_skips)
                todo = _skip_resumed(samples, split, to_skip, resumed)
                if any(t.resize_to for t in todo):
                    # Pillow lets go of the GIL to decode, resize and encode.
                    list(resizer.map(ShardSample.prepare, todo))
            except _Unusable as bad:
                quarantine.append(bad.record(tid))
                continue
            if todo:
                writers[split].add_trajectory(todo)
            exported[split] += 1
            if progress is not None:
                progress(len(samples))
        if any(to_skip.values()):
            raise _ResumeMismatch(f"the journal holds more samples than the input: {to_skip}")
        shards = [s for name, _ in splits for s in writers[name].finish()]
    except _ResumeMismatch:
        for w in writers.values():
            w.abort()
        raise
    except BaseException:
        for w in writers.values():
            try:  # on a full disk the tar's closing blocks may fail too
                w.abort()
            except OSError:
                pass
        shutil.rmtree(staging, ignore_errors=True)
        raise
    finally:
        resizer.shutdown(cancel_futures=True)
    image_exts = set().union(*(w.image_exts for w in writers.values()))
    return shards, image_exts, exported, seen, quarantine


def _skip_resumed(samples: list[ShardSample], split: str, to_skip: dict[str, int],
                  resumed: dict[str, list[dict]]) -> list[ShardSample]:
    """The samples not yet in a kept shard (a trajectory may straddle the last one)."""
    n = min(to_skip[split], len(samples))
    if not n:
        return samples
    to_skip[split] -= n
    if not to_skip[split] and samples[n - 1].key != resumed[split][-1]["last_key"]:
        raise _ResumeMismatch(f"the last kept {split} shard ends at "
                              f"{resumed[split][-1]['last_key']!r}, the input at {samples[n - 1].key!r}")
    return samples[n:]


def _manifest(dataset, splits, split_seed, shards, image_exts, exported, skipped, store,
              collections, profile: Resolution) -> dict:
    split_info = {}
    for name, frac in splits:
        mine = [s for s in shards if s["split"] == name]
        split_info[name] = {"fraction": frac, "trajectories": exported[name],
                            "samples": sum(s["samples"] for s in mine),
                            "shards": [s["name"] for s in mine]}
    # The version names the content: same shards, same version.
    version = hashlib.sha256(json.dumps(
        {"schema_version": SCHEMA_VERSION, "shards": shards}, sort_keys=True).encode()).hexdigest()[:16]
    return {
        "format": "webdataset",
        "dataset": dataset,
        "version": version,
        "schema_version": SCHEMA_VERSION,
        "created_by": f"trajforge {package_version()} (trajforge.export)",
        "collections": _collection_names(store, collections),
        "split_seed": split_seed,
        "resolution": profile.describe(),
        "splits": split_info,
        "sample": {"key": "<trajectory_id>_s<index:04d>", "image_exts": sorted(image_exts),
                   "json": "step row + trajectory row (error -> trajectory_error) + schema_version"},
        "totals": {"samples": sum(s["samples"] for s in shards),
                   "trajectories": sum(exported.values()),
                   "shards": len(shards), "bytes": sum(s["bytes"] for s in shards),
                   "skipped": skipped},
        "shards": shards,
    }


def _collection_names(store: RawStore, collections) -> list[str]:
    if collections is None:
        return store.collections()
    return sorted([collections] if isinstance(collections, str) else collections)


def _dist_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "unknown"


def _fsync_dir(path: Path) -> None:
    """Makes a new entry in the folder durable (the staging folder's name)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def package_version() -> str:
    try:
        return metadata.version("trajforge")
    except metadata.PackageNotFoundError:
        return PIPELINE_VERSION


def _publish(path: Path, data: bytes) -> None:
    atomic_write_bytes(path, data)
    os.chmod(path, 0o644)  # readable by the training job's user


def _remove_leftovers(out_dir: Path, keep: str) -> None:
    """Temporary files of an export killed part-way, and staging folders of
    other inputs or options (they can never be resumed)."""
    for p in out_dir.glob(".*.tmp"):
        p.unlink(missing_ok=True)
    for p in out_dir.glob(f"{STAGING_PREFIX}*"):
        if p.name != keep:
            shutil.rmtree(p, ignore_errors=True)


def _remove_stale_shards(out_dir: Path, keep: set[str]) -> None:
    """Shards of an earlier export that this one did not rewrite (after the commit)."""
    for p in out_dir.glob("*.tar"):
        if SHARD_NAME.match(p.name) and p.name not in keep:
            p.unlink()
