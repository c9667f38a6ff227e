"""Part commits and blob puts: a local folder against an S3-compatible server (moto on
loopback), in the same run, through the same RawStore API.

    .venv/bin/python benchmarks/object_store.py [smoke|quick|full]

Prints parts/s and blobs/s for each and the ratio S3 / local. moto is an in-memory
Python server on this machine: the figure is the protocol's cost (requests per part:
claims, two tables, the marker), not a real S3's network latency.
"""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from common import Row, machine_short, pick  # noqa: E402
from tests.s3_server import start_server, stop_server  # noqa: E402
from tests.storage.records import make_traj, png  # noqa: E402
from trajforge.store import RawStore  # noqa: E402

TRAJS_PER_PART, STEPS = 4, 5
SIZES = {"smoke": {"parts": 4, "blobs": 40}, "quick": {"parts": 20, "blobs": 200},
         "full": {"parts": 60, "blobs": 600}}


def commit_parts(store, parts: int) -> float:
    # Records (and their blobs) first: the timed loop is add + commit only.
    records = [make_traj(store, f"t{i:05d}", n=STEPS, seed=i) for i in range(parts * TRAJS_PER_PART)]
    t0 = time.perf_counter()
    with store.writer("bench", batch_size=TRAJS_PER_PART) as w:
        for r in records:
            w.add(*r)
    return parts / (time.perf_counter() - t0)


def put_blobs(store, n: int) -> float:
    items = [(png(10_000 + i), "png") for i in range(n)]
    t0 = time.perf_counter()
    store.blobs.put_many(items)
    return n / (time.perf_counter() - t0)


def measure(parts: int, blobs: int) -> dict:
    server = start_server()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            stores = {"local": RawStore(Path(tmp) / "raw"),
                      "s3": RawStore(server.url("bench"), storage_options=server.storage_options)}
            return {k: (commit_parts(s, parts), put_blobs(s, blobs)) for k, s in stores.items()}
    finally:
        stop_server(server.proc)


def run(mode: str) -> list[Row]:
    size = pick(mode, SIZES)
    figs = measure(size["parts"], size["blobs"])
    (lp, lb), (sp, sb) = figs["local"], figs["s3"]
    note = f"{size['parts']} parts of {TRAJS_PER_PART} traj x {STEPS} steps, {size['blobs']} blobs; {machine_short()}"
    return [
        Row("object_store", "Part commits/s on the S3 server (moto, loopback)", sp, lp, "parts/s",
            "the same parts into a local folder", note=note),
        Row("object_store", "Blob puts/s on the S3 server (moto, loopback)", sb, lb, "blobs/s",
            "the same blobs into a local folder", note=note),
    ]


if __name__ == "__main__":
    for r in run(sys.argv[1] if len(sys.argv) > 1 else "quick"):
        print(f"{r.name}: {r.figure:.1f} vs {r.baseline:.1f} {r.unit} (ratio {r.ratio:.2f}) {r.note}")
