"""curate(): every raw step gets a verdict, a reason and its scores; the kept ones are scrubbed.

Passes over raw_steps/steps.parquet, sorted by (trajectory_id, index) and
streamed a trajectory at a time (only hashes, signatures and keys are held
across the dataset, never images):

0. judge (only with a Judge): trajectories it should see, in small batches.
1. score: each distinct screenshot decoded once (cache by sha, a thread pool),
   every filter's scores computed and spilled to a temporary Parquet file.
   Near-duplicate search then runs once over all the hashes.
2. decide + scrub: the first failing filter (filters.steps.FILTER_ORDER) gives
   the reason; kept steps are scrubbed (filters.pii) and written, with their
   blurred screenshots, to a RawStore at out_dir/store (collection "curated").

Outputs in out_dir: steps.parquet (one row per INPUT step), trajectories.parquet
(trajectory-level verdicts), store/ and summary.json, written last. Tables go
to temporary names and are renamed; the store is built beside the old one and
swapped in, so a re-run replaces it. The same input gives the same tables.
"""
from __future__ import annotations

import json
import os
import shutil
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa
import pyarrow.parquet as pq

from schemas.arrow import row_to_step, row_to_trajectory, upgrade_trajectories
from schemas.errors import SchemaError
from schemas.records import Trajectory
from trajforge.store.raw import BlobStore, RawStore

from .base import BASE_COLUMNS, ScreenInfo, StepView, TrajectoryContext, check_order, decide, score_columns
from .pii_sources import DEFAULT_SYNTHETIC_SOURCES, is_synthetic
from .curated_table import (TRAJECTORY_VERDICT_SCHEMA, CuratedWriter, link_blob, sorted_groups,
                            steps_schema, swap_in)
from .steps import BLANK_MIN_STD, FILTER_ORDER, NearDuplicate, default_filters, read_screen

COLLECTION = "curated"
PII_AUDIT = "pii_audit.jsonl"
OCR_MODES = ("no_tree", "always", "never")
EXTRA_REASONS = ("no_steps", "no_steps_kept")  # trajectory-only reasons


@dataclass(frozen=True)
class CurateConfig:
    min_steps: int = 3
    max_steps: int = 50
    drop_failed: bool = True
    loop_k: int = 3
    near_duplicate_max_distance: int | None = None   # None: neardup.DEFAULT_MAX_DISTANCE
    noop_max_distance: int = 1
    blank_min_std: float = BLANK_MIN_STD
    element_max_distance: float = 0.0
    oob_tolerance: float = 0.0
    trusted_verifiers: tuple[str, ...] = ("state",)
    judge_trusted: bool = True      # judge state-verified runs too, to measure agreement
    judge_batch: int = 4            # trajectories per Judge.judge call
    scrub: bool = True
    # Sources whose personal data is synthetic (filters/pii_sources.py): kept, listed.
    synthetic_sources: tuple[str, ...] = DEFAULT_SYNTHETIC_SOURCES
    # OCR for real data's screenshots: "no_tree" (those without a tree or elements),
    # "always", or "never" (filters/pii_ocr.py).
    ocr: str = "no_tree"
    batch_rows: int = 512
    workers: int = 2                # screenshot decoding threads (PIL lets go of the GIL)
    histogram_max_distance: int = 32   # the whole range, so the plot shows where the radius cuts


@dataclass
class CurateResult:
    out_dir: Path
    steps_in: int
    steps_kept: int
    dropped: dict[str, int]
    trajectories_in: int
    trajectories_kept: int
    pii: dict[str, int]
    summary: dict
    seconds: float
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def store(self) -> RawStore:
        return RawStore(self.out_dir / "store")


def curate(raw_steps_dir: Path, blobs: BlobStore, out_dir: Path, *, config: CurateConfig | None = None,
           judge=None, progress: Callable[[str], Any] | None = None) -> CurateResult:
    """Curate raw_steps_dir (steps.parquet + trajectories.parquet; screenshots in `blobs`).

    `progress`, if given, is called with a short line of text after each batch
    (a logger's `info` fits).
    """
    started = time.perf_counter()
    config = config or CurateConfig()
    raw_steps_dir, out_dir = Path(raw_steps_dir), Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    work = out_dir / ".curate-work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    say = progress or (lambda msg: None)
    try:
        run = _Run(raw_steps_dir, blobs, out_dir, work, config, judge, say)
        result = run.execute()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result.seconds = time.perf_counter() - started
    return result


class _Run:
    def __init__(self, raw_steps_dir, blobs, out_dir, work, config, judge, say):
        self.steps_path = raw_steps_dir / "steps.parquet"
        self.trajs_path = raw_steps_dir / "trajectories.parquet"
        self.blobs, self.out_dir, self.work = blobs, out_dir, work
        self.config, self.judge, self.say = config, judge, say
        self.filters = default_filters(config)
        check_order(self.filters)
        self.traj_filters = [f for f in self.filters if f.level == "trajectory"]
        self.near = next(f for f in self.filters if isinstance(f, NearDuplicate))
        self.columns = score_columns(self.filters)
        self.schema = steps_schema(self.columns)
        self.pass1_schema = pa.schema([(n, t) for n, t in {**BASE_COLUMNS, **self.columns}.items()])
        self.screens: dict[tuple[str, str], ScreenInfo] = {}
        self.verdicts: dict[str, Any] = {}
        self.timings: dict[str, float] = {}
        self.pii_steps = 0
        if config.ocr not in OCR_MODES:
            raise ValueError(f"CurateConfig.ocr={config.ocr!r}: expected one of {OCR_MODES}")
        self.pii_kept: Counter[str] = Counter()
        self.policies: Counter[str] = Counter()
        self.ocr_screens = 0
        self._ocr_engine = None
        self.audit_tmp = out_dir / f".{PII_AUDIT}.tmp"
        self.audit_lines: list[str] = []

    # -- input --------------------------------------------------------------------------
    def _trajectories(self) -> dict[str, Trajectory]:
        for p in (self.steps_path, self.trajs_path):
            if not p.is_file():
                raise FileNotFoundError(f"{p}: not found (run the consolidation first)")
        out = {}
        src = str(self.trajs_path)
        for batch in pq.ParquetFile(self.trajs_path).iter_batches(batch_size=1024):
            for row in upgrade_trajectories(batch).to_pylist():
                t = row_to_trajectory(row, source=src)
                if t.trajectory_id in out:
                    raise SchemaError("duplicate trajectory id", source=src,
                                      record=t.trajectory_id, field="trajectory_id")
                out[t.trajectory_id] = t
        return out

    def _groups(self, name: str):
        return sorted_groups(self.steps_path, self.work / name, self.config.batch_rows)

    def _chunks(self, name: str):
        """Lists of whole trajectories of about batch_rows steps."""
        chunk, n = [], 0
        for tid, rows in self._groups(name):
            chunk.append((tid, rows))
            n += len(rows)
            if n >= self.config.batch_rows:
                yield chunk
                chunk, n = [], 0
        if chunk:
            yield chunk

    def _views(self, tid: str, rows: list[dict], row0: int, traj: Trajectory | None) -> list[StepView]:
        views, seen = [], set()
        for i, raw in enumerate(rows):
            error = None
            try:
                step = row_to_step(raw, source=str(self.steps_path))
            except SchemaError as err:
                step, error = None, str(err)
            record = f"{tid}#{raw.get('index')}"
            if error is None and traj is None:
                error = str(SchemaError("no row in trajectories.parquet for this step",
                                        source=str(self.steps_path), record=record,
                                        field="trajectory_id"))
            elif error is None and step.index in seen:
                error = str(SchemaError("step index repeated in its trajectory",
                                        source=str(self.steps_path), record=record, field="index"))
            elif error is None and step.index >= traj.num_steps:
                error = str(SchemaError(f"index >= num_steps={traj.num_steps}",
                                        source=str(self.steps_path), record=record, field="index"))
            if step is not None:
                seen.add(step.index)
            sha, fmt = raw.get("screenshot") or "", raw.get("image_format") or "png"
            screen = self.screens.get((sha, fmt)) or ScreenInfo(status="empty", error="step has no screenshot")
            views.append(StepView(row=row0 + i, raw=raw, step=step, error=error, screen=screen))
        return views

    def _decode(self, pool: ThreadPoolExecutor, chunk) -> None:
        todo = sorted({(r.get("screenshot") or "", r.get("image_format") or "png")
                       for _, rows in chunk for r in rows} - set(self.screens))
        for key, info in zip(todo, pool.map(lambda k: read_screen(self.blobs, *k), todo)):
            self.screens[key] = info

    # -- pass 0: the judge ------------------------------------------------------------------
    def _wants_judge(self, traj: Trajectory, n_rows: int) -> bool:
        c = self.config
        if not c.min_steps <= n_rows <= c.max_steps:
            return False
        if traj.verified_by in c.trusted_verifiers:
            return c.judge_trusted
        return not (c.drop_failed and traj.outcome in ("failure", "error"))

    def _run_judge(self, trajs: dict[str, Trajectory]) -> None:
        from .judge import JudgeInput
        t0 = time.perf_counter()
        pending: list = []

        def flush():
            for v in self.judge.judge(pending):
                self.verdicts[v.trajectory_id] = v
            pending.clear()

        for tid, rows in self._groups("judge"):
            traj = trajs.get(tid)
            if traj is None or not self._wants_judge(traj, len(rows)):
                continue
            steps, images = [], []
            for raw in rows:
                try:
                    step = row_to_step(raw, source=str(self.steps_path))
                except SchemaError:
                    continue  # the judge sees the steps it can; the filters count the rest
                path = self.blobs.path(step.screenshot, step.image_format)
                steps.append(step)
                images.append(path.read_bytes() if step.screenshot and path.is_file() else b"")
            if steps:
                pending.append(JudgeInput(trajectory=traj, steps=steps, images=images))
            if len(pending) >= self.config.judge_batch:
                flush()
        if pending:
            flush()
        self.say(f"curate: judged {len(self.verdicts)} trajectories")
        self.timings["judge_s"] = round(time.perf_counter() - t0, 3)

    # -- pass 1: scores ---------------------------------------------------------------------
    def _score(self, trajs: dict[str, Trajectory]) -> tuple[int, set[str]]:
        t0 = time.perf_counter()
        path = self.work / "scores.parquet"
        n, seen = 0, set()
        with ThreadPoolExecutor(max_workers=max(1, self.config.workers)) as pool, \
                pq.ParquetWriter(path, self.pass1_schema, compression="zstd") as writer:
            for chunk in self._chunks("score"):
                self._decode(pool, chunk)
                rows_out = []
                for tid, rows in chunk:
                    seen.add(tid)
                    rows_out += self._score_trajectory(tid, rows, n, trajs.get(tid))
                    n += len(rows)
                writer.write_table(pa.Table.from_pylist(rows_out, schema=self.pass1_schema))
                self.say(f"curate: scored {n} steps")
        self.timings["score_s"] = round(time.perf_counter() - t0, 3)
        return n, seen

    def _score_trajectory(self, tid, rows, row0, traj) -> list[dict]:
        views = self._views(tid, rows, row0, traj)
        ctx = TrajectoryContext(trajectory=traj, steps=views, judge=self.verdicts.get(tid))
        out = [{"trajectory_id": tid, "index": v.raw.get("index"), "row": v.row,
                "action_type": (v.raw.get("action") or {}).get("type")} for v in views]
        for f in self.traj_filters:
            for o, s in zip(out, f.score(ctx)):
                o.update(s)
        # Steps of a trajectory that the trajectory-level filters drop are never
        # the "earlier step" a later duplicate is dropped for.
        ctx.extra["reference"] = traj is not None and decide(self.traj_filters, out[0])[0]
        for f in self.filters:
            if f.level == "step":
                for o, s in zip(out, f.score(ctx)):
                    o.update(s)
        return out

    # -- pass 2: decide, scrub, write -----------------------------------------------------------
    def _write(self, trajs: dict[str, Trajectory], n_steps: int):
        t0 = time.perf_counter()
        dup_of, distance = self.near.resolve()
        assert len(dup_of) == n_steps, (len(dup_of), n_steps)
        store_tmp = self.work / "store"
        store = RawStore(store_tmp)
        steps_tmp = self.out_dir / ".steps.parquet.tmp"
        scores = _rows_of(pq.ParquetFile(self.work / "scores.parquet"), self.config.batch_rows)
        dropped: Counter[str] = Counter({r: 0 for r in FILTER_ORDER})
        pii: Counter[str] = Counter()
        traj_rows = {}
        kept_steps = 0
        with pq.ParquetWriter(steps_tmp, self.schema, compression="zstd") as writer, \
                CuratedWriter(store, COLLECTION, batch_size=64) as curated, \
                ThreadPoolExecutor(max_workers=max(1, self.config.workers)) as pool:
            buf = []
            for tid, raws in self._groups("write"):
                traj = trajs.get(tid)
                rows = [next(scores) for _ in raws]
                to_scrub = []
                for raw, row in zip(raws, rows):
                    assert (row["trajectory_id"], row["index"]) == (tid, raw["index"])
                    if dup_of[row["row"]] >= 0:
                        row["neardup_of"] = int(dup_of[row["row"]])
                        row["neardup_distance"] = int(distance[row["row"]])
                    row["keep"], row["reason"] = decide(self.filters, row)
                    row.update(pii_kinds=None, pii_count=None, screenshot_out=None)
                    if row["keep"]:
                        to_scrub.append(raw)
                    else:
                        dropped[row["reason"]] += 1
                    buf.append(row)
                # Decoding, blurring and encoding let go of the GIL: a step per thread.
                kept_rows = [r for r in rows if r["keep"]]
                policy, surrogates = self._pii_policy(traj, to_scrub)
                kept = [self._store_scrubbed(res, row, store, pii, policy)
                        for res, row in zip(pool.map(
                            lambda raw: self._scrub(raw, policy, surrogates), to_scrub), kept_rows)]
                kept_steps += len(kept)
                traj_rows[tid] = self._finish_trajectory(traj, rows, kept, curated, pii, policy,
                                                         surrogates)
                if len(buf) >= self.config.batch_rows:
                    writer.write_table(pa.Table.from_pylist(buf, schema=self.schema))
                    buf = []
                    self.say(f"curate: decided {rows[-1]['row'] + 1} of {n_steps} steps")
            if buf:
                writer.write_table(pa.Table.from_pylist(buf, schema=self.schema))
        self.timings["write_s"] = round(time.perf_counter() - t0, 3)
        return steps_tmp, store_tmp, dropped, pii, traj_rows, kept_steps

    def _pii_policy(self, traj: Trajectory | None, raws: list[dict]):
        """("off" | "synthetic_kept" | "surrogate", the trajectory's Surrogates or None).

        The surrogates learn the values of the task and of the typed text first, so
        that the same value is replaced in every field even where only one field's
        context lets the detectors find it."""
        if not self.config.scrub or traj is None:
            return "off", None
        if is_synthetic(traj, self.config.synthetic_sources):
            return "synthetic_kept", None
        from .pii_surrogate import Surrogates
        surrogates = Surrogates(traj.trajectory_id)
        surrogates.learn(traj.task.instruction)
        surrogates.learn(traj.task.params_json())
        for raw in raws:
            surrogates.learn((raw.get("action") or {}).get("text"))
        return "surrogate", surrogates

    def _ocr(self):
        if self._ocr_engine is None:
            from .pii_ocr import default_engine
            self._ocr_engine = default_engine()
        return self._ocr_engine

    def _scrub(self, raw: dict, policy: str, surrogates):
        """(scrubbed step, PII records, blurred image or None, whether OCR read it); runs
        in a worker thread."""
        step = row_to_step(raw, source=str(self.steps_path))
        if policy == "off":
            return step, [], None, False
        from .pii import scrub_step
        from .pii_blur import needs_ocr
        ocr = None
        if policy == "surrogate" and self.config.ocr != "never" and step.screenshot and \
                (self.config.ocr == "always" or needs_ocr(step)):
            ocr = self._ocr()
        image = self.blobs.get(step.screenshot, step.image_format)
        res = scrub_step(step, image, surrogates=surrogates, keep=policy == "synthetic_kept",
                         ocr=ocr, ocr_always=self.config.ocr == "always")
        return res.step, res.records, res.image, ocr is not None and image is not None

    def _store_scrubbed(self, scrubbed, row: dict, store: RawStore, pii: Counter, policy: str):
        step, records, image, read_by_ocr = scrubbed
        self.ocr_screens += read_by_ocr
        if image is not None:
            sha = store.blobs.put(image, step.image_format)
            step = step.model_copy(update={"screenshot": sha})
        else:
            link_blob(self.blobs, store.blobs, step.screenshot, step.image_format)
        kinds = Counter(r["kind"] for r in records)
        self.pii_steps += bool(records)
        (self.pii_kept if policy == "synthetic_kept" else pii).update(kinds)
        self._audit(step.trajectory_id, step.index, policy, records)
        row.update(pii_kinds=sorted(kinds), pii_count=len(records), screenshot_out=step.screenshot)
        return step

    def _audit(self, tid: str, index: int | None, policy: str, records: list[dict]) -> None:
        """One line per record: what was found where, and whether it was kept or replaced.
        Values themselves are never written."""
        for r in records:
            box = r.get("box")
            self.audit_lines.append(json.dumps({
                "trajectory_id": tid, "index": index, "kind": r["kind"], "field": r["field"],
                "action": "kept_synthetic" if policy == "synthetic_kept" else "surrogate",
                "box": None if box is None else [round(float(c), 5) for c in box],
                "box_source": r.get("box_source"), "note": r.get("note")},
                sort_keys=True, ensure_ascii=False))

    def _flush_audit(self) -> None:
        with open(self.audit_tmp, "a", encoding="utf-8") as f:
            f.writelines(line + "\n" for line in self.audit_lines)
        self.audit_lines.clear()

    def _finish_trajectory(self, traj, rows, kept, curated: CuratedWriter, pii: Counter,
                           policy: str = "off", surrogates=None) -> dict:
        first = rows[0]
        tkeep, treason = decide(self.traj_filters, first)
        v = self.verdicts.get(first["trajectory_id"])
        task_kinds = None
        if tkeep and not kept:
            tkeep, treason = False, "no_steps_kept"
        if tkeep and traj is not None:
            task = traj.task
            if policy != "off":
                from .pii import find_pii, scrub_task
                if policy == "synthetic_kept":
                    matches = find_pii(task.instruction) + find_pii(task.params_json())
                    self.pii_kept.update(Counter(m.kind for m in matches))
                else:
                    task, matches = scrub_task(task, surrogates)
                    pii.update(Counter(m.kind for m in matches))
                task_kinds = sorted({m.kind for m in matches})
                self._audit(traj.trajectory_id, None, policy, [
                    {"kind": m.kind, "field": "task", "box": None, "note": "not_on_screen"}
                    for m in matches])
            self.policies[policy] += 1
            curated.add(traj.model_copy(update={"task": task}), kept)
        if len(self.audit_lines) >= 4096:
            self._flush_audit()
        return {"trajectory_id": first["trajectory_id"], "keep": tkeep, "reason": treason,
                "steps_in": len(rows), "steps_kept": len(kept),
                "outcome": traj.outcome if traj else None,
                "verified_by": traj.verified_by if traj else None,
                "judge_success": v.success if v else None, "judge_parsed": v.parsed if v else None,
                "judge_model": v.model_id if v else None,
                "judge_irrelevant": list(v.irrelevant_steps) if v else None,
                "judge_raw": v.raw if v else None, "pii_task_kinds": task_kinds,
                "pii_policy": policy if tkeep and traj is not None else None}

    # -- the run ----------------------------------------------------------------------------------
    def execute(self) -> CurateResult:
        trajs = self._trajectories()
        if self.judge is not None:
            self._run_judge(trajs)
        n_steps, seen = self._score(trajs)
        self.audit_tmp.unlink(missing_ok=True)
        steps_tmp, store_tmp, dropped, pii, traj_rows, kept_steps = self._write(trajs, n_steps)
        self._flush_audit()
        for tid in sorted(set(trajs) - seen):  # a trajectory with no step rows
            t = trajs[tid]
            traj_rows[tid] = {"trajectory_id": tid, "keep": False, "reason": "no_steps", "steps_in": 0,
                              "steps_kept": 0, "outcome": t.outcome, "verified_by": t.verified_by}
        traj_table = pa.Table.from_pylist([traj_rows[t] for t in sorted(traj_rows)],
                                          schema=TRAJECTORY_VERDICT_SCHEMA)
        # Reconciliation holds by construction; a failure here is a bug, not bad data.
        assert n_steps == kept_steps + sum(dropped.values()), (n_steps, kept_steps, dropped)
        summary = self._summary(n_steps, kept_steps, dropped, pii, traj_rows)
        trajs_tmp = self.out_dir / ".trajectories.parquet.tmp"
        pq.write_table(traj_table, trajs_tmp, compression="zstd")
        os.replace(steps_tmp, self.out_dir / "steps.parquet")
        os.replace(trajs_tmp, self.out_dir / "trajectories.parquet")
        os.replace(self.audit_tmp, self.out_dir / PII_AUDIT)
        swap_in(store_tmp, self.out_dir / "store")
        tmp = self.out_dir / ".summary.json.tmp"
        tmp.write_text(json.dumps(summary, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
        os.replace(tmp, self.out_dir / "summary.json")   # the commit: written last
        return CurateResult(out_dir=self.out_dir, steps_in=n_steps, steps_kept=kept_steps,
                            dropped=summary["dropped"], trajectories_in=summary["trajectories_in"],
                            trajectories_kept=summary["trajectories_kept"], pii=summary["pii"],
                            summary=summary, seconds=0.0, timings=dict(self.timings))

    def _summary(self, n_steps, kept_steps, dropped, pii, traj_rows) -> dict:
        t_dropped = Counter(r["reason"] for r in traj_rows.values() if not r["keep"])
        # Wide enough to show where the threshold cuts.
        hist = self.near.histogram(max(self.config.histogram_max_distance, self.near.max_distance))
        summary = {
            "steps_in": n_steps, "steps_kept": kept_steps, "dropped": dict(dropped),
            "trajectories_in": len(traj_rows),
            "trajectories_kept": sum(1 for r in traj_rows.values() if r["keep"]),
            "trajectories_dropped": dict(sorted(t_dropped.items())),
            "pii": dict(sorted(pii.items())),
            "pii_steps": self.pii_steps,
            # Synthetic values (pii_synthetic_sources) found and kept as they are; "pii"
            # counts the real ones replaced by surrogates. Each is a line of pii_audit.jsonl.
            "pii_synthetic_kept": dict(sorted(self.pii_kept.items())),
            "pii_synthetic_sources": sorted(self.config.synthetic_sources),
            "pii_trajectories": dict(sorted(self.policies.items())),
            "pii_ocr": {"mode": self.config.ocr, "screens_read": self.ocr_screens,
                        "engine": None if self._ocr_engine is None else self._ocr_engine.name},
            "neardup_histogram": {str(k): v for k, v in sorted(hist.items())},
            "screens_decoded": len(self.screens),
            "filter_order": list(FILTER_ORDER),
            "config": {k: list(v) if isinstance(v, tuple) else v
                       for k, v in asdict(self.config).items()},
            "near_duplicate_max_distance": self.near.max_distance,
        }
        if self.judge is not None:
            summary["judge"] = self._judge_summary(traj_rows)
        return summary

    def _judge_summary(self, traj_rows) -> dict:
        from .judge import agreement
        trusted = [v for tid, v in self.verdicts.items()
                   if traj_rows.get(tid, {}).get("verified_by") in self.config.trusted_verifiers]
        outcomes = {tid: r["outcome"] for tid, r in traj_rows.items()}
        models = sorted({v.model_id for v in self.verdicts.values()})
        return {"judged": len(self.verdicts), "models": models,
                "parsed": sum(1 for v in self.verdicts.values() if v.parsed),
                "agreement": agreement(trusted, outcomes)}


def _rows_of(pf: pq.ParquetFile, batch_size: int):
    for batch in pf.iter_batches(batch_size=batch_size):
        yield from batch.to_pylist()
