"""benchmarks/predicate_agreement.py at smoke sizes through the real command (a real
SandboxServer and Chromium): predicate verifiers derived from oracle episodes, judged
against the sandbox's state verifiers on the same recorded end states."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"
sys.path.insert(0, str(BENCH))

from common import Row  # noqa: E402


def test_smoke_run_judges_pairs_both_ways(tmp_path):
    doc, rows_json = tmp_path / "benchmarks.md", tmp_path / "rows.json"
    doc.write_text("# Benchmarks\n")
    proc = subprocess.run(
        [sys.executable, str(BENCH / "run_all.py"), "--smoke", "--only", "predicate_agreement",
         "--doc", str(doc), "--json", str(rows_json)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = {r.name: r for r in map(Row.from_dict, json.loads(rows_json.read_text())["rows"])}
    agree = rows["sandbox: predicate verdicts agreeing with the state verifier (ratio = agreement)"]
    fa = rows["sandbox: predicate false accepts (ratio = share of state-false pairs)"]
    fr = rows["sandbox: predicate false rejects (ratio = share of state-true pairs)"]
    usable = rows["sandbox: goal instances whose oracle episode yields a predicate verifier"]
    # 3 settings instances in English and a walk: every usable task against 3 oracle ends + 1 walk.
    assert usable.baseline == 3 and 1 <= usable.figure <= 3, usable
    assert agree.baseline == usable.figure * 4, agree
    tally = agree.extra["tally"]
    # Each instance's own oracle end is accepted by its state verifier: at least one
    # state-true pair per usable task; the other instances' ends are mostly state-false.
    assert tally["state_true"] >= usable.figure and tally["state_false"] >= usable.figure
    assert fa.baseline == tally["state_false"] and fr.baseline == tally["state_true"]
    assert agree.figure == agree.baseline - fa.figure - fr.figure
    # Plausible, not the target (a smoke sample is small): most pairs agree.
    assert agree.ratio >= 0.5, agree.extra
    assert rows["sandbox settings: agreement"].baseline == agree.baseline
    text = doc.read_text()
    assert (
        "(`benchmarks/predicate_agreement.py`)" in text and "<!-- bench:predicate_agreement:start -->" in text
    )
