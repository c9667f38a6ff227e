"""Writes the grounding set as WebDataset shards (manifest kind "grounding").

The reasoning set's machinery (synthesis.set_writer, trajforge.publish.export): trajectories
from the curated store sorted by (trajectory_id, index) through DuckDB, one in memory;
the split by task template (trajforge.publish.holdout); shards rolled by count and bytes in a
staging folder, renamed into place; manifest.json (shard sha256s) written last and
atomically; the same input gives the same bytes. One shard record per screen
(`<trajectory>_sNNNN_ground`: its image at the model profile's frame and a JSON with
its `samples`), see synthesis/grounding_samples.py. The manifest's `summary` holds the
figures the checks read (drops, dedup, balance before/after, languages, kinds).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from schemas.arrow import row_to_step
from schemas.errors import SchemaError
from schemas.model_profiles import DEFAULT_PROFILE, ModelProfile, model_profile
from schemas.provenance import provenance
from schemas.records import SCHEMA_VERSION
from trajforge.publish.export import (DEFAULT_SPLITS, QUARANTINE, STAGING_PREFIX, ShardJournal,
                              ShardSample, SplitWriter, check_splits, committed_trajectories,
                              group_by_trajectory, package_version, sorted_step_rows)
from trajforge.publish.quarantine import Unusable
from trajforge.publish.holdout import HoldOut
from trajforge.publish.shards import IMAGE_EXT, MANIFEST, SHARD_NAME
from trajforge.store.raw import RawStore

from .grounding_samples import GroundingStats, screen_records
from .set_pii import PersonalData, audit_beside
from .set_writer import _publish

KIND = "grounding"
_STAGING = f"{STAGING_PREFIX}{KIND}"


def write_grounding_set(curated_store: RawStore | Path | str, out_dir: Path | str, *,
                        dataset: str = "grounding_set",
                        profile: "str | ModelProfile" = DEFAULT_PROFILE, describe=None,
                        collections=None, splits=DEFAULT_SPLITS, split_seed: str = "v1",
                        max_samples_per_shard: int = 1000,
                        max_bytes_per_shard: int = 500_000_000,
                        pii_audit: Path | str | None = None) -> dict[str, Any]:
    """Write the set under out_dir; returns the manifest's totals and summary, and
    `samples_per_s` (synthesis throughput, images included). `describe`: the functional
    describer (synthesis.grounding_samples.template_describer by default; see
    vlm_describer for a VLM)."""
    started = time.perf_counter()
    store = curated_store if isinstance(curated_store, RawStore) else RawStore(Path(curated_store))
    splits = check_splits(splits)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    prof = model_profile(profile)
    chosen, bad = committed_trajectories(store, collections)
    quarantine = [dict(q, index=None) for q in bad]
    staging = out_dir / _STAGING
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    stats, seen, personal = GroundingStats(), set(), PersonalData()
    journal = ShardJournal(staging)
    writers = {n: SplitWriter(staging, n, max_samples_per_shard, max_bytes_per_shard, journal)
               for n, _ in splits}
    per_split = {n: 0 for n, _ in splits}
    holdout = HoldOut(splits, split_seed).plan(t.task for t, _ in chosen.values())
    try:
        for tid, rows in group_by_trajectory(sorted_step_rows(chosen, staging / "duckdb")):
            traj, source = chosen[tid]
            try:
                steps = [row_to_step(r, source=source) for r in rows]
            except SchemaError as err:
                quarantine.append({"trajectory_id": tid, "index": None, "reason": "invalid_step",
                                   "detail": str(err)})
                continue
            records = screen_records(traj, steps, prof, seen, stats, describe)
            samples = _shard_samples(store, traj, records, quarantine)
            if samples:
                split = holdout.split(traj.task)
                writers[split].add_trajectory(samples)
                per_split[split] += 1
                holdout.add(traj.task, split)
                for step, _, _ in records:
                    personal.add(tid, step.index)
        shards = [s for n, _ in splits for s in writers[n].finish()]
    except BaseException:
        for w in writers.values():
            w.abort()
        shutil.rmtree(staging, ignore_errors=True)
        raise
    for shard in shards:
        os.chmod(staging / shard["name"], 0o644)
        os.replace(staging / shard["name"], out_dir / shard["name"])
    shutil.rmtree(staging, ignore_errors=True)
    _publish(out_dir / QUARANTINE, "".join(
        json.dumps(q, sort_keys=True, ensure_ascii=False) + "\n" for q in quarantine).encode())
    figures = stats.result()
    seconds = time.perf_counter() - started
    manifest = _manifest(dataset, splits, split_seed, shards, per_split, figures, prof,
                         holdout.manifest(), store, collections, len(quarantine))
    # what curation did to the personal data of these screens (synthesis.set_pii)
    manifest["personal_data"] = personal.figures(
        pii_audit if pii_audit is not None else audit_beside(store.root))
    _publish(out_dir / MANIFEST, (json.dumps(manifest, indent=2, sort_keys=True,
                                             ensure_ascii=False) + "\n").encode())
    for p in out_dir.glob("*.tar"):
        if SHARD_NAME.match(p.name) and p.name not in {s["name"] for s in shards}:
            p.unlink()
    return {"out_dir": str(out_dir), "dataset": dataset, "version": manifest["version"],
            **manifest["totals"], "summary": figures, "model_profile": prof.name,
            "seconds": seconds, "samples_per_s": figures["samples"] / seconds if seconds else 0.0}


def _shard_samples(store, traj, records, quarantine) -> list[ShardSample]:
    out = []
    for step, key, obj in records:
        path = store.blobs.path(step.screenshot, step.image_format)
        if not path.is_file():
            quarantine.append({"trajectory_id": traj.trajectory_id, "index": step.index,
                               "reason": "missing_screenshot", "detail": str(path)})
            continue
        frame = (obj["image"]["width"], obj["image"]["height"])
        sample = ShardSample(trajectory_id=traj.trajectory_id, key=key,
                             image_ext=IMAGE_EXT[step.image_format], image_path=path,
                             image_size=path.stat().st_size, image_format=step.image_format,
                             resize_to=None if frame == (step.width, step.height) else frame,
                             json=json.dumps(obj, sort_keys=True, ensure_ascii=False,
                                             separators=(",", ":"), allow_nan=False).encode())
        try:
            sample.prepare()
        except Unusable as bad:
            quarantine.append({"trajectory_id": traj.trajectory_id, "index": step.index,
                               "reason": bad.reason, "detail": bad.detail})
            continue
        out.append(sample)
    return out


def _manifest(dataset, splits, split_seed, shards, per_split, figures, prof, held_out, store,
              collections, quarantined) -> dict:
    split_info = {}
    for name, frac in splits:
        mine = [s for s in shards if s["split"] == name]
        split_info[name] = {"fraction": frac, "trajectories": per_split[name],
                            "samples": sum(s["samples"] for s in mine),
                            "shards": [s["name"] for s in mine]}
    version = hashlib.sha256(json.dumps({"kind": KIND, "schema_version": SCHEMA_VERSION,
                                         "shards": shards}, sort_keys=True).encode()).hexdigest()[:16]
    return {
        "format": "webdataset", "kind": KIND, "dataset": dataset, "version": version,
        "schema_version": SCHEMA_VERSION,
        "created_by": f"trajforge {package_version()} (synthesis.grounding_writer)",
        "collections": store.collections() if collections is None else sorted(
            [collections] if isinstance(collections, str) else collections),
        "split_seed": split_seed, "splits": split_info, "held_out": held_out,
        "model_profile": prof.describe(), "provenance": provenance(model_profile=prof.name),
        "sample": {"key": "<trajectory_id>_s<index:04d>_ground", "unit": "one record per "
                   "screen; `samples` lists its grounding samples (element, expression)"},
        # "samples" of a shard entry count records (screens); grounding samples are here.
        "totals": {"records": sum(s["samples"] for s in shards), "grounding_samples":
                   figures["samples"], "shards": len(shards),
                   "bytes": sum(s["bytes"] for s in shards), "quarantined": quarantined},
        "summary": figures,
        "shards": shards,
    }
