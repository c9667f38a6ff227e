"""The demo's data path at N and 4N tasks: wall time and peak memory, and how both grow.

    .venv/bin/python benchmarks/demo_scaling.py [--mode full]           # N = 4 and 16
    .venv/bin/python benchmarks/demo_scaling.py --child 4 DIR           # one size, prints JSON

The whole `make demo` (Dagster CLI start-ups, the mobile crawl through Appium,
imports, synthesis) is too long to run four times, so each size runs the path
every step of data takes, in its own process, with the domain functions the
assets call (no Dagster): crawl of N web sandbox tasks (oracle policy, the
demo's pop-up rate) -> consolidate -> curate (dedup, validity, PII; no VLM
judge) -> export WebDataset shards. Measured per size: wall time per stage,
the pipeline process's own peak RSS (wait4's high-water mark) and the peak
of the whole process tree (with Chromium), sampled.

Targets: peak RSS of the pipeline at 4N / at N <= 1.25 (streaming, not
loading); wall time should grow about linearly (4N / N near 4).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, Row, machine_short, peak_rss_self, pick, run_measured  # noqa: E402

SIZES = {"smoke": {"n": 1}, "quick": {"n": 2}, "full": {"n": 4}}
GROWTH = 4


def pick_tasks(n: int):
    from sandbox.apps import WEB_APPS
    from sandbox.tasks import build_catalog

    tasks = build_catalog(per_template=1, apps=WEB_APPS)
    step = max(1, len(tasks) // n)
    return tasks[::step][:n]


def child(n_tasks: int, work: Path) -> dict:
    """crawl -> consolidate -> curate -> export of `n_tasks` tasks under `work`."""
    from filters.pipeline import curate
    from sandbox.crawl import SandboxCrawl, crawl
    from sandbox.server import SandboxServer
    from trajforge.publish.export import export_shards
    from trajforge.store.consolidate import consolidate
    from trajforge.store.raw import RawStore

    tasks = pick_tasks(n_tasks)
    store = RawStore(work / "raw")
    stages: dict[str, float] = {}
    rss: dict[str, float] = {}
    t0 = time.perf_counter()
    with SandboxServer() as srv:
        t = time.perf_counter()
        stats = crawl(
            tasks,
            SandboxCrawl(server_url=srv.url, policy="oracle", distraction_rate=0.25),
            store=store,
            collection="web",
        )
        stages["crawl"] = time.perf_counter() - t
    rss["crawl"] = peak_rss_self() / 2**20
    t = time.perf_counter()
    cons = consolidate(store, work / "raw_steps")
    stages["consolidate"] = time.perf_counter() - t
    rss["consolidate"] = peak_rss_self() / 2**20
    t = time.perf_counter()
    cur = curate(work / "raw_steps", store.blobs, work / "curated")
    stages["curate"] = time.perf_counter() - t
    rss["curate"] = peak_rss_self() / 2**20
    t = time.perf_counter()
    exp = export_shards(
        RawStore(work / "curated" / "store"), work / "shards", dataset="sandbox", allow_index_gaps=True
    )
    stages["export"] = time.perf_counter() - t
    rss["export"] = peak_rss_self() / 2**20
    return {
        "tasks": len(tasks),
        "steps": stats.steps,
        "success": stats.success,
        "consolidated_steps": cons.steps,
        "kept_steps": cur.steps_kept,
        "samples": exp.samples,
        "stages_s": stages,
        "pipeline_s": time.perf_counter() - t0,
        "peak_rss_mb_after": rss,
    }


def measure(n: int) -> dict:
    out = {}
    for size in (n, GROWTH * n):
        work = Path(tempfile.mkdtemp(prefix=f"demo_scaling_{size}-"))
        try:
            proc = run_measured([sys.executable, __file__, "--child", str(size), str(work)], cwd=ROOT)
            if proc.returncode != 0:
                raise RuntimeError(f"demo_scaling child ({size} tasks) failed:\n{proc.stderr[-3000:]}")
            res = json.loads(proc.stdout.strip().splitlines()[-1])
            res.update(
                wall_s=proc.wall_s,
                peak_rss_mb=proc.peak_rss_bytes / 2**20,
                peak_tree_mb=proc.peak_tree_bytes / 2**20,
            )
            out[size] = res
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return out


def rows_from(m: dict) -> list[Row]:
    mach = machine_short()
    n, big = sorted(m)
    a, b = m[n], m[big]
    steps = f"{a['steps']} -> {b['steps']} steps, {a['samples']} -> {b['samples']} samples"
    stages = ", ".join(f"{k} {a['stages_s'][k]:.1f} -> {v:.1f} s" for k, v in b["stages_s"].items())
    grew = ", ".join(f"{k} {v:.0f}" for k, v in b["peak_rss_mb_after"].items())
    return [
        Row(
            "demo_scaling",
            f"demo path (crawl, consolidate, curate, export): wall at {big} tasks",
            b["wall_s"],
            a["wall_s"],
            "s",
            f"the same at {n} tasks",
            note=f"{steps}; {stages}; linear growth would be {big / n:.1f}",
            machine=mach,
        ),
        Row(
            "demo_scaling",
            f"demo path: peak RSS of the pipeline process at {big} tasks",
            b["peak_rss_mb"],
            a["peak_rss_mb"],
            "MB",
            f"the same at {n} tasks",
            target="<= 1.25",
            note=f"high-water mark after each stage at {big} tasks (MB): {grew}",
            machine=mach,
        ),
        Row(
            "demo_scaling",
            f"demo path: peak RSS with Chromium (process tree) at {big} tasks",
            b["peak_tree_mb"],
            a["peak_tree_mb"],
            "MB",
            f"the same at {n} tasks",
            machine=mach,
        ),
    ]


def run(mode: str) -> list[Row]:
    return rows_from(measure(pick(mode, SIZES)["n"]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", default="full", choices=list(SIZES))
    ap.add_argument("--child", nargs=2, metavar=("TASKS", "DIR"), default=None)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(int(args.child[0]), Path(args.child[1]))))
        return
    m = measure(SIZES[args.mode]["n"])
    print(json.dumps(m, indent=2))
    for r in rows_from(m):
        print(f"{r.name}: {r.figure:,.1f} vs {r.baseline:,.1f} {r.unit} = {r.ratio:.3f}")


if __name__ == "__main__":
    main()
