"""benchmarks/gpu_checks.sh --tiny: the GPU script's engine rows on CPU (tiny model, a small
built set): every row trains, packed and padded rows start from the same loss, the figures
are there, and a bad option exits non-zero. Slow (about 2 minutes on a loaded 2-core box)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_gpu_checks_tiny_runs_every_engine_row(tmp_path):
    out = tmp_path / "gpu"
    env = {"PATH": "/usr/bin:/bin", "PYTHON": str(REPO / ".venv" / "bin" / "python"), "HOME": str(tmp_path)}
    run = subprocess.run(
        ["bash", "benchmarks/gpu_checks.sh", "--tiny", str(out)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    rows = {r["row"]: r for r in map(json.loads, (out / "train_engines.jsonl").read_text().splitlines())}
    assert set(rows) == {"trl-padded", "trl-packed", "builtin-padded", "builtin-packed"}
    for r in rows.values():
        assert "error" not in r, r
        assert r["s_per_step"] > 0 and r["tokens_per_s"] > 0 and 0 < r["mfu"] < 1
        assert 0 <= r["data_wait_share"] < 1 and r["steps_timed"] == 2 and r["device"] == "cpu"
    for engine in ("trl", "builtin"):  # the same samples and weights: the same first loss
        assert rows[f"{engine}-packed"]["loss_first"] == pytest.approx(
            rows[f"{engine}-padded"]["loss_first"], abs=1e-4
        )
    assert "train_engines_tiny rc=0" in (out / "steps.txt").read_text()


def test_gpu_checks_refuses_an_unknown_option(tmp_path):
    run = subprocess.run(
        ["bash", "benchmarks/gpu_checks.sh", "--fast", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 2 and "unknown option --fast" in run.stderr
