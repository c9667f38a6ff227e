"""Writes the grounding set as WebDataset shards (manifest kind "grounding").

Written through the one set writer (trajforge.publish.shard_set): trajectories
from the curated store sorted by (trajectory_id, index) through DuckDB, one in memory;
the split by task template (trajforge.publish.holdout); shards rolled by count and bytes in a
staging folder, renamed into place; manifest.json (shard sha256s) written last and
atomically; the same input gives the same bytes, and a run killed part-way is
resumed by the next one with the same inputs and options. One shard record per screen
(`<trajectory>_sNNNN_ground`: its image at the model profile's frame and a JSON with
its `samples`), see synthesis/grounding_samples.py. The manifest's `summary` holds the
figures the checks read (drops, dedup, balance before/after, languages, kinds).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from schemas.arrow import row_to_step
from schemas.errors import SchemaError
from schemas.model_profiles import ModelProfile, model_profile
from schemas.provenance import provenance
from trajforge.publish.manifest import code_versions, set_manifest
from trajforge.publish.plan import (
    committed_trajectories,
    group_by_trajectory,
    sorted_step_rows,
)
from trajforge.publish.quarantine import Unusable, quarantine_jsonl
from trajforge.publish.resume import fingerprint
from trajforge.publish.samples import ShardSample, framed_sample
from trajforge.publish.shard_set import SetPass, commit, write_set
from trajforge.store.raw import RawStore

from .grounding_samples import GroundingStats, screen_records
from .set_options import SetOptions
from .set_pii import PersonalData, audit_beside

KIND = "grounding"


def write_grounding_set(
    curated_store: RawStore | Path | str,
    out_dir: Path | str,
    *,
    dataset: str = "grounding_set",
    options: SetOptions = SetOptions(),
    describe=None,
    collections=None,
    pii_audit: Path | str | None = None,
    progress: Callable[[int], Any] | None = None,
) -> dict[str, Any]:
    """Write the set under out_dir; returns the manifest's totals and summary,
    `samples_per_s` (synthesis throughput, images included) and `resumed_shards` (kept
    from a killed run). `progress`, if given, is called with the number of records
    written after each trajectory (a tqdm's `update` fits). `describe`: the functional
    describer (synthesis.grounding_samples.template_describer by default; see
    vlm_describer for a VLM). A resumed run must be given the same describer (by name:
    a VLM's answers are not in the fingerprint). `options`: the model profile, the
    splits and shard limits (synthesis.set_options)."""
    started = time.perf_counter()
    store = curated_store if isinstance(curated_store, RawStore) else RawStore(Path(curated_store))
    layout = options.layout()
    out_dir = Path(out_dir)
    prof = model_profile(options.profile)
    chosen, bad = committed_trajectories(store, collections)
    inputs = {
        "kind": KIND,
        "dataset": dataset,
        "layout": dataclasses.asdict(layout),
        "model_profile": prof.name,
        "describe": _describer_name(describe),
        **code_versions(),
        "provenance": provenance(),
    }  # every sample names the code that made it
    written = write_set(
        out_dir,
        fingerprint(store, chosen, inputs),
        layout,
        (t.task for t, _ in chosen.values()),
        _GroundingPass(store, chosen, prof, describe, progress),
    )
    found: _Found = written.result
    quarantine = [dict(q, index=None) for q in bad] + found.quarantine
    figures = found.stats.result()
    seconds = time.perf_counter() - started
    manifest = set_manifest(KIND, dataset, "synthesis.grounding_writer", written, store, collections)
    manifest.update(_own_fields(written, figures, prof, len(quarantine)))
    # what curation did to the personal data of these screens (synthesis.set_pii)
    manifest["personal_data"] = found.personal.figures(
        pii_audit if pii_audit is not None else audit_beside(store.root)
    )
    commit(out_dir, written, quarantine_jsonl(quarantine), manifest)
    return {
        "out_dir": str(out_dir),
        "dataset": dataset,
        "version": manifest["version"],
        **manifest["totals"],
        "summary": figures,
        "model_profile": prof.name,
        "seconds": seconds,
        "samples_per_s": figures["samples"] / seconds if seconds else 0.0,
        "resumed_shards": written.resumed_shards,
    }


def _describer_name(describe) -> str | None:
    if describe is None:
        return None
    return getattr(describe, "__qualname__", type(describe).__qualname__)


@dataclasses.dataclass
class _Found:
    """What one pass learnt besides its shards."""

    stats: GroundingStats
    personal: PersonalData
    quarantine: list[dict]


@dataclasses.dataclass
class _GroundingPass:
    """One pass over the curated steps (see trajforge.publish.shard_set.write_set): fresh
    state on each call, since a pass that does not line up with a killed run's shards
    starts over."""

    store: RawStore
    chosen: dict
    profile: ModelProfile
    describe: Any
    progress: Callable[[int], Any] | None

    def __call__(self, run: SetPass) -> _Found:
        found, screens_seen = _Found(GroundingStats(), PersonalData(), []), set()
        for tid, rows in group_by_trajectory(sorted_step_rows(self.chosen, run.staging / "duckdb")):
            traj, source = self.chosen[tid]
            try:
                steps = [row_to_step(r, source=source) for r in rows]
            except SchemaError as err:
                found.quarantine.append(
                    {"trajectory_id": tid, "index": None, "reason": "invalid_step", "detail": str(err)}
                )
                continue
            records = screen_records(traj, steps, self.profile, screens_seen, found.stats, self.describe)
            samples = _shard_samples(self.store, traj, records, found.quarantine)
            if samples:
                run.add(traj.task, samples)
                for step, _, _ in records:
                    found.personal.add(tid, step.index)
            if self.progress is not None:
                self.progress(len(samples))
        return found


def _shard_samples(store, traj, records, quarantine) -> list[ShardSample]:
    out = []
    for step, key, obj in records:
        path = store.blobs.path(step.screenshot, step.image_format)
        if not path.is_file():
            quarantine.append(
                {
                    "trajectory_id": traj.trajectory_id,
                    "index": step.index,
                    "reason": "missing_screenshot",
                    "detail": str(path),
                }
            )
            continue
        sample = framed_sample(traj.trajectory_id, key, step, obj, path, path.stat().st_size)
        try:
            sample.prepare()
        except Unusable as bad:
            quarantine.append(
                {
                    "trajectory_id": traj.trajectory_id,
                    "index": step.index,
                    "reason": bad.reason,
                    "detail": bad.detail,
                }
            )
            continue
        out.append(sample)
    return out


def _own_fields(written, figures, prof, quarantined: int) -> dict:
    """The grounding manifest's fields beside the ones every set has."""
    shards = written.shards
    return {
        "model_profile": prof.describe(),
        "provenance": provenance(model_profile=prof.name),
        "sample": {
            "key": "<trajectory_id>_s<index:04d>_ground",
            "unit": "one record per screen; `samples` lists its grounding samples (element, expression)",
        },
        # "samples" of a shard entry count records (screens); grounding samples are here.
        "totals": {
            "records": sum(s["samples"] for s in shards),
            "grounding_samples": figures["samples"],
            "shards": len(shards),
            "bytes": sum(s["bytes"] for s in shards),
            "quarantined": quarantined,
        },
        "summary": figures,
    }
