"""Part commits and blob puts: a local folder against an S3-compatible server (moto on
loopback), in the same run, through the same RawStore API.

    .venv/bin/python benchmarks/object_store.py [--parts 20] [--blobs 200]

Prints parts/s and blobs/s for each and the ratio S3 / local. moto is an in-memory
Python server on this machine: the figure is the protocol's cost (requests per part:
claims, two tables, the marker), not a real S3's network latency.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.s3_server import start_server, stop_server  # noqa: E402
from tests.storage.records import make_traj, png  # noqa: E402
from trajforge.store import RawStore  # noqa: E402

TRAJS_PER_PART, STEPS = 4, 5


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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--parts", type=int, default=20)
    ap.add_argument("--blobs", type=int, default=200)
    args = ap.parse_args()
    server = start_server()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            stores = {"local": RawStore(Path(tmp) / "raw"),
                      "s3 (moto)": RawStore(server.url("bench"), storage_options=server.storage_options)}
            figs = {k: (commit_parts(s, args.parts), put_blobs(s, args.blobs)) for k, s in stores.items()}
    finally:
        stop_server(server.proc)
    print(f"{'store':<10} {'parts/s':>9} {'blobs/s':>9}   ({TRAJS_PER_PART} traj x {STEPS} steps a part)")
    for k, (p, b) in figs.items():
        print(f"{k:<10} {p:>9.1f} {b:>9.1f}")
    (lp, lb), (sp, sb) = figs["local"], figs["s3 (moto)"]
    print(f"ratio s3/local: parts {sp / lp:.2f}x, blobs {sb / lb:.2f}x")


if __name__ == "__main__":
    main()
