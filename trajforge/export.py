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
- Atomic: shards are written under a temporary staging folder inside out_dir
  and renamed into place only when all are complete; the manifest is written
  last (atomically) and is the commit. A failed run leaves the previous export
  as it was.
- Bad trajectories (a missing screenshot, an invalid step, a step count that
  does not match) are quarantined with their reason and counted, never dropped
  silently.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import pyarrow as pa

from schemas.arrow import row_to_step, step_to_row, trajectory_to_row
from schemas.errors import SchemaError
from schemas.records import PIPELINE_VERSION, SCHEMA_VERSION, Trajectory

from .shards import IMAGE_EXT, MANIFEST, SHARD_NAME, sample_key
from .store import RawStore, atomic_write_bytes

DEFAULT_SPLITS = (("train", 0.9), ("val", 0.05), ("test", 0.05))
QUARANTINE = "quarantine.jsonl"
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
class _Sample:
    trajectory_id: str
    key: str
    image_ext: str
    image_path: Path
    image_size: int
    json: bytes

    def tar_bytes(self) -> int:
        return _member_bytes(self.image_size) + _member_bytes(len(self.json))

    def record(self) -> dict[str, bytes | str]:
        return {"__key__": self.key, self.image_ext: self.image_path.read_bytes(), "json": self.json}


def _tar_file_bytes(members: int) -> int:
    """The archive's size: members, the end blocks, padding to a whole record."""
    return -(-(members + _TAR_END) // _TAR_RECORD) * _TAR_RECORD


def _member_bytes(size: int) -> int:
    return _TAR_BLOCK + -(-size // _TAR_BLOCK) * _TAR_BLOCK


# -- writing shards -------------------------------------------------------------

class _HashingFile:
    """A write-only file that hashes and counts what goes through it."""

    def __init__(self, f):
        self.f, self.sha, self.size = f, hashlib.sha256(), 0

    def write(self, data) -> int:
        self.sha.update(data)
        self.size += len(data)
        return self.f.write(data)


class _SplitWriter:
    """Writes one split's shards into the staging folder, rolling by count and bytes.

    A trajectory stays in one shard unless it alone is over a limit, so that a
    shard reader sees a trajectory's steps together.
    """

    def __init__(self, staging: Path, split: str, max_samples: int, max_bytes: int):
        self.staging, self.split = staging, split
        self.max_samples, self.max_bytes = max_samples, max_bytes
        self.shards: list[dict] = []
        self.image_exts: set[str] = set()  # for hf_features()
        self._tar = None

    def add_trajectory(self, samples: list[_Sample]) -> None:
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
            self._cur["samples"] += 1
            self._cur["payload"] += size
            self._cur["tids"].add(sample.trajectory_id)

    def _fits(self, n: int, size: int) -> bool:
        cur = self._cur
        return (cur["samples"] + n <= self.max_samples
                and _tar_file_bytes(cur["payload"] + size) <= self.max_bytes)

    def _open(self) -> None:
        import webdataset as wds  # imports torch: only when writing

        name = f"{self.split}-{len(self.shards):06d}.tar"
        f = open(self.staging / name, "wb")
        self._file = _HashingFile(f)
        self._tar = wds.TarWriter(self._file, encoder=False, mtime=0, mode=0o644,
                                  user="trajforge", group="trajforge")
        self._cur = {"name": name, "f": f, "samples": 0, "payload": 0, "tids": set()}

    def _close(self) -> None:
        self._tar.close()
        f = self._cur["f"]
        f.flush()
        os.fsync(f.fileno())
        f.close()
        cur = self._cur
        self.shards.append({"name": cur["name"], "split": self.split, "samples": cur["samples"],
                            "trajectories": len(cur["tids"]), "bytes": self._file.size,
                            "sha256": self._file.sha.hexdigest()})
        self._tar = None

    def finish(self) -> list[dict]:
        if self._tar is not None:
            self._close()
        return self.shards

    def abort(self) -> None:
        if self._tar is not None:
            try:  # close the tar stream first, or its finaliser writes to a closed file
                self._tar.close()
            finally:
                self._cur["f"].close()
                self._tar = None


# -- reading the store ------------------------------------------------------------

class _Unusable(Exception):
    """A trajectory that cannot be exported: quarantined with this reason."""

    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason, self.detail = reason, detail

    def record(self, trajectory_id: str) -> dict:
        return {"trajectory_id": trajectory_id, "reason": self.reason, "detail": self.detail}


def _trajectories(store: RawStore, collections) -> tuple[dict[str, tuple[Trajectory, str]], list[dict]]:
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


def _sorted_step_rows(chosen: dict[str, tuple[Trajectory, str]], tmp_dir: Path,
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


def _group_by_trajectory(rows: Iterator[dict]) -> Iterator[tuple[str, list[dict]]]:
    tid, group = None, []
    for row in rows:
        if row["trajectory_id"] != tid:
            if group:
                yield tid, group
            tid, group = row["trajectory_id"], []
        group.append(row)
    if group:
        yield tid, group


def _samples(store: RawStore, traj: Trajectory, rows: list[dict], source: str) -> list[_Sample]:
    """The samples of one trajectory, or _Unusable saying why there are none."""
    try:
        steps = [row_to_step(r, source=source) for r in rows]
    except SchemaError as err:
        raise _Unusable("invalid_step", str(err)) from None
    indices = [s.index for s in steps]
    if indices != list(range(traj.num_steps)):
        shown = f"{indices[:8]}{'...' if len(indices) > 8 else ''}"
        raise _Unusable("step_count_mismatch", str(SchemaError(
            f"step indices {shown} are not 0..{traj.num_steps - 1} (num_steps={traj.num_steps})",
            source=source, record=traj.trajectory_id, field="index")))
    traj_row = trajectory_to_row(traj)
    out = []
    for step in steps:
        path = store.blobs.path(step.screenshot, step.image_format)
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            raise _Unusable("missing_screenshot", str(SchemaError(
                f"screenshot blob {path} is missing", source=source,
                record=f"{step.trajectory_id}#{step.index}", field="screenshot"))) from None
        out.append(_Sample(trajectory_id=step.trajectory_id,
                           key=sample_key(step.trajectory_id, step.index),
                           image_ext=IMAGE_EXT[step.image_format], image_path=path,
                           image_size=size, json=sample_json(step_to_row(step), traj_row)))
    return out


# -- the export -------------------------------------------------------------------

def export_shards(store: RawStore, out_dir: Path, *, dataset: str, collections=None,
                  max_samples_per_shard: int = 1000, max_bytes_per_shard: int = 500_000_000,
                  splits=DEFAULT_SPLITS, split_seed: str = "v1",
                  progress: Callable[[int], Any] | None = None) -> ExportResult:
    """Write the store's steps as WebDataset shards under out_dir; see the module doc.

    `progress`, if given, is called with the number of samples written after
    each trajectory (a tqdm's `update` fits).
    """
    started = time.perf_counter()
    splits = check_splits(splits)
    if max_samples_per_shard < 1 or max_bytes_per_shard < 1:
        raise ValueError("max_samples_per_shard and max_bytes_per_shard must be positive")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    _remove_leftovers(out_dir)

    chosen, quarantine = _trajectories(store, collections)
    # Shards are written here and moved into out_dir only once all are done,
    # so a failed run leaves the previous export whole.
    staging = Path(tempfile.mkdtemp(dir=out_dir, prefix=".export-"))
    writers = {name: _SplitWriter(staging, name, max_samples_per_shard, max_bytes_per_shard)
               for name, _ in splits}
    exported: dict[str, int] = {name: 0 for name, _ in splits}
    seen: set[str] = set()
    try:
        for tid, rows in _group_by_trajectory(_sorted_step_rows(chosen, staging / "duckdb")):
            seen.add(tid)
            traj, source = chosen[tid]
            try:
                samples = _samples(store, traj, rows, source)
            except _Unusable as bad:
                quarantine.append(bad.record(tid))
                continue
            split = split_of(tid, splits, split_seed)
            writers[split].add_trajectory(samples)
            exported[split] += 1
            if progress is not None:
                progress(len(samples))
        shards = [s for name, _ in splits for s in writers[name].finish()]
    except BaseException:
        for w in writers.values():
            w.abort()
        shutil.rmtree(staging, ignore_errors=True)
        raise

    for tid in sorted(set(chosen) - seen):
        if chosen[tid][0].num_steps == 0:
            quarantine.append(_Unusable("no_steps", "num_steps=0").record(tid))
        else:
            quarantine.append(_Unusable("steps_missing", f"no step rows in {chosen[tid][1]}").record(tid))
    quarantine.sort(key=lambda q: (q["trajectory_id"], q["reason"]))
    skipped: dict[str, int] = {}
    for q in quarantine:
        skipped[q["reason"]] = skipped.get(q["reason"], 0) + 1

    for shard in shards:
        path = staging / shard["name"]
        os.chmod(path, 0o644)
        os.replace(path, out_dir / shard["name"])
    shutil.rmtree(staging, ignore_errors=True)
    _publish(out_dir / QUARANTINE, "".join(
        json.dumps(q, sort_keys=True, ensure_ascii=False) + "\n" for q in quarantine).encode())
    image_exts = set().union(*(w.image_exts for w in writers.values()))
    manifest = _manifest(dataset, splits, split_seed, shards, image_exts, exported, skipped,
                         store, collections)
    _publish(out_dir / MANIFEST, (json.dumps(manifest, indent=2, sort_keys=True,
                                                       ensure_ascii=False) + "\n").encode())
    _remove_stale_shards(out_dir, {s["name"] for s in shards})
    totals = manifest["totals"]
    return ExportResult(out_dir=out_dir, manifest=manifest, samples=totals["samples"],
                        trajectories=totals["trajectories"], shards=totals["shards"],
                        bytes=totals["bytes"], skipped=skipped,
                        seconds=time.perf_counter() - started)


def _manifest(dataset, splits, split_seed, shards, image_exts, exported, skipped, store,
              collections) -> dict:
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
        "created_by": f"trajforge {_package_version()} (trajforge.export)",
        "collections": _collection_names(store, collections),
        "split_seed": split_seed,
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


def _package_version() -> str:
    try:
        return metadata.version("trajforge")
    except metadata.PackageNotFoundError:
        return PIPELINE_VERSION


def _publish(path: Path, data: bytes) -> None:
    atomic_write_bytes(path, data)
    os.chmod(path, 0o644)  # readable by the training job's user


def _remove_leftovers(out_dir: Path) -> None:
    """Temporary files of an export that was killed part-way."""
    for p in out_dir.glob(".*.tmp"):
        p.unlink(missing_ok=True)
    for p in out_dir.glob(".export-*"):
        shutil.rmtree(p, ignore_errors=True)


def _remove_stale_shards(out_dir: Path, keep: set[str]) -> None:
    """Shards of an earlier export that this one did not rewrite (after the commit)."""
    for p in out_dir.glob("*.tar"):
        if SHARD_NAME.match(p.name) and p.name not in keep:
            p.unlink()
