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
- Atomic: each shard is written under a temporary name and renamed; the
  manifest is written last and is the commit.
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
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import pyarrow as pa
import webdataset as wds

from schemas.arrow import row_to_step, step_to_row, trajectory_to_row
from schemas.errors import SchemaError
from schemas.records import PIPELINE_VERSION, SCHEMA_VERSION, Trajectory

from .shards import IMAGE_EXT, MANIFEST, SHARD_NAME, sample_key
from .store import RawStore, atomic_write_bytes

DEFAULT_SPLITS = (("train", 0.9), ("val", 0.05), ("test", 0.05))
QUARANTINE = "quarantine.jsonl"
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
    key: str
    image_ext: str
    image_path: Path
    image_size: int
    json: bytes

    def tar_bytes(self) -> int:
        return _member_bytes(self.image_size) + _member_bytes(len(self.json))

    def record(self) -> dict[str, bytes | str]:
        return {"__key__": self.key, self.image_ext: self.image_path.read_bytes(), "json": self.json}


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
    """Writes one split's shards, rolling by sample count and tar bytes.

    A trajectory stays in one shard unless it alone is over a limit, so that a
    shard reader sees a trajectory's steps together.
    """

    def __init__(self, out_dir: Path, split: str, max_samples: int, max_bytes: int):
        self.out_dir, self.split = out_dir, split
        self.max_samples, self.max_bytes = max_samples, max_bytes
        self.shards: list[dict] = []
        self._tar = None
        self._n = 0

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
            self._cur["samples"] += 1
            self._cur["payload"] += size
            self._cur["tids"].add(sample.key.rsplit("_s", 1)[0])

    def _fits(self, n: int, size: int) -> bool:
        cur = self._cur
        return (cur["samples"] + n <= self.max_samples
                and cur["payload"] + size + _TAR_END <= self.max_bytes)

    def _open(self) -> None:
        name = f"{self.split}-{self._n:06d}.tar"
        self._n += 1
        fd, tmp = tempfile.mkstemp(dir=self.out_dir, prefix=f".{name}.", suffix=".tmp")
        f = os.fdopen(fd, "wb")
        self._file = _HashingFile(f)
        self._tar = wds.TarWriter(self._file, encoder=False, mtime=0, mode=0o644,
                                  user="trajforge", group="trajforge")
        self._cur = {"name": name, "tmp": Path(tmp), "f": f, "samples": 0, "payload": 0,
                     "tids": set()}

    def _close(self) -> None:
        self._tar.close()
        cur, f = self._cur, self._cur["f"]
        f.flush()
        os.fsync(f.fileno())
        f.close()
        os.replace(cur["tmp"], self.out_dir / cur["name"])
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
            self._cur["f"].close()
            self._cur["tmp"].unlink(missing_ok=True)
            self._tar = None


# -- reading the store ------------------------------------------------------------

def _trajectories(store: RawStore, collections) -> tuple[dict[str, tuple[Trajectory, str]], list[dict]]:
    """{id: (trajectory, its steps file)}; a repeated id keeps its first copy."""
    chosen: dict[str, tuple[Trajectory, str]] = {}
    dupes = []
    for tfile in store.trajectory_files(collections):
        steps_file = str(tfile).replace(".trajectories.parquet", ".steps.parquet")
        for traj in store.iter_trajectories_in(tfile) if hasattr(store, "iter_trajectories_in") \
                else _read_trajectories(tfile):
            if traj.trajectory_id in chosen:
                dupes.append({"trajectory_id": traj.trajectory_id, "reason": "duplicate_id",
                              "detail": f"also in {chosen[traj.trajectory_id][1]}; kept that one, "
                                        f"skipped {steps_file}"})
                continue
            chosen[traj.trajectory_id] = (traj, steps_file)
    return chosen, dupes


def _read_trajectories(tfile: Path) -> Iterator[Trajectory]:
    import pyarrow.parquet as pq

    from schemas.arrow import TRAJECTORY_SCHEMA, row_to_trajectory
    for row in pq.read_table(tfile, schema=TRAJECTORY_SCHEMA).to_pylist():
        yield row_to_trajectory(row, source=str(tfile))


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
    con = duckdb.connect(config={"memory_limit": "1GB", "temp_directory": str(tmp_dir),
                                 "preserve_insertion_order": True})
    try:
        con.register("chosen", keys)
        reader = con.execute(
            """SELECT s.* EXCLUDE (filename) FROM read_parquet(?, filename = true, union_by_name = true) s
               JOIN chosen c ON s.trajectory_id = c.trajectory_id AND s.filename = c.filename
               ORDER BY s.trajectory_id, s."index" """, [files]).fetch_record_batch(batch_size)
        for batch in reader:
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
    """The samples of one trajectory; SchemaError (quarantine) when it is unusable."""
    steps = [row_to_step(r, source=source) for r in rows]
    indices = [s.index for s in steps]
    if indices != list(range(traj.num_steps)):
        raise SchemaError(f"step indices {indices[:5]}{'...' if len(indices) > 5 else ''} "
                          f"do not match num_steps={traj.num_steps}",
                          source=source, record=traj.trajectory_id, field="index")
    traj_row = trajectory_to_row(traj)
    out = []
    for step in steps:
        path = store.blobs.path(step.screenshot, step.image_format)
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            raise SchemaError(f"screenshot blob {path} is missing", source=source,
                              record=f"{step.trajectory_id}#{step.index}", field="screenshot") from None
        out.append(_Sample(key=sample_key(step.trajectory_id, step.index),
                           image_ext=IMAGE_EXT[step.image_format], image_path=path,
                           image_size=size, json=sample_json(step_to_row(step), traj_row)))
    return out


_REASONS = {"index": "step_count_mismatch", "screenshot": "missing_screenshot"}


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
    writers = {name: _SplitWriter(out_dir, name, max_samples_per_shard, max_bytes_per_shard)
               for name, _ in splits}
    exported: dict[str, int] = {name: 0 for name, _ in splits}
    seen: set[str] = set()
    tmp_dir = Path(tempfile.mkdtemp(dir=out_dir, prefix=".export-"))
    try:
        for tid, rows in _group_by_trajectory(_sorted_step_rows(chosen, tmp_dir)):
            seen.add(tid)
            traj, source = chosen[tid]
            try:
                samples = _samples(store, traj, rows, source)
            except SchemaError as err:
                quarantine.append({"trajectory_id": tid, "detail": str(err),
                                   "reason": _REASONS.get(err.field, "invalid_step")})
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
        raise
    finally:
        shutil.rmtree(tmp_dir, ignore_errors=True)

    for tid in sorted(set(chosen) - seen):
        if chosen[tid][0].num_steps == 0:
            quarantine.append({"trajectory_id": tid, "reason": "no_steps", "detail": "num_steps=0"})
        else:
            quarantine.append({"trajectory_id": tid, "reason": "steps_missing",
                               "detail": f"no step rows in {chosen[tid][1]}"})
    quarantine.sort(key=lambda q: (q["trajectory_id"], q["reason"]))
    skipped: dict[str, int] = {}
    for q in quarantine:
        skipped[q["reason"]] = skipped.get(q["reason"], 0) + 1

    atomic_write_bytes(out_dir / QUARANTINE, "".join(
        json.dumps(q, sort_keys=True, ensure_ascii=False) + "\n" for q in quarantine).encode())
    manifest = _manifest(dataset, splits, split_seed, shards, exported, skipped, store, collections)
    atomic_write_bytes(out_dir / MANIFEST, (json.dumps(manifest, indent=2, sort_keys=True,
                                                       ensure_ascii=False) + "\n").encode())
    _remove_stale_shards(out_dir, {s["name"] for s in shards})
    totals = manifest["totals"]
    return ExportResult(out_dir=out_dir, manifest=manifest, samples=totals["samples"],
                        trajectories=totals["trajectories"], shards=totals["shards"],
                        bytes=totals["bytes"], skipped=skipped,
                        seconds=time.perf_counter() - started)


def _manifest(dataset, splits, split_seed, shards, exported, skipped, store, collections) -> dict:
    image_exts: set[str] = set()
    split_info = {}
    for name, frac in splits:
        mine = [s for s in shards if s["split"] == name]
        split_info[name] = {"fraction": frac, "trajectories": exported[name],
                            "samples": sum(s["samples"] for s in mine),
                            "shards": [s["name"] for s in mine]}
    # The version names the content: same shards, same version.
    version = hashlib.sha256(json.dumps(
        {"schema_version": SCHEMA_VERSION, "shards": shards}, sort_keys=True).encode()).hexdigest()[:16]
    for s in shards:  # which image members exist, for hf_features()
        image_exts |= _image_exts_of(store, s)
    return {
        "format": "webdataset",
        "dataset": dataset,
        "version": version,
        "schema_version": SCHEMA_VERSION,
        "created_by": f"trajforge {_package_version()} (trajforge.export)",
        "collections": sorted(store._select(collections)),
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


def _image_exts_of(store, shard) -> set[str]:
    return set()


def _package_version() -> str:
    try:
        return metadata.version("trajforge")
    except metadata.PackageNotFoundError:
        return PIPELINE_VERSION


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
