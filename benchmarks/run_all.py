"""Run every benchmark and rewrite the table in docs/benchmarks.md (`make bench`).

    .venv/bin/python benchmarks/run_all.py                # the full suite (< 15 min on 2 cores)
    .venv/bin/python benchmarks/run_all.py --quick        # smaller sizes, for development
    .venv/bin/python benchmarks/run_all.py --smoke --doc /tmp/b.md   # tiny sizes (the test)
    .venv/bin/python benchmarks/run_all.py --only web_crawl,raw_store_scale

Each benchmark runs in its own process (`--one KEY`), so a crash, a hang (a
timeout per benchmark) or a leaked browser cannot take the suite down; one
that fails leaves a row that says so. The document keeps its prose: only the
summary between the `bench:summary` markers and each benchmark's "latest
run" block between its `bench:KEY` markers are rewritten. Nothing here
asserts a speed: the table reports, the reader judges.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
    ROOT,
    Row,
    fmt_num,
    fmt_ratio,
    gpu_name,
    machine_description,
    machine_short,
    not_run,
    read_rows,
    run_measured,
    write_rows,
)

HERE = Path(__file__).resolve().parent
DOC = ROOT / "docs" / "benchmarks.md"


@dataclass(frozen=True)
class Bench:
    key: str
    file: str
    title: str  # the doc's section heading (without the file name)
    needs_gpu: bool = False
    optional: bool = False  # another helper's script: listed only when it exists
    # Run by hand with its own command (its docstring): minutes per case, or a GPU
    # machine's script (gpu_checks.sh); `make bench` lists it as not run.
    manual: str | None = None
    timeout_s: dict | None = None


REGISTRY = [
    Bench(
        "web_crawl",
        "web_crawl.py",
        "Web crawl throughput",
        timeout_s={"smoke": 120, "quick": 300, "full": 540},
    ),
    Bench(
        "env_crawl",
        "env_crawl.py",
        "Third-party apps through environment files",
        timeout_s={"smoke": 180, "quick": 300, "full": 480},
    ),
    Bench(
        "explore_coverage",
        "explore_coverage.py",
        "Exploration coverage: the frontier walk against the random walk",
        timeout_s={"smoke": 180, "quick": 420, "full": 900},
    ),
    Bench(
        "predicate_agreement",
        "predicate_agreement.py",
        "Predicate verifiers against the sandbox's state verifiers",
        timeout_s={"smoke": 180, "quick": 600, "full": 1200},
    ),
    Bench(
        "env_server",
        "env_server.py",
        "The Gym API and the environment server",
        timeout_s={"smoke": 180, "quick": 720, "full": 1800},
    ),
    Bench("screenshot_capture", "screenshot_capture.py", "Screenshot capture and storage"),
    Bench("visibility_capture", "visibility_capture.py", "The visibility record at capture time"),
    Bench("phash_neardup", "phash_neardup.py", "pHash and near-duplicate search"),
    Bench(
        "pii_ocr",
        "pii_ocr.py",
        "Personal data on screenshots without a tree (OCR)",
        timeout_s={"smoke": 180, "quick": 300, "full": 540},
    ),
    Bench(
        "grounding",
        "grounding.py",
        "Grounding synthesis against the crawl",
        timeout_s={"smoke": 180, "quick": 300, "full": 540},
    ),
    Bench(
        "ray_pool",
        "ray_pool.py",
        "Environments as Ray actors",
        timeout_s={"smoke": 240, "quick": 400, "full": 540},
    ),
    Bench(
        "desktop",
        "desktop.py",
        "Desktop environments (Xvfb, AT-SPI, XTEST)",
        timeout_s={"smoke": 240, "quick": 720, "full": 1200},
    ),
    Bench("object_store", "object_store.py", "The raw store on object storage (S3)"),
    Bench("shard_io", "shard_io.py", "Shard writing and reading"),
    Bench(
        "convert",
        "convert.py",
        "trajforge convert to the trainers' formats",
        timeout_s={"smoke": 120, "quick": 240, "full": 480},
    ),
    Bench("vlm_batching", "vlm_batching.py", "VLM batching"),
    Bench("mobile_throughput", "mobile_throughput.py", "Mobile crawl throughput"),
    Bench(
        "demo_scaling",
        "demo_scaling.py",
        "The demo's data path, 1x to 4x",
        timeout_s={"smoke": 120, "quick": 300, "full": 420},
    ),
    Bench(
        "raw_store_scale",
        "raw_store_scale.py",
        "The raw store at a million steps",
        timeout_s={"smoke": 120, "quick": 300, "full": 480},
    ),
    Bench(
        "multiprocess_speedup",
        "multiprocess_speedup.py",
        "Dagster multiprocess executor",
        optional=True,
        timeout_s={"smoke": 180, "quick": 300, "full": 420},
    ),
    Bench("train_gpu", "train_gpu.py", "GPU training (SFT and RL rollouts)", needs_gpu=True, optional=True),
    Bench(
        "tasks_synthesis",
        "tasks_synthesis.py",
        "Goal tasks from an app",
        manual="30 minutes of `trajforge tasks synthesize` per app",
    ),
    Bench(
        "env_server_warm",
        "env_server_warm.py",
        "Resets through the server, warm and cold",
        manual="its own sessions x environments grid",
    ),
    Bench(
        "web_density",
        "web_density.py",
        "Web sessions sharing Chromiums",
        manual="up to 64 sessions x 2 servers",
    ),
    Bench(
        "train_engines", "train_engines.py", "GPU training speed", manual="run by benchmarks/gpu_checks.sh"
    ),
]
DEFAULT_TIMEOUT = {"smoke": 90, "quick": 240, "full": 300}


def registry() -> list[Bench]:
    """The benchmarks this checkout has (optional ones only when their script exists)."""
    return [b for b in REGISTRY if not b.optional or (HERE / b.file).exists()]


# -- one benchmark, in the child process ------------------------------------------------------
def load(bench: Bench):
    spec = importlib.util.spec_from_file_location(f"bench_{bench.key}", HERE / bench.file)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # a dataclass of the module looks its module up there
    spec.loader.exec_module(mod)
    return mod


def run_one(bench: Bench, mode: str) -> list[Row]:
    if bench.manual:
        return [not_run(bench.key, bench.title, f"run by hand ({bench.manual}): see its docstring")]
    if bench.needs_gpu and gpu_name() is None:
        from gpu_recorded import recorded_rows

        return recorded_rows() or [
            not_run(bench.key, bench.title, "needs GPU, not run (no CUDA device here)")
        ]
    mod = load(bench)
    if hasattr(mod, "run"):
        rows = mod.run(mode)
    elif bench.key == "train_gpu":
        rows = _train_gpu_rows(mod, mode)
    else:
        rows = _rows_from_json_main(bench, mod, mode)
    for r in rows:
        r.machine = r.machine or machine_short()
    return rows


def _train_gpu_rows(mod, mode: str) -> list[Row]:
    """train_gpu.py prints a result dict: achieved TFLOP/s against the card's measured peak."""
    res = mod.main(["--tiny"] if mode == "smoke" else [])
    return [
        Row(
            "train_gpu",
            f"GPU SFT ({res.get('model')}): achieved TFLOP/s (ratio = MFU)",
            res["sft_tflops"],
            res["peak_tflops"],
            "TFLOP/s",
            "peak bf16 matmul, same card",
            note=f"{res.get('device_name')}; SFT {res['sft'].get('tokens_per_s')} tokens/s; "
            f"rollouts {res.get('rl', {}).get('rollouts_per_s', '?')}/s",
        )
    ]


def _rows_from_json_main(bench: Bench, mod, mode: str) -> list[Row]:
    """A script without run(): its main's result (returned, or its last JSON line printed)."""
    import contextlib
    import io

    if not hasattr(mod, "main"):
        return [not_run(bench.key, bench.title, "no machine-readable result (expects run(mode))")]
    sys.argv = [str(HERE / bench.file)]  # its own defaults, not run_all's options
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        res = mod.main()
    print(buf.getvalue())
    if not isinstance(res, dict):
        lines = [ln for ln in buf.getvalue().splitlines() if ln.strip().startswith("{")]
        try:
            res = json.loads(lines[-1]) if lines else None
        except ValueError:
            res = None
    if not isinstance(res, dict):
        return [not_run(bench.key, bench.title, "no machine-readable result (expects run(mode))")]
    slow = next((res[k] for k in ("in_process_s", "baseline_s", "seconds_in_process") if k in res), None)
    fast = next((res[k] for k in ("multiprocess_s", "seconds_multiprocess", "figure_s") if k in res), None)
    if not slow or not fast:
        return [not_run(bench.key, bench.title, f"result has no timings: {sorted(res)}")]
    return [
        Row(
            bench.key,
            bench.title + ": materialisations/h",
            3600 / fast,
            3600 / slow,
            "runs/h",
            "in-process executor",
        )
    ]


# -- the suite, in the parent ---------------------------------------------------------------
def run_suite(benches: list[Bench], mode: str, say=print) -> tuple[list[Row], dict]:
    rows: list[Row] = []
    walls: dict[str, float] = {}
    for b in benches:
        timeout = (b.timeout_s or DEFAULT_TIMEOUT)[mode]
        say(f"== {b.key} ({mode}, timeout {timeout} s)")
        with tempfile.TemporaryDirectory(prefix=f"bench-{b.key}-") as tmp:
            out = Path(tmp) / "rows.json"
            proc = run_measured(
                [
                    sys.executable,
                    str(Path(__file__).resolve()),
                    "--one",
                    b.key,
                    "--mode",
                    mode,
                    "--rows-json",
                    str(out),
                ],
                cwd=ROOT,
                timeout_s=timeout,
            )
            walls[b.key] = proc.wall_s
            if proc.returncode == 0 and out.exists():
                got = read_rows(out)
            else:
                why = "timed out" if proc.returncode == 124 else f"failed (exit {proc.returncode})"
                last = (proc.stderr.strip().splitlines() or [""])[-1][:200]
                say(proc.stderr[-4000:])
                got = [not_run(b.key, b.title, f"{why} after {proc.wall_s:.0f} s: {last}")]
        for r in got:
            say(
                f"   {r.name}: {fmt_num(r.figure)} vs {fmt_num(r.baseline)} {r.unit}"
                f" = {fmt_ratio(r.ratio)} {r.target} {r.note}"
            )
        say(f"   ({proc.wall_s:.0f} s)")
        rows.extend(got)
    return rows, walls


# -- the document ---------------------------------------------------------------------------
def status(r: Row) -> str:
    if r.baseline_broken:
        return "**baseline broken**"
    if r.figure is None:
        return "not run"
    if r.met is None:
        return "—"
    if r.met:
        return "met"
    bound = float(r.target.split()[-1])
    by = (bound - r.ratio) / bound if r.target.startswith(">=") else (r.ratio - bound) / bound
    return f"**missed by {by:.0%}**"


def _cell(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def summary_table(rows: list[Row], machine: dict, mode: str, walls: dict, when: str) -> str:
    total = sum(walls.values())
    lines = [
        f"Generated by `benchmarks/run_all.py` ({mode} mode) on {when}, in {total / 60:.1f} min: "
        f"{machine['cpu']}, {machine['cpus']} cpus, {machine['memory_gb']} GB, load "
        f"{machine['load_1m']} at the start, Python {machine['python']}, Chromium "
        f"{machine['chromium']}, GPU {machine['gpu'] or 'none'}. Ratio = figure / baseline, both "
        "measured in this run; the target bounds the ratio.",
        "",
        "| benchmark | figure | baseline (same run) | ratio | target | status | machine | notes |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        fig = "—" if r.figure is None else f"{fmt_num(r.figure)} {r.unit}"
        base = "—" if r.baseline is None else f"{fmt_num(r.baseline)} ({r.baseline_name})"
        lines.append(
            "| "
            + " | ".join(
                _cell(c)
                for c in (
                    r.name,
                    fig,
                    base,
                    fmt_ratio(r.ratio),
                    r.target or "—",
                    status(r),
                    r.machine or "—",
                    r.note or "",
                )
            )
            + " |"
        )
    return "\n".join(lines)


def latest_block(rows: list[Row], wall_s: float | None) -> str:
    took = f" ({wall_s:.0f} s)" if wall_s is not None else ""
    out = [f"Latest run{took}, from the table above:", ""]
    for r in rows:
        if r.figure is None:
            out.append(f"- {r.name}: {'not run (' + r.note + ')' if not r.baseline_broken else r.note}")
            continue
        tgt = f", target {r.target}: {status(r).strip('*')}" if r.target else ""
        out.append(
            f"- {r.name}: {fmt_num(r.figure)} {r.unit} against {fmt_num(r.baseline)} "
            f"({r.baseline_name}) = **{fmt_ratio(r.ratio)}**{tgt}"
        )
    return "\n".join(out)


def _markers(key: str) -> tuple[str, str]:
    return f"<!-- bench:{key}:start -->", f"<!-- bench:{key}:end -->"


def replace_block(text: str, key: str, body: str) -> tuple[str, bool]:
    start, end = _markers(key)
    pat = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
    block = f"{start}\n{body}\n{end}"
    if pat.search(text):
        return pat.sub(lambda _m: block, text, count=1), True
    return text, False


def rewrite_doc(
    text: str,
    rows: list[Row],
    benches: list[Bench],
    machine: dict,
    mode: str,
    walls: dict,
    when: str | None = None,
) -> str:
    """The document with its generated parts refreshed and its prose kept."""
    when = when or datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    text, found = replace_block(text, "summary", summary_table(rows, machine, mode, walls, when))
    if not found:  # first run: the summary goes before the first section
        block = "\n".join(
            [_markers("summary")[0], summary_table(rows, machine, mode, walls, when), _markers("summary")[1]]
        )
        head, sep, rest = text.partition("\n## ")
        text = f"{head.rstrip()}\n\n## Summary\n\n{block}\n{sep}{rest}" if sep else f"{text}\n{block}\n"
    for b in benches:
        mine = [r for r in rows if r.benchmark == b.key]
        if not mine:
            continue
        text, found = replace_block(text, b.key, latest_block(mine, walls.get(b.key)))
        if not found:
            start, end = _markers(b.key)
            text = (
                f"{text.rstrip()}\n\n## {b.title} (`benchmarks/{b.file}`)\n\n{start}\n"
                f"{latest_block(mine, walls.get(b.key))}\n{end}\n"
            )
    return text


# -- the command ----------------------------------------------------------------------------
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="smaller sizes, for development")
    mode.add_argument("--smoke", action="store_true", help="tiny sizes: does every benchmark run?")
    mode.add_argument("--mode", choices=["smoke", "quick", "full"], default=None)
    ap.add_argument("--only", default=None, help="comma-separated benchmark keys")
    ap.add_argument("--doc", type=Path, default=DOC, help="the document to rewrite")
    ap.add_argument(
        "--json", type=Path, default=None, help="also write the run (rows, machine, wall times) here"
    )
    ap.add_argument(
        "--from-json",
        type=Path,
        nargs="+",
        default=None,
        help="no run: rewrite the document from runs saved with --json (a later "
        "file's benchmarks replace an earlier one's)",
    )
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--rows-json", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    run_mode = args.mode or ("smoke" if args.smoke else "quick" if args.quick else "full")
    benches = registry()
    if args.one:  # the child: one benchmark, rows to a file
        bench = next(b for b in benches if b.key == args.one)
        write_rows(args.rows_json, run_one(bench, run_mode))
        return 0
    if args.only:
        keys = args.only.split(",")
        unknown = sorted(set(keys) - {b.key for b in benches})
        if unknown:
            ap.error(f"unknown benchmark(s) {unknown}; known: {[b.key for b in benches]}")
        benches = [b for b in benches if b.key in keys]
    t0 = time.perf_counter()
    if args.from_json:
        rows, walls = [], {}
        for path in args.from_json:
            saved = json.loads(path.read_text())
            again = {d["benchmark"] for d in saved["rows"]}
            rows = [r for r in rows if r.benchmark not in again]
            rows += [Row.from_dict(d) for d in saved["rows"]]
            walls.update(saved["walls"])
            machine, run_mode, when = saved["machine"], saved["mode"], saved["when"]
        order = [b.key for b in REGISTRY]
        rows.sort(key=lambda r: order.index(r.benchmark) if r.benchmark in order else len(order))
        benches = [b for b in REGISTRY if any(r.benchmark == b.key for r in rows)]
    else:
        machine = machine_description()
        when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
        rows, walls = run_suite(benches, run_mode)
    doc = args.doc
    text = doc.read_text() if doc.exists() else "# Benchmarks\n"
    doc.write_text(rewrite_doc(text, rows, benches, machine, run_mode, walls, when))
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "mode": run_mode,
                    "when": when,
                    "machine": machine,
                    "walls": walls,
                    "rows": [r.as_dict() for r in rows],
                },
                indent=2,
                ensure_ascii=False,
            )
        )
    print(f"\n{len(rows)} rows, {time.perf_counter() - t0:.0f} s; {doc} rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main())
