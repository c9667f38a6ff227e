"""Audits of a curation's output, used by the blocking asset checks and the tests."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq

from filters.pii_audit import PlantedLookup, find_leaks, planted_for_trajectory
from filters.pii_sources import is_synthetic, is_synthetic_source
from schemas.records import LIVE_SOURCES, Step, Trajectory, session_seed
from trajforge.publish.shards import iter_samples
from trajforge.store.raw import RawStore


def unexplained_drops(steps_path: Path) -> int:
    """Dropped rows of the curated table that carry no reason (must be none)."""
    t = pq.read_table(steps_path, columns=["keep", "reason"])
    no_reason = pc.and_(pc.invert(t.column("keep")), pc.is_null(t.column("reason")))
    return pc.sum(pc.fill_null(no_reason, False).cast("int64")).as_py() or 0


def step_texts(step: Step) -> list[str]:
    """Every text field of a step that reaches the shards."""
    texts = [step.url, step.a11y_tree, step.thought or "", step.error or ""]
    texts += [e.name for e in step.elements]
    if step.target is not None:
        texts.append(step.target.name)
    texts += [v for v in step.action.model_dump().values() if isinstance(v, str)]
    return texts


def task_texts(traj: Trajectory) -> list[str]:
    return [traj.task.instruction, traj.task.params_json(), traj.task.start_url or ""]


def curated_leaks(
    store: RawStore, synthetic_sources: Iterable[str] = (), *, planted: PlantedLookup
) -> tuple[int, list[dict]]:
    """(sandbox trajectories checked, planted values found in their text fields).

    `planted`: what each session planted (sandbox.planted_pii.planted_for).

    Trajectories of `synthetic_sources` (filters/pii_sources.py) keep their
    values on purpose: what is found in them is not a leak (curated_pii_audit
    lists it). By default every trajectory counts as real."""
    return _curated_findings(store, tuple(synthetic_sources), planted)[::2]


def curated_pii_audit(store: RawStore, synthetic_sources: Iterable[str], *, planted: PlantedLookup) -> dict:
    """Planted values in the curated store: {"checked", "leaks" (in real-data
    trajectories: must be none), "kept" (in synthetic ones, kept on purpose)}."""
    checked, kept, leaks = _curated_findings(store, tuple(synthetic_sources), planted)
    return {"checked": checked, "leaks": leaks, "kept": kept}


def _curated_findings(store: RawStore, synthetic: tuple[str, ...], lookup: PlantedLookup):
    trajs = {t.trajectory_id: t for t in store.iter_trajectories() if t.source in LIVE_SOURCES}
    planted = {tid: planted_for_trajectory(t, lookup) for tid, t in trajs.items()}
    kept_ids = {tid for tid, t in trajs.items() if is_synthetic(t, synthetic)}
    found = []
    for tid, t in trajs.items():
        for leak in find_leaks(task_texts(t), planted[tid]):
            found.append({"trajectory_id": tid, "field": "task", **leak})
    for step in store.iter_steps():
        if step.trajectory_id not in trajs:
            continue
        for leak in find_leaks(step_texts(step), planted[step.trajectory_id]):
            found.append({"trajectory_id": step.trajectory_id, "index": step.index, **leak})
    kept = [f for f in found if f["trajectory_id"] in kept_ids]
    return len(trajs), kept, [f for f in found if f["trajectory_id"] not in kept_ids]


def shard_leaks(
    shard_dir: Path, synthetic_sources: Iterable[str] = (), *, planted: PlantedLookup
) -> tuple[int, list[dict]]:
    """(sandbox samples checked, planted values found anywhere in their JSON).

    The whole sample document is searched, so every text field that ships counts.
    Samples of `synthetic_sources` keep their values on purpose and are not
    searched; by default every sample counts as real.
    """
    cache: dict[tuple, list[dict]] = {}
    checked, leaks = 0, []
    for key, sample in iter_samples(shard_dir, images=False):
        doc = sample["json"]
        if doc.get("source") != "crawl":
            continue
        if is_synthetic_source(doc.get("source"), doc.get("source_name"), synthetic_sources):
            continue
        task = doc["task"]
        params = json.loads(task.get("params_json") or "{}")
        ident = (doc["app"], task["language"], session_seed(params, doc["seed"]))
        if ident not in cache:
            cache[ident] = planted(*ident)
        checked += 1
        for leak in find_leaks([json.dumps(doc, ensure_ascii=False)], cache[ident]):
            leaks.append({"sample": key, **leak})
    return checked, leaks
