"""Writes the reasoning set (and the Chinese GUI set) as WebDataset shards.

Written through the one set writer (trajforge.publish.shard_set): trajectories
read from the curated store sorted by (trajectory_id, index) through DuckDB
(streamed, one trajectory in memory), the split by task template
(trajforge.publish.holdout: a stable hash of the template, else the instruction; an
import's official split kept; the manifest's `held_out` names the held-out
templates), so neither a trajectory nor a template straddles splits, shards rolled
by count and bytes with a trajectory kept in one shard, tar members with mtime
0 and fixed owner, JSON with sorted keys: the same input gives the same bytes.
Shards are written in a staging folder and renamed into place when all are
done; manifest.json (with each shard's sha256) is written last, atomically,
and is the commit; shards of an earlier run that this one did not rewrite are
removed after it. A run killed part-way is resumed by the next one with the
same inputs (curated store, CoT rows, alignment, recorded steps, options): its
finished shards are kept, and the set comes out byte-identical.

One sample per (step, mode); see synthesis/reasoning_set.py. The set is
written for one model profile (schemas.model_profiles; `options.profile`, default
qwen2.5-vl): each image is the curated store's blob resized to the frame that
profile's trainer feeds (schemas.resolution.resize_image, LANCZOS, the stored
format; the blob's bytes as they are when the frame is the screenshot's size),
once per step for both modes, and the answers' points are in that frame. The
manifest names the profile (`model_profile`) and what made the set
(`provenance`: pipeline version, git commit, profile), and counts the source
environments and verifiers of its trajectories (`sources`, `verifiers`). The histories are the
trajectories as executed: `recorded` (the raw steps the curation read) gives
the steps a filter dropped, streamed beside the curated ones in the same
(trajectory_id, index) order. Everything left out is counted
in the manifest's totals and listed in quarantine.jsonl with its reason.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from schemas.arrow import row_to_step
from schemas.errors import SchemaError
from schemas.model_profiles import model_profile
from schemas.provenance import provenance
from schemas.records import Step, Trajectory
from trajforge.publish.manifest import code_versions, count_source, set_manifest, source_counts
from trajforge.publish.plan import (
    DUCKDB_MEMORY,
    committed_trajectories,
    group_by_trajectory,
    sorted_step_rows,
)
from trajforge.publish.quarantine import Unusable, quarantine_jsonl
from trajforge.publish.resume import fingerprint
from trajforge.publish.samples import ShardSample, framed_sample
from trajforge.publish.shard_set import SetPass, commit, write_set
from trajforge.store.raw import RawStore

from .reasoning_set import MODES, sample_jsons
from .set_options import ReasoningSetOptions
from .set_pii import PersonalData, audit_beside
from .set_stats import SetStats, set_checks

KIND = "reasoning_set"


def write_reasoning_set(
    curated_store: RawStore | Path | str,
    cot_rows: Iterable,
    out_dir: Path | str,
    *,
    dataset: str,
    options: ReasoningSetOptions = ReasoningSetOptions(),
    alignment: Mapping[tuple[str, int], Any] | None = None,
    collections=None,
    recorded: RawStore | Path | str | list | None = None,
    progress: Callable[[int], Any] | None = None,
    pii_audit: Path | str | None = None,
) -> dict[str, Any]:
    """Write the set under out_dir; returns a summary (totals, figures, checks, and
    `resumed_shards`: kept from a killed run).

    `cot_rows`: StepCoT records or rows of a CoT table (dicts with its fields;
    a row may carry an `alignment` dict). `alignment`: {(trajectory_id, index):
    AlignmentResult or its dict}; a step whose result says keep=False is
    dropped as "misaligned". `options`: the model profile (the manifest names
    it), the splits and shard limits, and which steps go in (synthesis.set_options).
    `recorded`: the steps as recorded, dropped ones included (a RawStore, or a
    steps Parquet file or list of them, e.g. raw_steps/steps.parquet): every
    sample's history lists all executed steps before it. Without it, a step
    after a dropped one is skipped as "history_incomplete". `pii_audit`: the
    curation's audit (default: the one beside the curated store); the manifest's
    `personal_data` counts its lines for the set's own steps (synthesis.set_pii).
    """
    started = time.perf_counter()
    store = curated_store if isinstance(curated_store, RawStore) else RawStore(Path(curated_store))
    layout = options.layout()
    out_dir = Path(out_dir)
    prof = model_profile(options.profile)
    manifest_options = {
        "language": options.language,
        "require_chinese_thought": options.require_chinese_thought,
        "min_steps": options.min_steps,
        "max_steps": options.max_steps,
        "modes": list(MODES),
        "model_profile": prof.name,
    }

    refused: list[dict] = []  # before the pass: repeated CoT rows, invalid trajectories
    cots, aligned = _index_cot_rows(cot_rows, alignment, refused)
    chosen, bad_trajs = committed_trajectories(store, collections)
    refused += [dict(q, index=None) for q in bad_trajs]
    inputs = {
        **manifest_options,
        "kind": KIND,
        "dataset": dataset,
        "layout": dataclasses.asdict(layout),
        "cot": _digest(cots),
        "alignment": _digest(aligned),
        "recorded": _files_stat(_recorded_files(recorded)),
        **code_versions(),
        "provenance": provenance(),
    }  # every sample names the code that made it
    fill = _ReasoningPass(
        store, chosen, cots, aligned, {**manifest_options, "profile": prof}, recorded, progress
    )
    written = write_set(
        out_dir, fingerprint(store, chosen, inputs), layout, (t.task for t, _ in chosen.values()), fill
    )
    found: _Found = written.result

    quarantine = refused + found.quarantine
    for key in sorted(found.cots_left):  # CoT rows whose step is not in the curated store: said, not lost
        quarantine.append(
            {
                "trajectory_id": key[0],
                "index": key[1],
                "reason": "cot_without_step",
                "detail": "no such kept step in the curated store",
            }
        )
    quarantine.sort(key=lambda q: (q["trajectory_id"], -1 if q["index"] is None else q["index"], q["reason"]))
    skipped_steps = Counter(q["reason"] for q in quarantine if q["index"] is not None)
    figures = found.stats.result()
    manifest = _manifest(dataset, written, manifest_options, figures, quarantine, store, collections)
    manifest["model_profile"] = prof.describe()
    manifest["provenance"] = provenance(model_profile=prof.name)
    manifest.update(source_counts(found.sources))
    manifest["personal_data"] = found.personal.figures(
        pii_audit if pii_audit is not None else audit_beside(store.root)
    )
    commit(out_dir, written, quarantine_jsonl(quarantine), manifest)
    return {
        "out_dir": str(out_dir),
        "dataset": dataset,
        "version": manifest["version"],
        **manifest["totals"],
        "stats": figures,
        "model_profile": prof.name,
        "provenance": manifest["provenance"],
        "sources": manifest["sources"],
        "verifiers": manifest["verifiers"],
        "checks": set_checks(
            figures,
            language=options.language,
            require_chinese_thought=options.require_chinese_thought,
            skipped_steps=dict(skipped_steps),
        ),
        "seconds": time.perf_counter() - started,
        "resumed_shards": written.resumed_shards,
    }


def write_chinese_gui_set(
    curated_store,
    cot_rows: Iterable,
    out_dir,
    *,
    dataset: str = "chinese_gui",
    options: ReasoningSetOptions = ReasoningSetOptions(),
    **kw,
) -> dict[str, Any]:
    """The Chinese GUI set: zh tasks only, and every kept thought written in Chinese."""
    zh = dataclasses.replace(options, language="zh", require_chinese_thought=True)
    return write_reasoning_set(curated_store, cot_rows, out_dir, dataset=dataset, options=zh, **kw)


def _index_cot_rows(cot_rows, alignment, quarantine) -> tuple[dict, dict]:
    """{(tid, index): row} and {(tid, index): alignment}; a repeated step keeps its first row."""
    cots: dict[tuple[str, int], Any] = {}
    aligned: dict[tuple[str, int], Any] = dict(alignment or {})
    for row in cot_rows:
        get = row.get if isinstance(row, Mapping) else lambda k, d=None: getattr(row, k, d)
        key = (get("trajectory_id"), get("index"))
        if key in cots:
            quarantine.append(
                {
                    "trajectory_id": key[0],
                    "index": key[1],
                    "reason": "duplicate_cot",
                    "detail": "a second CoT row for this step; kept the first",
                }
            )
            continue
        cots[key] = row
        if get("alignment") is not None and key not in aligned:
            aligned[key] = get("alignment")
    return cots, aligned


def _digest(rows: Mapping) -> str:
    """Names CoT rows or alignment results, for the fingerprint a resumed run must match."""
    h = hashlib.sha256()
    for key in sorted(rows):
        row = rows[key]
        if dataclasses.is_dataclass(row):
            row = dataclasses.asdict(row)
        h.update(json.dumps([list(key), row], sort_keys=True, default=str).encode() + b"\n")
    return h.hexdigest()


def _recorded_files(recorded) -> list[str]:
    if recorded is None:
        return []
    if isinstance(recorded, RawStore):
        return [str(f) for f in recorded.step_files()]
    if isinstance(recorded, (str, Path)):
        return [str(recorded)]
    return [str(f) for f in recorded]


def _files_stat(files: list[str]) -> list[list]:
    """Each file with its size and mtime: a recorded file rewritten means other input."""
    out = []
    for f in sorted(files):
        st = Path(f).stat()
        out.append([f, st.st_size, st.st_mtime_ns])
    return out


@dataclasses.dataclass
class _Found:
    """What one pass learnt besides its shards."""

    stats: SetStats
    personal: PersonalData
    quarantine: list[dict]
    sources: dict
    cots_left: set  # (trajectory_id, index) of CoT rows no kept step took


@dataclasses.dataclass
class _ReasoningPass:
    """One pass over the curated steps (see trajforge.publish.shard_set.write_set): fresh
    state on each call, since a pass that does not line up with a killed run's shards
    starts over."""

    store: RawStore
    chosen: dict[str, tuple[Trajectory, str]]
    cots: dict
    aligned: dict
    options: dict
    recorded: Any
    progress: Callable[[int], Any] | None

    def __call__(self, run: SetPass) -> _Found:
        found = _Found(SetStats(), PersonalData(), [], {}, set(self.cots))
        history = _RecordedSteps(self.recorded, list(self.chosen), run.staging / "duckdb-recorded")
        seen: set[str] = set()
        try:
            rows = sorted_step_rows(self.chosen, run.staging / "duckdb")
            for tid, group in group_by_trajectory(rows):
                seen.add(tid)
                n = self._trajectory(run, tid, group, history.steps_of(tid), found)
                if n is not None and self.progress is not None:
                    self.progress(n)
        finally:
            history.close()
        for tid in sorted(set(self.chosen) - seen):
            found.quarantine.append(
                {
                    "trajectory_id": tid,
                    "index": None,
                    "reason": "steps_missing",
                    "detail": f"no step rows in {self.chosen[tid][1]}",
                }
            )
        return found

    def _trajectory(self, run: SetPass, tid: str, rows: list[dict], recorded, found: _Found) -> int | None:
        """Writes one trajectory's samples; their count, or None when it is quarantined."""
        traj, source = self.chosen[tid]
        try:
            steps = [row_to_step(r, source=source) for r in rows]
        except SchemaError as err:
            found.quarantine.append(
                {"trajectory_id": tid, "index": None, "reason": "invalid_step", "detail": str(err)}
            )
            return None
        indices = [s.index for s in steps]
        if any(a >= b for a, b in zip(indices, indices[1:])):
            found.quarantine.append(
                {
                    "trajectory_id": tid,
                    "index": None,
                    "reason": "repeated_index",
                    "detail": str(
                        SchemaError(
                            f"step indices {indices[:8]} repeat", source=source, record=tid, field="index"
                        )
                    ),
                }
            )
            return None
        mine = {i: self.cots[(tid, i)] for i in indices if (tid, i) in self.cots}
        found.cots_left -= {(tid, i) for i in mine}
        align = {i: self.aligned[(tid, i)] for i in indices if (tid, i) in self.aligned}
        samples = self._samples(traj, steps, mine, align, found, source, recorded)
        if samples:
            run.add(traj.task, samples)
            count_source(found.sources, traj)
            for smp in samples:
                found.personal.add(tid, json.loads(smp.json)["index"])
        return len(samples)

    def _samples(self, traj, steps, cots, align, found: _Found, source, recorded=None) -> list[ShardSample]:
        """Both modes of every step of one trajectory that gives any; what is left out goes
        to found.quarantine, counted once per step."""
        store, options = self.store, self.options
        quarantine = found.quarantine
        skipped: list[dict] = []
        planned = sample_jsons(
            traj,
            steps,
            cots,
            alignment=align,
            language=options["language"],
            require_chinese_thought=options["require_chinese_thought"],
            min_steps=options["min_steps"],
            max_steps=options["max_steps"],
            skipped=skipped,
            recorded=recorded,
            profile=options["profile"],
        )
        quarantine += skipped
        out, missing = [], set()
        framed: dict[int, bytes] = {}  # the step's image at the frame, shared by both modes
        for step, key, obj in planned:
            path = store.blobs.path(step.screenshot, step.image_format)
            try:
                size = path.stat().st_size
            except FileNotFoundError:
                if step.index not in missing:  # both modes go; counted once for the step
                    missing.add(step.index)
                    quarantine.append(
                        {
                            "trajectory_id": traj.trajectory_id,
                            "index": step.index,
                            "reason": "missing_screenshot",
                            "detail": str(
                                SchemaError(
                                    f"screenshot blob {path} is missing",
                                    source=source,
                                    record=f"{traj.trajectory_id}#{step.index}",
                                    field="screenshot",
                                )
                            ),
                        }
                    )
                continue
            sample = framed_sample(traj.trajectory_id, key, step, obj, path, size)
            if sample.resize_to is not None:
                if step.index in missing:
                    continue
                if step.index in framed:
                    sample.resized = framed[step.index]
                else:
                    try:
                        sample.prepare()
                    except Unusable as bad:  # the blob does not decode: the step goes, counted once
                        missing.add(step.index)
                        quarantine.append(
                            {
                                "trajectory_id": traj.trajectory_id,
                                "index": step.index,
                                "reason": bad.reason,
                                "detail": bad.detail,
                            }
                        )
                        continue
                    framed[step.index] = sample.resized
            found.stats.add(key, obj)
            out.append(sample)
        return out


class _RecordedSteps:
    """The recorded steps of the chosen trajectories, trajectory by trajectory, in the
    order sorted_step_rows hands out the curated ones (both sorted by DuckDB on
    trajectory_id), so one trajectory's rows are held at a time. A repeated index
    keeps its first row (file order), as the curation does."""

    def __init__(self, recorded, ids: list[str], tmp_dir: Path):
        self._groups, self._con = iter(()), None
        self._next: tuple[str, list[dict]] | None = None
        files = _recorded_files(recorded)
        if not files:
            return
        tmp_dir.mkdir(parents=True, exist_ok=True)
        self._con = duckdb.connect(config={"memory_limit": DUCKDB_MEMORY, "temp_directory": str(tmp_dir)})
        self._con.register("chosen", pa.table({"trajectory_id": ids}))
        rel = self._con.sql(
            """SELECT s.* EXCLUDE (filename, file_row_number)
               FROM read_parquet(?, filename = true, file_row_number = true,
                                 union_by_name = true) s
               SEMI JOIN chosen c ON s.trajectory_id = c.trajectory_id
               ORDER BY s.trajectory_id, s."index", s.filename, s.file_row_number""",
            params=[files],
        )
        reader = getattr(rel, "to_arrow_reader", None) or rel.fetch_arrow_reader
        self._groups = group_by_trajectory(row for batch in reader(256) for row in batch.to_pylist())
        self._next = next(self._groups, None)

    def steps_of(self, tid: str) -> list[Step] | None:
        """The recorded steps of `tid` (None when it has none); ids must come in order."""
        while self._next is not None and self._next[0] < tid:
            self._next = next(self._groups, None)
        if self._next is None or self._next[0] != tid:
            return None
        out, seen = [], set()
        for row in self._next[1]:
            if row["index"] in seen:
                continue
            seen.add(row["index"])
            try:
                out.append(row_to_step(row))
            except SchemaError:
                continue  # an invalid recorded step: its index stays a gap
        return out

    def close(self) -> None:
        if self._con is not None:
            self._con.close()


def _manifest(dataset, written, options, figures, quarantine, store, collections) -> dict:
    skipped_trajectories = Counter(q["reason"] for q in quarantine if q["index"] is None)
    skipped_steps = Counter(q["reason"] for q in quarantine if q["index"] is not None)
    manifest = set_manifest(KIND, dataset, "synthesis.set_writer", written, store, collections)
    manifest.update(
        {
            "options": options,
            "index_gaps": True,  # curated steps keep their original indices
            "sample": {
                "key": "<trajectory_id>_s<index:04d>_<mode>",
                "modes": list(MODES),
                "image_exts": sorted(written.image_exts),
                "json": "trajectory_id, index, mode, language, app, platform, source, "
                "source_name, verifier, task_id, template_id, instruction, "
                "image (its size: the model profile's frame), screenshot (the "
                "recorded size), model_profile, coords, provenance, "
                "action (recorded, normalised), conversations (system/human/gpt), "
                "answer (GUI-Libra, points in the frame), spans (char offsets "
                "into the gpt value), target_box (normalised), "
                "thought_backend, alignment",
            },
            "totals": {
                "samples": sum(s["samples"] for s in written.shards),
                "steps": figures["steps"],
                "trajectories": sum(written.per_split.values()),
                "shards": len(written.shards),
                "bytes": sum(s["bytes"] for s in written.shards),
                "skipped_trajectories": dict(sorted(skipped_trajectories.items())),
                "skipped_steps": dict(sorted(skipped_steps.items())),
            },
            "summary": {
                k: figures[k]
                for k in (
                    "modes",
                    "languages",
                    "language_share",
                    "action_types",
                    "thought_chars",
                    "thought_backends",
                    "thought_backend_share",
                    "alignment",
                )
            },
            # The largest image of the set: a trainer's image_max_pixels below it would shrink
            # that image out of its answers' frame (training.data.frame_gate).
            "frames": {"max_pixels": figures["max_image_pixels"]},
        }
    )
    return manifest
