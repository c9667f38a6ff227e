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

The work is split by responsibility: `shard_set` (the one set writer: staging,
split writers, hold-out, resume, commit), `plan` (which trajectories, which
split, step rows in order), `samples` (one sample per step), `writer` (tars,
hashing, the journal), `resume` (a killed run's shards), `manifest` (manifest
and publishing), `quarantine` (what is left out and why). This module runs
them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from schemas.resolution import Resolution, resolution_profile
from trajforge.publish.holdout import SPLIT_BY
from trajforge.publish.manifest import code_versions, collection_names, count_source, export_manifest
from trajforge.publish.plan import (
    DEFAULT_SPLITS,
    check_splits,
    committed_trajectories,
    group_by_trajectory,
    sorted_step_rows,
)
from trajforge.publish.quarantine import Unusable, quarantine_jsonl, quarantine_records
from trajforge.publish.resume import fingerprint
from trajforge.publish.samples import trajectory_samples
from trajforge.publish.shard_set import SetLayout, SetPass, commit, write_set
from trajforge.publish.shards import MANIFEST
from trajforge.store.raw import RawStore


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


def export_shards(
    store: RawStore,
    out_dir: Path,
    *,
    dataset: str,
    collections=None,
    max_samples_per_shard: int = 1000,
    max_bytes_per_shard: int = 500_000_000,
    splits=DEFAULT_SPLITS,
    split_seed: str = "v1",
    resolution: str | Resolution = "native",
    progress: Callable[[int], Any] | None = None,
    allow_index_gaps: bool = False,
) -> ExportResult:
    """Write the store's steps as WebDataset shards under out_dir; see the module doc.

    `resolution` is a profile name ("native", "1120", "448", "qwen") or a
    `schemas.resolution.Resolution`. `progress`, if given, is called with the
    number of samples done after each trajectory (a tqdm's `update` fits);
    samples kept from a resumed run count as done. `allow_index_gaps`: see the
    module doc (for a curated store, whose dropped steps leave gaps).
    """
    started = time.perf_counter()
    splits = check_splits(splits)
    layout = SetLayout(splits, split_seed, max_samples_per_shard, max_bytes_per_shard)
    profile = resolution_profile(resolution)
    out_dir = Path(out_dir)
    chosen, quarantine = committed_trajectories(store, collections)
    options = {
        "dataset": dataset,
        "collections": collection_names(store, collections),
        "max_samples_per_shard": max_samples_per_shard,
        "max_bytes_per_shard": max_bytes_per_shard,
        "splits": splits,
        "split_seed": split_seed,
        "split_by": SPLIT_BY,
        "resolution": profile.describe(),
        **code_versions(),
    }
    if allow_index_gaps:
        options["allow_index_gaps"] = True
    fill = _ExportPass(store, chosen, profile, allow_index_gaps, progress)
    written = write_set(
        out_dir, fingerprint(store, chosen, options), layout, (t.task for t, _ in chosen.values()), fill
    )
    seen, bad, step_skips = written.result
    quarantine, skipped, skipped_steps = quarantine_records(chosen, seen, quarantine + bad, step_skips)
    sources: dict = {}
    for tid in sorted(seen - {q["trajectory_id"] for q in bad}):
        count_source(sources, chosen[tid][0])
    manifest = export_manifest(dataset, written, store, collections, profile, sources, skipped)
    if skipped_steps:
        manifest["totals"]["skipped_steps"] = skipped_steps
    if allow_index_gaps or skipped_steps:
        manifest["index_gaps"] = True  # trajforge validate then accepts gaps
    commit(out_dir, written, quarantine_jsonl(quarantine), manifest)
    totals = manifest["totals"]
    return ExportResult(
        out_dir=out_dir,
        manifest=manifest,
        samples=totals["samples"],
        trajectories=totals["trajectories"],
        shards=totals["shards"],
        bytes=totals["bytes"],
        skipped=skipped,
        seconds=time.perf_counter() - started,
        resumed_shards=written.resumed_shards,
        skipped_steps=skipped_steps,
    )


@dataclass
class _ExportPass:
    """One pass of the export over the store's step rows (see shard_set.write_set).

    Returns (ids seen, trajectories quarantined, steps skipped): fresh on each call,
    since a pass that does not line up with a killed run's shards starts over.
    """

    store: RawStore
    chosen: dict
    profile: Resolution
    allow_index_gaps: bool
    progress: Callable[[int], Any] | None

    def __call__(self, run: SetPass) -> tuple[set[str], list[dict], list[dict]]:
        seen: set[str] = set()
        bad: list[dict] = []
        step_skips: list[dict] = []
        for tid, rows in group_by_trajectory(sorted_step_rows(self.chosen, run.staging / "duckdb")):
            seen.add(tid)
            traj, source = self.chosen[tid]
            try:
                samples = trajectory_samples(
                    self.store, traj, rows, source, self.profile, self.allow_index_gaps, step_skips
                )
                run.add(traj.task, samples)
            except Unusable as unusable:
                bad.append(unusable.record(tid))
                continue
            if self.progress is not None:
                self.progress(len(samples))
        return seen, bad, step_skips
