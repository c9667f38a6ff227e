"""benchmarks/desktop.py at smoke sizes through the real command (a real Xvfb, AT-SPI bus
and mousepad): every row is measured, positive, against its same-run baseline."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"
sys.path.insert(0, str(BENCH))

from common import Row  # noqa: E402

pytestmark = pytest.mark.skipif(
    shutil.which("Xvfb") is None or shutil.which("mousepad") is None,
    reason="needs Xvfb and mousepad (scripts/setup_desktop.sh)",
)


def test_smoke_run_measures_every_desktop_row(tmp_path):
    doc, rows_json = tmp_path / "benchmarks.md", tmp_path / "rows.json"
    doc.write_text("# Benchmarks\n")
    proc = subprocess.run(
        [sys.executable, str(BENCH / "run_all.py"), "--smoke", "--only", "desktop", "--doc", str(doc),
         "--json", str(rows_json)],
        cwd=ROOT, capture_output=True, text=True, timeout=400,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = {r.name: r for r in map(Row.from_dict, json.loads(rows_json.read_text())["rows"])}
    assert set(rows) == {
        "desktop step P50 (mousepad)",
        "desktop step P95 (mousepad)",
        "desktop reset P50 (mousepad)",
        "desktop reset P95 (mousepad)",
        "accessibility-tree read per observation P50 (mousepad)",
        "desktop sessions per GB, 1 open (mousepad)",
    }, sorted(rows)
    for r in rows.values():
        assert r.figure and r.figure > 0 and r.baseline and r.baseline > 0, r
    # A step does the bare loop's click and screenshot and more (settle, tree, PNG).
    assert rows["desktop step P50 (mousepad)"].ratio > 1.0
    # A session's processes: Xvfb, D-Bus, the app, and the accessibility layer (its bus
    # launcher, bus and registry, the reader) that the baseline goes without. (PSS itself
    # moves with whatever else on the machine shares the apps' pages.)
    density = rows["desktop sessions per GB, 1 open (mousepad)"].extra
    assert density["bare_processes"] == 3 and density["processes"] > density["bare_processes"]
    assert "## Desktop environments (Xvfb, AT-SPI, XTEST) (`benchmarks/desktop.py`)" in doc.read_text()
