"""The benchmark suite's plumbing: `run_all` writes every row, ratios are figure / baseline.

No speed is asserted anywhere: the figures on a shared CI machine mean nothing
on their own. One smoke run goes through the real command (a real benchmark,
the raw store at tiny sizes, in its own process), the rest is the document
rewriting on rows.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"
sys.path.insert(0, str(BENCH))

import run_all  # noqa: E402
from common import Row, check_baseline, fmt_num, fmt_ratio  # noqa: E402
from gpu_recorded import recorded_runs  # noqa: E402

PROSE = """# Benchmarks

Intro prose that stays.

## The raw store at a million steps (`benchmarks/raw_store_scale.py`)

Hand-written explanation that stays.

<!-- bench:raw_store_scale:start -->
stale figures
<!-- bench:raw_store_scale:end -->

## Something else

More prose.
"""


def table_rows(text: str) -> dict[str, list[str]]:
    """The summary table's rows by benchmark name: the cells after the name."""
    start, end = text.index("<!-- bench:summary:start -->"), text.index("<!-- bench:summary:end -->")
    rows = {}
    for line in text[start:end].splitlines():
        if line.startswith("| ") and not line.startswith("| benchmark") and not line.startswith("|---"):
            cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
            rows[cells[0]] = cells[1:]
    return rows


def test_smoke_run_rewrites_the_table_with_every_row(tmp_path):
    doc = tmp_path / "benchmarks.md"
    doc.write_text(PROSE)
    rows_json = tmp_path / "rows.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(BENCH / "run_all.py"),
            "--smoke",
            "--only",
            "raw_store_scale,train_gpu",
            "--doc",
            str(doc),
            "--json",
            str(rows_json),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    saved = json.loads(rows_json.read_text())
    rows = [Row.from_dict(d) for d in saved["rows"]]
    assert saved["mode"] == "smoke" and set(saved["walls"]) == {r.benchmark for r in rows}
    text = doc.read_text()
    table = table_rows(text)

    raw = [r for r in rows if r.benchmark == "raw_store_scale"]
    assert len(raw) == 8
    for r in raw:  # measured: every figure and baseline, the ratio is their quotient
        assert r.figure > 0 and r.baseline > 0, r
        assert r.ratio == pytest.approx(r.figure / r.baseline)
        cells = table[r.name]
        assert cells[0] == f"{fmt_num(r.figure)} {r.unit}"
        assert cells[1].startswith(fmt_num(r.baseline))
        assert cells[2] == fmt_ratio(r.figure / r.baseline)
    memory = next(r for r in raw if "peak RSS" in r.name)
    assert memory.target == "<= 1.25" and table[memory.name][4] in (
        "met",
        f"**missed by {(memory.ratio - 1.25) / 1.25:.0%}**",
    )
    assert len(table) == len(rows)  # nothing else in the table, nothing left out

    gpu = [r for r in rows if r.benchmark == "train_gpu"]
    if run_all.gpu_name() is None:  # the runs recorded on a GPU machine, marked as such
        recorded = recorded_runs()
        assert len(recorded) >= 2 and len(gpu) >= len(recorded)
        for r in gpu:
            assert r.figure > 0 and r.baseline > 0 and "recorded 20" in r.machine, r
            assert table[r.name][2] == fmt_ratio(r.figure / r.baseline)
        mfu = {r.name: r.ratio for r in gpu if "(ratio = MFU)" in r.name}
        assert mfu and all(0 < v < 1 for v in mfu.values())

    # The prose stays; the stale block is replaced by this run's figures.
    assert "Intro prose that stays." in text and "Hand-written explanation that stays." in text
    assert "More prose." in text and "stale figures" not in text
    assert text.index("## Summary") < text.index("## The raw store")
    assert "Latest run" in text.split("## The raw store", 1)[1].split("## Something else")[0]


def test_rewrite_is_idempotent_and_reports_misses():
    rows = [
        Row("web_crawl", "crawl vs bare", 3.0, 5.0, "steps/s", "bare loop", target=">= 0.8"),
        Row("raw_store_scale", "peak RSS", 500.0, 400.0, "MB", "smaller", target="<= 1.25"),
        Row("phash_neardup", "search", 10.0, 2.0, "hashes/s", "brute"),
        run_all.not_run("train_gpu", "GPU", "needs GPU, not run"),
    ]
    machine = {
        "cpu": "test cpu",
        "cpus": 2,
        "memory_gb": 8,
        "load_1m": 1.0,
        "python": "3.11",
        "chromium": "1",
        "gpu": None,
    }
    benches = run_all.REGISTRY
    once = run_all.rewrite_doc(PROSE, rows, benches, machine, "smoke", {}, when="now")
    twice = run_all.rewrite_doc(once, rows, benches, machine, "smoke", {}, when="now")
    assert once == twice
    table = table_rows(once)
    assert table["crawl vs bare"][2] == "0.60" and table["crawl vs bare"][4] == "**missed by 25%**"
    assert table["peak RSS"][4] == "met"
    assert table["search"][3] == "—" and table["search"][4] == "—"
    assert table["GPU"][4] == "not run"
    # A benchmark with no section yet gets one, with its block, at the end.
    assert "## Web crawl throughput (`benchmarks/web_crawl.py`)" in once
    assert once.count("<!-- bench:web_crawl:start -->") == 1


def test_every_benchmark_script_is_registered_and_machine_readable():
    helpers = {"common.py", "run_all.py", "gpu_recorded.py", "env_server_procs.py", "env_soak.py"}
    scripts = {p.name for p in BENCH.glob("*.py")} - helpers
    assert scripts == {b.file for b in run_all.registry()}
    for b in run_all.registry():
        if b.optional or b.manual:
            continue  # another helper's script (run_all adapts), or one run by hand
        tree = ast.parse((BENCH / b.file).read_text())
        funcs = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        assert "run" in funcs, f"{b.file} has no run(mode) -> list[Row]"


def test_row_rejects_a_target_it_cannot_check():
    with pytest.raises(ValueError, match="target"):
        Row("x", "y", 1.0, 1.0, "s", "b", target="fast")


def test_a_broken_baseline_says_so_instead_of_a_ratio():
    row = Row("web_crawl", "crawl vs bare", 2.6, 1.0, "steps/s", "bare loop", target=">= 0.8", note="n")
    # The baseline's screenshot within 3x of a settled page's: the row stays as measured.
    assert check_baseline(row, cost=250.0, reference=100.0, what="shot") is row
    broken = check_baseline(row, cost=2500.0, reference=100.0, what="the bare loop's screenshot, ms/step,")
    assert broken.baseline_broken and broken.figure is None and broken.ratio is None and broken.met is None
    assert broken.note.startswith("baseline broken: the bare loop's screenshot, ms/step, 2,500 vs 100")
    assert broken.extra == {"figure_measured": 2.6, "baseline_measured": 1.0}
    assert run_all.status(broken) == "**baseline broken**"
    machine = {
        "cpu": "c",
        "cpus": 2,
        "memory_gb": 8,
        "load_1m": 1.0,
        "python": "3",
        "chromium": "1",
        "gpu": None,
    }
    text = run_all.rewrite_doc(PROSE, [broken], run_all.REGISTRY, machine, "smoke", {}, when="now")
    cells = table_rows(text)["crawl vs bare"]
    assert cells[0] == "—" and cells[2] == "—" and cells[4] == "**baseline broken**"
    assert "- crawl vs bare: baseline broken: " in text
