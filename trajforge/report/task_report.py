"""What `trajforge tasks synthesize` leaves beside its task file: the report and a picture.

`write_synthesis(report, out)` writes the kept tasks (JSON lines, the environment
file's task shape: `trajforge serve ENV --tasks FILE` serves them), the report
(`<out>.report.json`: the funnel, each rejection and each task's figures) and the
difficulty histogram of the kept goals (`<out>.difficulty.png`).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

from crawlers.task_synthesis import SynthesisReport

from .plots import histogram_png

BINS = 10  # difficulty in [0, 1], in tenths


def write_synthesis(report: SynthesisReport, out: Path) -> dict[str, Path]:
    """The task file, the report and the histogram; their paths by kind."""
    paths = {
        "tasks": out,
        "report": out.with_name(out.stem + ".report.json"),
        "difficulty": out.with_name(out.stem + ".difficulty.png"),
    }
    _write(paths["tasks"], "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in report.rows).encode())
    body = {
        "summary": report.summary(),
        "exploration": report.exploration,
        "validation": report.validation.as_dict() if report.validation else None,
    }
    _write(paths["report"], (json.dumps(body, indent=1, ensure_ascii=False) + "\n").encode())
    _write(paths["difficulty"], difficulty_png(report))
    return paths


def difficulty_png(report: SynthesisReport) -> bytes:
    one = [r for r in report.rows if r["language"] == report.languages[0]]
    counts = Counter(min(int((r.get("difficulty") or 0.0) * BINS), BINS - 1) for r in one)
    bins = {f"{k / BINS:.1f}": counts.get(k, 0) for k in range(BINS)}
    title = f"{report.environment}: difficulty of {len(one)} kept goals"
    return histogram_png(bins, title, "difficulty (from)", ylabel="goals")


def _write(path: Path, data: bytes) -> None:
    """Atomically: a temporary name, then a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)
