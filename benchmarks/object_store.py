"""Part commits and blob puts: a local folder against an S3-compatible server (moto on
loopback), in the same run, through the same RawStore API.

    .venv/bin/python benchmarks/object_store.py [smoke|quick|full]

Prints parts/s, blobs/s and exported samples/s (WebDataset shards written into a
local folder, or into s3:// through trajforge.publish.remote: the same export on a
local mirror, then every shard put whole and the manifest last) for each and the
ratio S3 / local. moto is an in-memory
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
from trajforge.store.object_store import open_raw_store  # noqa: E402
from trajforge.store.raw import RawStore  # noqa: E402

TRAJS_PER_PART, STEPS = 4, 5
SIZES = {
    "smoke": {"parts": 4, "blobs": 40, "samples": 60},
    "quick": {"parts": 20, "blobs": 200, "samples": 400},
    "full": {"parts": 60, "blobs": 600, "samples": 2000},
}
SAMPLES_PER_SHARD = 50


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


def export_samples(source: RawStore, dest, mirror: Path, storage_options) -> float:
    """Samples/s of an export into `dest` (a folder, or a URL published from `mirror`)."""
    from trajforge.publish.export import export_shards
    from trajforge.publish.remote import shard_destination

    t0 = time.perf_counter()
    with shard_destination(dest, local=mirror, storage_options=storage_options) as out:
        res = export_shards(source, out, dataset="bench", max_samples_per_shard=SAMPLES_PER_SHARD)
    return res.samples / (time.perf_counter() - t0)


def measure(parts: int, blobs: int, samples: int) -> dict:
    server = start_server()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            stores = {
                "local": RawStore(Path(tmp) / "raw"),
                "s3": open_raw_store(server.url("bench"), storage_options=server.storage_options),
            }
            figs = {k: [commit_parts(s, parts), put_blobs(s, blobs)] for k, s in stores.items()}
            source = RawStore(Path(tmp) / "export-source")
            with source.writer("bench", batch_size=16) as w:
                for i in range(samples // STEPS):
                    w.add(*make_traj(source, f"e{i:05d}", n=STEPS, seed=50_000 + i))
            figs["local"].append(export_samples(source, Path(tmp) / "shards", None, None))
            figs["s3"].append(
                export_samples(source, server.url("shards"), Path(tmp) / "mirror", server.storage_options)
            )
            return figs
    finally:
        stop_server(server.proc)


def run(mode: str) -> list[Row]:
    size = pick(mode, SIZES)
    figs = measure(size["parts"], size["blobs"], size["samples"])
    (lp, lb, le), (sp, sb, se) = figs["local"], figs["s3"]
    note = f"{size['parts']} parts of {TRAJS_PER_PART} traj x {STEPS} steps, {size['blobs']} blobs; {machine_short()}"
    return [
        Row(
            "object_store",
            "Part commits/s on the S3 server (moto, loopback)",
            sp,
            lp,
            "parts/s",
            "the same parts into a local folder",
            note=note,
        ),
        Row(
            "object_store",
            "Blob puts/s on the S3 server (moto, loopback)",
            sb,
            lb,
            "blobs/s",
            "the same blobs into a local folder",
            note=note,
        ),
        Row(
            "object_store",
            "Export samples/s into s3:// (moto, loopback; shards put, manifest last)",
            se,
            le,
            "samples/s",
            "the same export into a local folder",
            note=f"{size['samples']} samples, {SAMPLES_PER_SHARD} per shard; {machine_short()}",
        ),
    ]


if __name__ == "__main__":
    for r in run(sys.argv[1] if len(sys.argv) > 1 else "quick"):
        print(f"{r.name}: {r.figure:.1f} vs {r.baseline:.1f} {r.unit} (ratio {r.ratio:.2f}) {r.note}")
