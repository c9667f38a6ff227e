"""`trajforge convert` throughput per format against a plain copy of the same bytes, and
peak memory (RSS) at 1x, 2x and 4x the samples.

    .venv/bin/python benchmarks/convert.py [smoke|quick|full]

A reasoning set is built from the export fixture store (template CoT; 96x60 screenshots
at qwen2.5-vl's frame), then each format is converted in a child process, which reports
its wall time and its own peak RSS. Rows: MB/s of the set's shard bytes per format
against `shutil.copytree` of the same folder in the same run; samples/s in `extra`; and
peak RSS at 4x against 1x (flat memory: the ratio stays near 1).
"""

from __future__ import annotations

import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, Row, machine_short  # noqa: E402

SIZES = {"smoke": 24, "quick": 96, "full": 240}  # trajectories at 1x


def build_set(root: Path, n_traj: int) -> Path:
    from synthesis.cot import generate_cot
    from synthesis.set_writer import write_reasoning_set
    from tests.export.shard_fixtures import build_store

    built = build_store(root / "curated", n_traj=n_traj)
    rows = [
        c.to_row()
        for c in generate_cot([(built.trajectories[t], built.steps[t]) for t in sorted(built.trajectories)])
    ]
    write_reasoning_set(built.store, rows, root / "set", dataset="bench")
    return root / "set"


def child(set_dir: str, fmt: str, out: str) -> None:
    from trajforge.convert import convert

    t = time.perf_counter()
    m = convert(set_dir, fmt, out)
    print(
        json.dumps(
            {
                "seconds": time.perf_counter() - t,
                "samples": m["samples"],
                "inexpressible": m["inexpressible_count"],
                "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            }
        )
    )


def measure(set_dir: Path, fmt: str, out: Path) -> dict:
    r = subprocess.run(
        [sys.executable, __file__, "--child", str(set_dir), fmt, str(out)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return json.loads(r.stdout.strip().splitlines()[-1])


def set_bytes(set_dir: Path) -> int:
    return sum(p.stat().st_size for p in set_dir.glob("*.tar"))


def run(mode: str = "quick") -> list[Row]:
    from trajforge.convert import FORMATS

    rows, machine = [], machine_short()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        sets = {k: build_set(tmp / f"x{k}", SIZES[mode] * k) for k in (1, 2, 4)}
        big = sets[4]
        mb = set_bytes(big) / 1e6
        t = time.perf_counter()
        shutil.copytree(big, tmp / "copy")
        copy_mb_s = mb / (time.perf_counter() - t)
        for fmt in sorted(FORMATS):
            r = measure(big, fmt, tmp / "out" / fmt)
            rows.append(
                Row(
                    "convert",
                    f"{fmt}: MB/s of set bytes",
                    mb / r["seconds"],
                    copy_mb_s,
                    "MB/s",
                    "plain copy of the same bytes",
                    machine=machine,
                    extra={
                        "samples_per_s": r["samples"] / r["seconds"],
                        "samples": r["samples"],
                        "inexpressible": r["inexpressible"],
                        "set_mb": mb,
                    },
                )
            )
        for fmt in ("hf-parquet", "llamafactory"):
            rss = {k: measure(s, fmt, tmp / f"rss{k}" / fmt)["rss_mb"] for k, s in sets.items()}
            rows.append(
                Row(
                    "convert",
                    f"{fmt}: peak RSS at 4x samples",
                    rss[4],
                    rss[1],
                    "MB",
                    "peak RSS at 1x",
                    target="<= 1.25",
                    machine=machine,
                    extra={"rss_mb": rss},
                )
            )
    return rows


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(*sys.argv[2:5])
    else:
        for r in run(sys.argv[1] if len(sys.argv) > 1 else "quick"):
            print(
                f"{r.name}: {r.figure:.2f} vs {r.baseline:.2f} {r.unit} (ratio {r.ratio:.2f}) "
                f"{json.dumps(r.extra)}"
            )
