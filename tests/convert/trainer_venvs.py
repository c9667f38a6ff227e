"""The trainers' venvs (scripts/setup_trainers.sh, scripts/setup_llamafactory.sh), which pin
versions the main .venv cannot take, and a runner for a script in one of them."""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TRAINERS = ROOT / ".venv-trainers"
LLAMAFACTORY = ROOT / ".venv-llamafactory"


def run_in_venv(venv: Path, script: str, cwd: Path, *args: str, timeout: int = 120) -> dict:
    """`script` in `venv`'s python; its last stdout line is JSON."""
    py = venv / "bin" / "python"
    if not py.exists():
        pytest.fail(f"{py} is missing: run scripts/setup_test.sh (make test runs it)")
    p = subprocess.run(
        [str(py), "-c", textwrap.dedent(script), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert p.returncode == 0, p.stderr[-4000:]
    return json.loads(p.stdout.strip().splitlines()[-1])
