"""Publishing an export: the manifest (written last, atomically: it is the
commit), the versions it names, and clearing what an earlier run left.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from importlib import metadata
from pathlib import Path

import PIL

from schemas.provenance import pipeline_version, provenance
from schemas.records import SCHEMA_VERSION
from schemas.resolution import Resolution
from trajforge.publish.resume import STAGING_PREFIX
from trajforge.publish.shards import SHARD_NAME
from trajforge.store.raw import RawStore, atomic_write_bytes


def export_manifest(
    dataset: str,
    written,
    store: RawStore,
    collections,
    profile: Resolution,
    sources: dict | None,
    skipped: dict,
) -> dict:
    """The export's manifest: the fields every set has (set_manifest, no kind) and its own."""
    shards = written.shards
    return {
        **set_manifest(None, dataset, "trajforge.publish.export", written, store, collections),
        "resolution": profile.describe(),
        # What made it (pipeline version, git commit), the model profile the images were
        # sized for (None: coordinates stay normalised, no model's frame), and the source
        # environments and verifiers of its trajectories.
        "provenance": provenance(model_profile=profile.model_profile),
        **source_counts(sources),
        "sample": {
            "key": "<trajectory_id>_s<index:04d>",
            "image_exts": sorted(written.image_exts),
            "json": "step row + trajectory row (error -> trajectory_error) + schema_version",
        },
        "totals": {
            "samples": sum(s["samples"] for s in shards),
            "trajectories": sum(written.per_split.values()),
            "shards": len(shards),
            "bytes": sum(s["bytes"] for s in shards),
            "skipped": skipped,
        },
    }


def set_manifest(kind: str | None, dataset: str, made_by: str, written, store: RawStore, collections) -> dict:
    """The fields every set's manifest has: format, kind (not the export's), dataset,
    version, schema_version, created_by, collections, split_seed, splits, held_out,
    shards. `written`: the set's `shard_set.SetWrite`."""
    return {
        "format": "webdataset",
        **({} if kind is None else {"kind": kind}),
        "dataset": dataset,
        "version": content_version(written.shards, kind),
        "schema_version": SCHEMA_VERSION,
        "created_by": f"trajforge {package_version()} ({made_by})",
        "collections": collection_names(store, collections),
        "split_seed": written.layout.split_seed,
        "splits": split_summary(written.layout.splits, written.shards, written.per_split),
        "held_out": written.held_out,
        "shards": written.shards,
    }


def split_summary(splits, shards: list[dict], trajectories: dict[str, int]) -> dict:
    """{split: fraction, trajectories, samples, shard names}: the manifest's `splits`."""
    out = {}
    for name, frac in splits:
        mine = [s for s in shards if s["split"] == name]
        out[name] = {
            "fraction": frac,
            "trajectories": trajectories[name],
            "samples": sum(s["samples"] for s in mine),
            "shards": [s["name"] for s in mine],
        }
    return out


def content_version(shards: list[dict], kind: str | None = None) -> str:
    """The version names the content: same shards (and kind), same version."""
    named = {"schema_version": SCHEMA_VERSION, "shards": shards}
    if kind is not None:
        named["kind"] = kind
    return hashlib.sha256(json.dumps(named, sort_keys=True).encode()).hexdigest()[:16]


def collection_names(store: RawStore, collections) -> list[str]:
    if collections is None:
        return store.collections()
    return sorted([collections] if isinstance(collections, str) else collections)


def dist_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "unknown"


def package_version() -> str:
    return pipeline_version()


def code_versions() -> dict[str, str]:
    """What the bytes of a set depend on besides its inputs, for a resume fingerprint:
    a killed run's shards made by other code are not kept."""
    return {
        "schema_version": SCHEMA_VERSION,
        "trajforge": package_version(),
        "pillow": PIL.__version__,
        "webdataset": dist_version("webdataset"),
    }


def source_counts(sources: dict | None) -> dict:
    """{"sources": {source_name: trajectories}, "verifiers": {verifier: trajectories}}
    from {"sources": Counter, "verifiers": Counter} (a trajectory without a verifier
    counts under "none")."""
    sources = sources or {}
    return {
        k: dict(sorted((str(n), c) for n, c in (sources.get(k) or {}).items()))
        for k in ("sources", "verifiers")
    }


def count_source(sources: dict, traj) -> None:
    """Count `traj`'s source environment and verifier into `sources` (see source_counts)."""
    for key, value in (("sources", traj.source_name), ("verifiers", traj.verifier or "none")):
        bucket = sources.setdefault(key, {})
        bucket[value] = bucket.get(value, 0) + 1


def publish(path: Path, data: bytes) -> None:
    atomic_write_bytes(path, data)
    os.chmod(path, 0o644)  # readable by the training job's user


def remove_leftovers(out_dir: Path, keep: str) -> None:
    """Temporary files of an export killed part-way, and staging folders of
    other inputs or options (they can never be resumed)."""
    for p in out_dir.glob(".*.tmp"):
        p.unlink(missing_ok=True)
    for p in out_dir.glob(f"{STAGING_PREFIX}*"):
        if p.name != keep:
            shutil.rmtree(p, ignore_errors=True)


def remove_stale_shards(out_dir: Path, keep: set[str]) -> None:
    """Shards of an earlier export that this one did not rewrite (after the commit)."""
    for p in out_dir.glob("*.tar"):
        if SHARD_NAME.match(p.name) and p.name not in keep:
            p.unlink()
