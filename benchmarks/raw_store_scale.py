"""The raw store at scale: write and scan a million synthetic steps; memory must stay flat.

    .venv/bin/python benchmarks/raw_store_scale.py [--mode full]        # 250k and 1M steps
    .venv/bin/python benchmarks/raw_store_scale.py --child 100000 DIR    # one size, prints JSON

Each size runs in its own process (so its peak RSS, the kernel's high-water
mark, is its own) and does, in the store's real layout:

1. blobs: N/50 distinct small screenshots (4 KB each) through `BlobStore.put`
   (sha256, temporary name, fsync, rename): the first 1,000 one at a time,
   the rest through `BlobStore.put_many` (8 threads) ten at a time, as an
   importer hands over an episode's screenshots; baselines: `put` one at a
   time, and the same bytes written with a plain `write_bytes` (no fsync, no
   rename);
2. steps: N synthetic steps (10 per trajectory; 20 elements and a ~1 KB
   accessibility tree each; every step references one of the blobs) committed
   as the store's Parquet part pairs (`part-n.steps.parquet`, then its
   `part-n.trajectories.parquet`) with the store's own `atomic_write_table`,
   5,000 steps a part. The rows are columnar copies of real `Step` records
   (built once through `schemas.arrow.steps_table`), so the million costs
   what Parquet costs; what the record path (`TrajectoryWriter.add` with
   `Step` objects, Arrow built by column) costs per step is measured on a
   sample beside it, and the same writer with the per-step dict rows it used
   before (`step_to_row` + `Table.from_pylist`), best of 2 each, interleaved;
3. scan: DuckDB over the parts (counts, distinct screenshots and trajectories,
   mean tree length, actions per type), then every referenced blob checked to
   exist; baseline: a pyarrow dataset scan computing the same figures.

Peak RSS at 1M against 250k (target <= 1.25): the store streams.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, Row, machine_short, peak_rss_self, pick, run_measured  # noqa: E402

SIZES = {
    "smoke": {"sizes": (2_000, 8_000), "sample": 200},
    "quick": {"sizes": (50_000, 200_000), "sample": 1_000},
    "full": {"sizes": (250_000, 1_000_000), "sample": 2_000},
}
STEPS_PER_TRAJ = 10
STEPS_PER_PART = 5_000
STEPS_PER_BLOB = 50
BLOB_BYTES = 4_096
BLOB_SAMPLE = 1_000  # at most, blobs put one at a time (the rest by put_many)
PUT_MANY_CHUNK = 10  # blobs a put_many call: an imported episode's screenshots
TEMPLATE_ROWS = 500


# -- the synthetic data ---------------------------------------------------------------------
def template_steps(n: int, seed: int = 0):
    """`n` real Step records of varied content (trees, elements, actions)."""
    import random

    from schemas.actions import Action
    from schemas.records import Element, Step

    rng = random.Random(seed)
    roles = ["button", "link", "textbox", "heading", "checkbox", "img"]
    words = "cart shoes blue order settings inbox reply draft notes search account profile".split()
    out = []
    for i in range(n):
        els = []
        lines = []
        for j in range(20):
            role, name = rng.choice(roles), f"{rng.choice(words)} {rng.choice(words)} {j}"
            y = rng.random() * 0.9
            bbox = (
                round(rng.random() * 0.5, 4),
                round(y, 4),
                round(0.5 + rng.random() * 0.5, 4),
                round(y + 0.05, 4),
            )
            els.append(Element(role=role, name=name, bbox=bbox))
            px = [int(b * 1000) for b in bbox]
            lines.append(f'- {role} "{name}" [ref=e{j}] [box={px[0]},{px[1]},{px[2]},{px[3]}]')
        kind = i % 4
        action = (
            Action.tap(els[3].bbox[0] + 0.01, els[3].bbox[1] + 0.01)
            if kind < 2
            else Action.type_text("blue shoes", 0.3, 0.2)
            if kind == 2
            else Action.scroll("down")
        )
        out.append(
            Step(
                trajectory_id="t",
                index=0,
                screenshot="0" * 64,
                width=1280,
                height=800,
                url=f"http://127.0.0.1:5000/shop/p{i}",
                a11y_tree="\n".join(lines),
                elements=els,
                action=action,
                target=els[3],
                screen_changed=True,
                started_at=1.7e9 + i,
                observe_ms=120.0,
                act_ms=80.0,
            )
        )
    return out


def template_trajectory():
    from schemas.records import DeviceProfile, Task, Trajectory

    return Trajectory(
        trajectory_id="t",
        task=Task(
            task_id="shop.buy:en:0",
            instruction="Buy blue shoes",
            language="en",
            app="shop",
            template_id="shop.buy",
        ),
        platform="web",
        app="shop",
        policy="oracle",
        outcome="success",
        verified_by="state",
        num_steps=STEPS_PER_TRAJ,
        device=DeviceProfile(viewport_width=1280, viewport_height=800),
    )


def blob_bytes(i: int) -> bytes:
    """A small distinct blob (a screenshot stand-in): 4 KB, deterministic."""
    seed = hashlib.sha256(str(i).encode()).digest()
    return (seed * (BLOB_BYTES // len(seed) + 1))[:BLOB_BYTES]


# -- one size, in its own process ------------------------------------------------------------
def child(n_steps: int, root: Path, sample: int) -> dict:
    import duckdb
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    from schemas.arrow import STEP_SCHEMA, TRAJECTORY_SCHEMA, steps_table, trajectories_table
    from trajforge.store.raw import RawStore, atomic_write_table

    out: dict = {"steps": n_steps}
    store = RawStore(root / "raw")
    n_blobs = max(1, n_steps // STEPS_PER_BLOB)

    # 1. blobs: the store's put one at a time on a sample, then the rest through put_many
    # an episode at a time (as the importers write), against a plain write of the same bytes
    one = min(n_blobs // 2, BLOB_SAMPLE)
    t = time.perf_counter()
    shas = [store.blobs.put(blob_bytes(i), "png") for i in range(one)]
    out["blob_put_1t_s"], out["blob_put_1t_n"] = time.perf_counter() - t, one
    t = time.perf_counter()
    for start in range(one, n_blobs, PUT_MANY_CHUNK):
        shas += store.blobs.put_many(
            [(blob_bytes(i), "png") for i in range(start, min(start + PUT_MANY_CHUNK, n_blobs))]
        )
    out["blob_put_many_s"], out["blob_put_many_n"] = time.perf_counter() - t, n_blobs - one
    plain = root / "plain-blobs"
    plain.mkdir()
    t = time.perf_counter()
    for i in range(one):
        data = blob_bytes(i)
        (plain / f"{hashlib.sha256(data).hexdigest()}.png").write_bytes(data)
    out["blob_plain_s"] = time.perf_counter() - t
    shutil.rmtree(plain)
    out["blobs"] = n_blobs

    # 2. steps: columnar copies of real records, committed part by part
    template = steps_table(template_steps(min(TEMPLATE_ROWS, max(10, n_steps // 100))))
    reps = -(-STEPS_PER_PART // template.num_rows)
    base = pa.concat_tables([template] * reps).slice(0, STEPS_PER_PART).combine_chunks()
    traj_row = trajectories_table([template_trajectory()])
    sha_arr = np.array(shas, dtype=object)
    folder = store.root / "synthetic"
    write_s = 0.0
    parts = 0
    for start in range(0, n_steps, STEPS_PER_PART):
        n = min(STEPS_PER_PART, n_steps - start)
        rows = np.arange(start, start + n)
        tids = pa.array([f"syn-{r // STEPS_PER_TRAJ:08d}" for r in rows])
        part = base.slice(0, n)
        part = part.set_column(0, "trajectory_id", tids)
        part = part.set_column(1, "index", pa.array(rows % STEPS_PER_TRAJ, pa.int32()))
        part = part.set_column(2, "screenshot", pa.array(sha_arr[(rows * 7919) % n_blobs]))
        uniq = pc.unique(tids)
        trajs = pa.concat_tables([traj_row] * len(uniq)).set_column(0, "trajectory_id", uniq)
        t = time.perf_counter()
        atomic_write_table(folder / f"part-{parts:06d}.steps.parquet", part.cast(STEP_SCHEMA))
        atomic_write_table(
            folder / f"part-{parts:06d}.trajectories.parquet", trajs.cast(TRAJECTORY_SCHEMA)
        )  # the commit
        write_s += time.perf_counter() - t
        parts += 1
    out["write_s"], out["parts"] = write_s, parts
    out["parquet_mb"] = sum(p.stat().st_size for p in folder.glob("*.parquet")) / 1e6
    out["rss_after_write_mb"] = peak_rss_self() / 2**20

    # 3. scan: DuckDB over the committed parts, then the blob references
    files = [str(p) for p in store.step_files("synthetic")]
    assert len(files) == parts, "every part must be committed"
    con = duckdb.connect()
    con.execute("SET threads TO 2")
    t = time.perf_counter()
    figures = con.execute(
        "SELECT count(*), count(DISTINCT screenshot), count(DISTINCT trajectory_id), "
        "avg(length(a11y_tree)), sum(len(elements)) FROM read_parquet(?)",
        [files],
    ).fetchone()
    per_type = dict(
        con.execute("SELECT action.type, count(*) FROM read_parquet(?) GROUP BY 1", [files]).fetchall()
    )
    out["duckdb_scan_s"] = time.perf_counter() - t
    t = time.perf_counter()
    missing = 0
    cur = con.execute("SELECT DISTINCT screenshot FROM read_parquet(?)", [files])
    while chunk := cur.fetchmany(10_000):
        missing += sum(1 for (sha,) in chunk if not store.blobs.exists(sha, "png"))
    out["blob_check_s"] = time.perf_counter() - t
    con.close()
    if figures[0] != n_steps or missing:
        raise AssertionError(f"scan saw {figures[0]} of {n_steps} steps, {missing} missing blobs")
    out["scan"] = {
        "steps": figures[0],
        "distinct_screenshots": figures[1],
        "trajectories": figures[2],
        "mean_tree_chars": round(figures[3], 1),
        "elements": int(figures[4]),
        "actions": per_type,
    }

    # baseline scan: a pyarrow dataset computing the same figures, batch by batch
    t = time.perf_counter()
    dataset = ds.dataset(files, format="parquet")
    count, tree_chars, elements, shots, trajs_seen = 0, 0, 0, set(), set()
    types: dict = {}
    for b in dataset.to_batches(
        columns=["trajectory_id", "screenshot", "a11y_tree", "elements", "action"], batch_size=16_384
    ):
        count += b.num_rows
        tree_chars += pc.sum(pc.utf8_length(b.column("a11y_tree"))).as_py() or 0
        elements += pc.sum(pc.list_value_length(b.column("elements"))).as_py() or 0
        shots.update(pc.unique(b.column("screenshot")).to_pylist())
        trajs_seen.update(pc.unique(b.column("trajectory_id")).to_pylist())
        vc = pc.value_counts(pc.struct_field(b.column("action"), "type"))
        for v in vc.to_pylist():
            types[v["values"]] = types.get(v["values"], 0) + v["counts"]
    out["pyarrow_scan_s"] = time.perf_counter() - t
    if (count, len(shots), len(trajs_seen), elements) != (figures[0], figures[1], figures[2], figures[4]):
        raise AssertionError("the pyarrow scan disagrees with DuckDB")

    # the streaming reader the pipeline uses (all columns)
    t = time.perf_counter()
    n = sum(b.num_rows for b in store.iter_step_batches("synthetic", batch_size=4096))
    out["iter_step_batches_s"] = time.perf_counter() - t
    assert n == n_steps

    # the per-record path on a sample: TrajectoryWriter.add of Step objects, against the
    # same writer building its tables from per-step dict rows (what it did before)
    groups = trajectory_groups(sample)
    best = {"columns": float("inf"), "dict_rows": float("inf")}
    for r in range(2):
        for how in best:
            best[how] = min(best[how], time_writer(store, f"writer-{how}-{r}", groups, how))
    out["writer_sample_s"], out["writer_dict_rows_s"] = best["columns"], best["dict_rows"]
    out["writer_sample"] = sample
    out["peak_rss_mb"] = peak_rss_self() / 2**20
    return out


def trajectory_groups(sample: int) -> list:
    """(trajectory, steps) pairs of `sample` varied steps, ten a trajectory."""
    steps = template_steps(sample, seed=1)
    traj = template_trajectory()
    groups = []
    for i in range(0, sample, STEPS_PER_TRAJ):
        tid = f"w-{i // STEPS_PER_TRAJ:08d}"
        group = [
            s.model_copy(update={"trajectory_id": tid, "index": k})
            for k, s in enumerate(steps[i : i + STEPS_PER_TRAJ])
        ]
        groups.append((traj.model_copy(update={"trajectory_id": tid, "num_steps": len(group)}), group))
    return groups


def time_writer(store, collection: str, groups: list, how: str) -> float:
    """Seconds to add `groups` through a TrajectoryWriter and commit them; how="dict_rows"
    swaps in the per-step dict-row tables the writer built before (the same Parquet)."""
    import pyarrow as pa

    import trajforge.store.raw as store_module
    from schemas.arrow import STEP_SCHEMA, TRAJECTORY_SCHEMA, step_to_row, trajectory_to_row

    saved = store_module.steps_table, store_module.trajectories_table
    if how == "dict_rows":
        store_module.steps_table = lambda steps: pa.Table.from_pylist(
            [step_to_row(s) for s in steps], schema=STEP_SCHEMA
        )
        store_module.trajectories_table = lambda trajs: pa.Table.from_pylist(
            [trajectory_to_row(t) for t in trajs], schema=TRAJECTORY_SCHEMA
        )
    try:
        t = time.perf_counter()
        with store.writer(collection, batch_size=STEPS_PER_PART // STEPS_PER_TRAJ) as w:
            for traj, steps in groups:
                w.add(traj, steps)
        return time.perf_counter() - t
    finally:
        store_module.steps_table, store_module.trajectories_table = saved


# -- the benchmark ----------------------------------------------------------------------------
def measure(sizes, sample: int) -> dict:
    out = {}
    for n in sizes:
        work = Path(tempfile.mkdtemp(prefix=f"raw_store_{n}-"))
        try:
            proc = run_measured(
                [sys.executable, __file__, "--child", str(n), str(work), "--sample", str(sample)], cwd=ROOT
            )
            if proc.returncode != 0:
                raise RuntimeError(f"raw_store_scale child ({n} steps) failed:\n{proc.stderr[-3000:]}")
            res = json.loads(proc.stdout.strip().splitlines()[-1])
            res["peak_rss_mb_wait4"] = proc.peak_rss_bytes / 2**20
            res["wall_s"] = proc.wall_s
            out[n] = res
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return out


def rows_from(m: dict) -> list[Row]:
    mach = machine_short()
    small, big = sorted(m)
    s, b = m[small], m[big]
    label = f"{big:,}"
    return [
        Row(
            "raw_store_scale",
            f"raw store: write {label} steps as committed Parquet parts",
            big / b["write_s"],
            small / s["write_s"],
            "steps/s",
            f"the same at {small:,} steps",
            note=f"{b['parts']} parts, {b['parquet_mb']:.0f} MB",
            machine=mach,
        ),
        Row(
            "raw_store_scale",
            "raw store: BlobStore.put, 1 thread (sha256 + fsync + rename)",
            b["blob_put_1t_n"] / b["blob_put_1t_s"],
            b["blob_put_1t_n"] / b["blob_plain_s"],
            "blobs/s",
            "plain write_bytes (no fsync, no rename)",
            machine=mach,
        ),
        Row(
            "raw_store_scale",
            f"raw store: BlobStore.put_many, {PUT_MANY_CHUNK} blobs a call (8 threads)",
            b["blob_put_many_n"] / b["blob_put_many_s"],
            b["blob_put_1t_n"] / b["blob_put_1t_s"],
            "blobs/s",
            "put, one at a time",
            note=f"{b['blobs']:,} blobs of 4 KB in all",
            machine=mach,
        ),
        Row(
            "raw_store_scale",
            f"raw store: DuckDB scan of {label} steps + blob check",
            big / (b["duckdb_scan_s"] + b["blob_check_s"]),
            big / b["pyarrow_scan_s"],
            "steps/s",
            "pyarrow dataset scan (same figures)",
            note=f"blob check {b['blob_check_s']:.1f} s of it",
            machine=mach,
        ),
        Row(
            "raw_store_scale",
            f"raw store: RawStore.iter_step_batches over {label} steps",
            big / b["iter_step_batches_s"],
            big / b["pyarrow_scan_s"],
            "steps/s",
            "pyarrow dataset scan (5 columns)",
            machine=mach,
        ),
        Row(
            "raw_store_scale",
            "raw store: TrajectoryWriter.add (Step objects), per step",
            b["writer_sample"] / b["writer_sample_s"],
            big / b["write_s"],
            "steps/s",
            "columnar part writes",
            note=f"sample of {b['writer_sample']:,} steps",
            machine=mach,
        ),
        Row(
            "raw_store_scale",
            "raw store: TrajectoryWriter.add, Arrow built by column",
            b["writer_sample"] / b["writer_sample_s"],
            b["writer_sample"] / b["writer_dict_rows_s"],
            "steps/s",
            "the same writer with per-step dict rows (before)",
            note=f"sample of {b['writer_sample']:,} steps, best of 2",
            machine=mach,
        ),
        Row(
            "raw_store_scale",
            f"raw store: peak RSS at {label} steps (write + scan)",
            b["peak_rss_mb"],
            s["peak_rss_mb"],
            "MB",
            f"the same at {small:,} steps",
            target="<= 1.25",
            machine=mach,
        ),
    ]


def run(mode: str) -> list[Row]:
    s = pick(mode, SIZES)
    return rows_from(measure(s["sizes"], s["sample"]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", default="full", choices=list(SIZES))
    ap.add_argument("--child", nargs=2, metavar=("STEPS", "DIR"), default=None)
    ap.add_argument("--sample", type=int, default=1_000)
    args = ap.parse_args()
    if args.child:
        res = child(int(args.child[0]), Path(args.child[1]), args.sample)
        print(json.dumps(res))
        return
    s = SIZES[args.mode]
    m = measure(s["sizes"], s["sample"])
    print(json.dumps(m, indent=2))
    for r in rows_from(m):
        print(f"{r.name}: {r.figure:,.1f} vs {r.baseline:,.1f} {r.unit} = {r.ratio:.3f}")


if __name__ == "__main__":
    main()
