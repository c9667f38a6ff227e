"""Export the raw store to WebDataset shards, split by trajectory, byte-reproducible.

One sample per step: `<key>.png` (or `.jpg` / `.webp`, the screenshot as
stored) and `<key>.json` (the step's row, its trajectory's row and the schema
version; see `sample_json`). Keys are `<trajectory_id>_s0004` made safe by
`shards.key_stem`.

- Splits hold out whole task templates (trajforge.publish.holdout): a stable hash of
  (split_seed, the task's template, else its instruction) picks the split, so
  a template (every seed, every language) and a trajectory never straddle
  train and evaluation, and adding data never moves one to another split. An
  import's official split is kept. The manifest's `held_out` names the
  templates each evaluation split holds out.
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
- Resolution profiles (`schemas.resolution`): images are resized at export
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

The work is split by responsibility: `export_plan` (which trajectories, which
split, step rows in order), `export_samples` (one sample per step),
`export_writer` (tars, hashing, the journal), `export_resume` (a killed run's
shards), `export_manifest` (manifest and publishing), `export_quarantine`
(what is left out and why). This module runs them and re-exports their public
names, the import paths other code uses.
"""
from __future__ import annotations

import json
import os
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from PIL import __version__ as _PILLOW_VERSION

from schemas.records import SCHEMA_VERSION

from trajforge.publish.manifest import (build_manifest, collection_names, count_source, dist_version,
                              package_version,
                              publish, remove_leftovers, remove_stale_shards)
from trajforge.publish.plan import (DEFAULT_SPLITS, DUCKDB_MEMORY, check_splits, committed_trajectories,
                          group_by_trajectory, sorted_step_rows, split_of)
from trajforge.publish.quarantine import QUARANTINE, Unusable, quarantine_jsonl, quarantine_records
from trajforge.publish.resume import (STAGING_PREFIX, ResumeMismatch, fingerprint, resume_staging,
                            skip_resumed)
from trajforge.publish.samples import ShardSample, sample_json, trajectory_samples
from trajforge.publish.writer import JOURNAL, ShardJournal, SplitWriter, fsync_dir
from trajforge.publish.holdout import SPLIT_BY, HoldOut
from schemas.resolution import Resolution, resolution_profile
from trajforge.publish.shards import MANIFEST
from trajforge.store.raw import RawStore

__all__ = [
    "DEFAULT_SPLITS", "DUCKDB_MEMORY", "JOURNAL", "QUARANTINE", "STAGING_PREFIX", "ExportResult",
    "ShardJournal", "ShardSample", "SplitWriter", "check_splits", "committed_trajectories",
    "export_shards", "group_by_trajectory", "package_version", "sample_json", "sorted_step_rows",
    "split_of",
]


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


def export_shards(store: RawStore, out_dir: Path, *, dataset: str, collections=None,
                  max_samples_per_shard: int = 1000, max_bytes_per_shard: int = 500_000_000,
                  splits=DEFAULT_SPLITS, split_seed: str = "v1",
                  resolution: "str | Resolution" = "native",
                  progress: Callable[[int], Any] | None = None,
                  allow_index_gaps: bool = False) -> ExportResult:
    """Write the store's steps as WebDataset shards under out_dir; see the module doc.

    `resolution` is a profile name ("native", "1120", "448", "qwen") or a
    `schemas.resolution.Resolution`. `progress`, if given, is called with the
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
    options = {"dataset": dataset, "collections": collection_names(store, collections),
               "max_samples_per_shard": max_samples_per_shard,
               "max_bytes_per_shard": max_bytes_per_shard, "splits": splits,
               "split_seed": split_seed, "split_by": SPLIT_BY, "resolution": profile.describe(),
               "schema_version": SCHEMA_VERSION, "trajforge": package_version(),
               "pillow": _PILLOW_VERSION, "webdataset": dist_version("webdataset")}
    if allow_index_gaps:
        options["allow_index_gaps"] = True
    # Shards are written here and moved into out_dir only once all are done,
    # so a failed run leaves the previous export whole. The name is fixed by
    # the inputs and options, so a killed run's finished shards are found again.
    staging = out_dir / f"{STAGING_PREFIX}{fingerprint(store, chosen, options)[:24]}"
    remove_leftovers(out_dir, keep=staging.name)
    staging.mkdir(exist_ok=True)
    fsync_dir(out_dir)
    resumed = resume_staging(staging, splits)
    step_skips: list[dict] = []
    holdout = HoldOut(splits, split_seed).plan(t.task for t, _ in chosen.values())
    args = (store, chosen, staging, splits, split_seed, profile, max_samples_per_shard,
            max_bytes_per_shard, progress, allow_index_gaps, step_skips, holdout)
    try:
        shards, image_exts, exported, seen, bad = _write_shards(*args, resumed)
    except ResumeMismatch:
        # The kept shards do not line up with the input (a screenshot that
        # failed to decode before the kill is counted differently): start over
        # rather than risk a duplicate or a gap.
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        resumed = {name: [] for name, _ in splits}
        step_skips.clear()
        shards, image_exts, exported, seen, bad = _write_shards(*args, resumed)
    quarantine, skipped, skipped_steps = quarantine_records(chosen, seen, quarantine + bad,
                                                            step_skips)
    sources: dict = {}
    for tid in sorted(seen - {q["trajectory_id"] for q in bad}):
        count_source(sources, chosen[tid][0])

    for shard in shards:
        path = staging / shard["name"]
        os.chmod(path, 0o644)
        os.replace(path, out_dir / shard["name"])
    shutil.rmtree(staging, ignore_errors=True)
    publish(out_dir / QUARANTINE, quarantine_jsonl(quarantine))
    manifest = build_manifest(dataset, splits, split_seed, shards, image_exts, exported, skipped,
                              store, collections, profile, sources)
    manifest["held_out"] = holdout.manifest()
    if skipped_steps:
        manifest["totals"]["skipped_steps"] = skipped_steps
    if allow_index_gaps or skipped_steps:
        manifest["index_gaps"] = True  # trajforge validate then accepts gaps
    publish(out_dir / MANIFEST, (json.dumps(manifest, indent=2, sort_keys=True,
                                            ensure_ascii=False) + "\n").encode())
    remove_stale_shards(out_dir, {s["name"] for s in shards})
    totals = manifest["totals"]
    return ExportResult(out_dir=out_dir, manifest=manifest, samples=totals["samples"],
                        trajectories=totals["trajectories"], shards=totals["shards"],
                        bytes=totals["bytes"], skipped=skipped,
                        seconds=time.perf_counter() - started,
                        resumed_shards=sum(len(v) for v in resumed.values()),
                        skipped_steps=skipped_steps)


def _write_shards(store, chosen, staging, splits, split_seed, profile, max_samples, max_bytes,
                  progress, allow_index_gaps, step_skips, holdout, resumed):
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
    holdout.reset()
    resizer = ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1),
                                 thread_name_prefix="export-resize")
    try:
        for tid, rows in group_by_trajectory(sorted_step_rows(chosen, staging / "duckdb")):
            seen.add(tid)
            traj, source = chosen[tid]
            split = holdout.split(traj.task)
            try:
                samples = trajectory_samples(store, traj, rows, source, profile,
                                             allow_index_gaps, step_skips)
                todo = skip_resumed(samples, split, to_skip, resumed)
                if any(t.resize_to for t in todo):
                    # Pillow lets go of the GIL to decode, resize and encode.
                    list(resizer.map(ShardSample.prepare, todo))
            except Unusable as bad:
                quarantine.append(bad.record(tid))
                continue
            if todo:
                writers[split].add_trajectory(todo)
            exported[split] += 1
            holdout.add(traj.task, split)
            if progress is not None:
                progress(len(samples))
        if any(to_skip.values()):
            raise ResumeMismatch(f"the journal holds more samples than the input: {to_skip}")
        shards = [s for name, _ in splits for s in writers[name].finish()]
    except ResumeMismatch:
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
