"""The curated output (what `curated_steps` writes) on object storage.

`filters.pipeline.curate` writes a local folder: steps.parquet (a verdict per raw
step), trajectories.parquet, pii_audit.jsonl, store/ (the kept, scrubbed
trajectories: a RawStore) and summary.json. `publish_curated` puts that folder at
an fsspec URL as a new generation and then switches a pointer to it:

    <url>/blobs/<sha[:2]>/<sha>.<ext>           shared by generations, put if absent
    <url>/<gen>/steps.parquet, trajectories.parquet, pii_audit.jsonl
    <url>/<gen>/store/curated/...               an ObjectRawStore: parts + commit markers
    <url>/<gen>/summary.json
    <url>/CURRENT.json                          {"generation": <gen>}: the commit, put last

A reader reads CURRENT.json first and only that generation, so it never sees half
a table, and a re-run replaces the curated data in one put (a single object is
replaced atomically). Generations older than the previous one are then removed
(the previous stays for a reader that read CURRENT just before the switch).
`sync_curated` brings the current generation into a local folder in the local
layout, for the readers that want files (the export's DuckDB sort, the checks).
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pyarrow.parquet as pq

from schemas.errors import SchemaError
from trajforge.store.object_folder import ObjectFolder
from trajforge.store.object_store import ObjectBlobStore, ObjectRawStore
from trajforge.store.raw import RawStore, atomic_write_bytes

CURRENT = "CURRENT.json"
TABLES = ("steps.parquet", "trajectories.parquet", "pii_audit.jsonl")
SUMMARY = "summary.json"
GENERATION_FILE = ".generation"  # in a synced local folder: which generation it holds
BLOB_THREADS = 8  # puts wait on the network, not the CPU


@dataclass
class CuratedRemote:
    """One generation of curated data at a URL, read in place."""

    url: str
    generation: str
    folder: ObjectFolder  # <url>/<gen>
    store: ObjectRawStore  # <url>/<gen>/store, blobs at <url>/blobs

    @property
    def summary(self) -> dict:
        return json.loads(self.folder.get_bytes(SUMMARY, "curated summary"))

    def read_table(self, name: str = "steps.parquet"):
        import pyarrow as pa

        data = self.folder.get_bytes(name, "curated table")
        try:
            return pq.read_table(pa.BufferReader(data))
        except pa.ArrowInvalid as exc:
            raise SchemaError(
                f"damaged Parquet file ({exc})", source=self.folder.url_of(name), field="file"
            ) from exc


def _store_at(base: ObjectFolder, generation: str) -> ObjectRawStore:
    store = ObjectRawStore(
        f"{base.url}/{generation}/store", base.storage_options, attempts=base.attempts, timeout=base.timeout
    )
    # Blobs are content-addressed: one copy serves every generation.
    store.blobs = ObjectBlobStore(store.fs, f"{base.root}/blobs", store.protocol, base.attempts, base.timeout)
    return store


def new_generation() -> str:
    """gen-<UTC time to the microsecond>-<random>: names sort by age (clocks in sync)."""
    return f"gen-{datetime.now(UTC).strftime('%Y%m%dT%H%M%S%fZ')}-{uuid.uuid4().hex[:8]}"


def publish_curated(local_dir: Path | str, url: str, storage_options: dict | None = None, **folder_kw) -> str:
    """Put a finished local curated folder at `url` as a new generation; returns its name."""
    local_dir = Path(local_dir)
    if not (local_dir / SUMMARY).is_file():
        raise FileNotFoundError(f"{local_dir / SUMMARY}: not found (the curation did not finish)")
    base = ObjectFolder(url, storage_options, **folder_kw)
    generation = new_generation()
    folder = base.child(generation)
    for name in TABLES:
        if (local_dir / name).is_file():
            folder.put_file(name, local_dir / name, "curated table")
    store = _store_at(base, generation)
    local_store = RawStore(local_dir / "store")
    _put_blobs(local_store, store)
    for collection in local_store.collections():
        with store.writer(collection, writer_id="publish") as w:
            for steps_file, trajs_file in local_store._parts(collection):
                w.add_tables(local_store.read_table(steps_file), local_store.read_table(trajs_file))
    folder.put_file(SUMMARY, local_dir / SUMMARY, "curated summary")
    base.put_bytes(CURRENT, json.dumps({"generation": generation}).encode(), "curated pointer")
    _remove_old_generations(base)
    (local_dir / GENERATION_FILE).write_text(generation)
    return generation


def _previous(local_dir: Path) -> list[str]:
    p = local_dir / GENERATION_FILE
    return [p.read_text().strip()] if p.is_file() else []


def _put_blobs(local: RawStore, remote: ObjectRawStore) -> None:
    files = [p for p in local.blobs.root.rglob("*.*") if p.is_file() and not p.name.startswith(".")]

    def put(p: Path) -> None:
        sha, ext = p.name.split(".", 1)
        remote.blobs._write(sha, ext, p.read_bytes())

    with ThreadPoolExecutor(BLOB_THREADS, thread_name_prefix="curated-blob-put") as pool:
        list(pool.map(put, files))


def _remove_old_generations(base: ObjectFolder) -> None:
    """Remove generations older than the one before the current pointer's. Names start
    with a UTC time, so they sort by age; the pointer is read again here, and newer
    generations (another node publishing now) are never touched."""
    current = current_generation(base.url, base.storage_options)
    if current is None:
        return
    gens = sorted({name.split("/", 1)[0] for name in base.sizes() if name.startswith("gen-")})
    older = [g for g in gens if g < current]
    for gen in older[:-1]:  # the previous one stays for a reader caught mid-switch
        for name in sorted(base.sizes(gen)):
            base.remove(name, "old curated generation")


def current_generation(url: str, storage_options: dict | None = None) -> str | None:
    data = ObjectFolder(url, storage_options).get_or_none(CURRENT, "curated pointer")
    if data is None:
        return None
    try:
        return json.loads(data)["generation"]
    except (ValueError, KeyError, TypeError) as exc:
        raise SchemaError(
            f"not a curated pointer ({exc})", source=f"{url.rstrip('/')}/{CURRENT}", field="generation"
        ) from None


def open_curated(url: str, storage_options: dict | None = None) -> CuratedRemote:
    """The current generation at `url`; FileNotFoundError if nothing was published there."""
    gen = current_generation(url, storage_options)
    if gen is None:
        raise FileNotFoundError(f"{url.rstrip('/')}/{CURRENT}: no curated data published here")
    base = ObjectFolder(url, storage_options)
    return CuratedRemote(base.url, gen, base.child(gen), _store_at(base, gen))


def sync_curated(url: str, local_dir: Path | str, storage_options: dict | None = None) -> str:
    """Make `local_dir` hold the current generation at `url`, in the local layout that
    `curate` writes (nothing is fetched when it already does). Returns the generation."""
    remote = open_curated(url, storage_options)
    local_dir = Path(local_dir)
    if _previous(local_dir) == [remote.generation] and (local_dir / SUMMARY).is_file():
        return remote.generation
    local_dir.mkdir(parents=True, exist_ok=True)
    (local_dir / SUMMARY).unlink(missing_ok=True)  # the local commit, rewritten last
    staging = local_dir / f".sync-{remote.generation}"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        _fetch_generation(remote, staging)
        for name in TABLES:
            if (staging / name).exists():
                os.replace(staging / name, local_dir / name)
        shutil.rmtree(local_dir / "store", ignore_errors=True)
        os.replace(staging / "store", local_dir / "store")
        os.replace(staging / SUMMARY, local_dir / SUMMARY)
        (local_dir / GENERATION_FILE).write_text(remote.generation)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return remote.generation


def _fetch_generation(remote: CuratedRemote, staging: Path) -> None:
    present = remote.folder.sizes()
    for name in TABLES:
        if name in present:
            remote.folder.get_file(name, staging / name, present[name], "curated table")
    local = RawStore(staging / "store")
    shas: set[tuple[str, str]] = set()
    for collection in remote.store.collections():
        folder = local.root / collection
        for n, (steps_file, trajs_file) in enumerate(remote.store._parts(collection)):
            for kind, f in (("steps", steps_file), ("trajectories", trajs_file)):
                data = remote.store._retry(
                    lambda: remote.store.fs.cat_file(f, timeout=remote.store.timeout),
                    f"reading {remote.store.full_url(f)}",
                )
                atomic_write_bytes(folder / f"part-{n:06d}.{kind}.parquet", data)
            table = pq.read_table(
                folder / f"part-{n:06d}.steps.parquet", columns=["screenshot", "image_format"]
            )
            for sha, fmt in zip(
                table.column("screenshot").to_pylist(), table.column("image_format").to_pylist()
            ):
                if sha:
                    shas.add((sha, fmt or "png"))
    local.root.mkdir(parents=True, exist_ok=True)

    def get(item):
        sha, ext = item
        atomic_write_bytes(local.blobs.path(sha, ext), remote.store.blobs.get(sha, ext))

    with ThreadPoolExecutor(BLOB_THREADS, thread_name_prefix="curated-blob-get") as pool:
        list(pool.map(get, sorted(shas)))
    remote.folder.get_file(SUMMARY, staging / SUMMARY, None, "curated summary")
