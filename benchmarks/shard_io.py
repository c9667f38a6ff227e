"""Shard I/O: our shard writing against plain `tarfile`, and read throughput.

    .venv/bin/python benchmarks/shard_io.py [--trajectories 60] [--steps 5] [--repeat 3]

Builds a raw store of 1280x800 PNG screenshots (a noisy block each, ~150 KB),
exports it once, then in the same run and on the same bytes:

- write, ours: `trajforge.publish.shards.ShardTarWriter` (tar headers from a template,
  sha256 on a helper thread) writing the exported samples from memory into
  the same shard files as the export rolled them, fsync per shard;
- write, export's writer: `trajforge.publish.writer.SplitWriter` (rolling by count and
  bytes, and per shard the resume journal's fsync'd line and a folder fsync)
  writing the same samples, grouped by trajectory;
- write, tarfile: plain `tarfile` writing the same members (same names, same
  bytes, one file per shard) from memory, fsync per shard;
- export: `export_shards` end to end (DuckDB sort, JSON, blob reads, rename,
  manifest), in MB of shards per second;
- export with a resolution profile (--profile, default qwen): samples/s,
  the cost of decoding, resizing and re-encoding every screenshot;
- read: samples/s through `trajforge.publish.shards.iter_samples` (tarfile) and
  through `webdataset.WebDataset` (no decoding), from the page cache.

Each figure is the best of --repeat runs (interleaved, so load drifts hit both
sides alike; the three writes, which take a fraction of a second, are each
tried WRITE_TRIALS times a run). Prints one JSON object with the figures and
the ratios; the target is write ratio (ours / tarfile) >= 0.8.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np
import webdataset  # noqa: F401  (imports torch: warm, so no timed run pays for it)
from PIL import Image
from tqdm import tqdm

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from schemas.actions import Action  # noqa: E402
from schemas.records import DeviceProfile, Step, Task, Trajectory  # noqa: E402
from trajforge.publish.export import export_shards  # noqa: E402
from trajforge.publish.shards import ShardTarWriter, iter_samples, read_manifest  # noqa: E402
from trajforge.publish.writer import ShardJournal, SplitWriter  # noqa: E402
from trajforge.store.raw import RawStore  # noqa: E402

W, H = 1280, 800
MB = 1e6
WRITE_TRIALS = 3  # tries of each write a run (interleaved), the best counts


def build_store(root: Path, trajectories: int, steps: int) -> RawStore:
    store = RawStore(root)
    rng = np.random.default_rng(0)
    with (
        store.writer("bench", batch_size=16) as w,
        tqdm(total=trajectories * steps, desc="screenshots", file=sys.stderr) as bar,
    ):
        for t in range(trajectories):
            tid = f"bench-{t:05d}"
            task = Task(task_id=f"t{t}", language="en", app="shop", instruction="Buy red shoes")
            images = []
            for _i in range(steps):
                im = np.full((H, W, 3), 240, np.uint8)
                im[100:320, 200:420] = rng.integers(0, 256, (220, 220, 3), dtype=np.uint8)
                buf = io.BytesIO()
                Image.fromarray(im).save(buf, format="PNG", compress_level=1)
                images.append((buf.getvalue(), "png"))
                bar.update()
            rows = [
                Step(
                    trajectory_id=tid,
                    index=i,
                    screenshot=sha,
                    width=W,
                    height=H,
                    url="http://shop/",
                    a11y_tree='- button "Go" [ref=e1]\n' * 20,
                    action=Action.tap(0.3, 0.4),
                    thought="Tap Go to continue.",
                )
                for i, sha in enumerate(store.blobs.put_many(images))
            ]
            w.add(
                Trajectory(
                    trajectory_id=tid,
                    task=task,
                    platform="web",
                    app="shop",
                    device=DeviceProfile(viewport_width=W, viewport_height=H),
                    policy="oracle",
                    num_steps=steps,
                ),
                rows,
            )
    return store


class _MemSample:
    """An exported sample held in memory, shaped as the writer's samples are."""

    def __init__(self, key: str, members: list[tuple[str, bytes]]):
        self.key, self.members = key, members
        self.trajectory_id = key.rsplit("_s", 1)[0]
        self.image_ext = next(ext for ext, _ in members if ext != "json")

    def tar_bytes(self) -> int:
        return sum(512 + -(-len(d) // 512) * 512 for _, d in self.members)

    def record(self) -> dict:
        return {"__key__": self.key, **dict(self.members)}


def load_shards(shard_dir: Path) -> list[list[_MemSample]]:
    """Every shard's samples, with their raw member bytes, in order."""
    shards = []
    for s in read_manifest(shard_dir)["shards"]:
        with tarfile.open(shard_dir / s["name"]) as tar:
            samples: dict[str, list] = {}
            for m in tar:
                stem, _, ext = m.name.partition(".")
                samples.setdefault(stem, []).append((ext, tar.extractfile(m).read()))
        shards.append([_MemSample(k, v) for k, v in samples.items()])
    return shards


def write_ours(shards: list[list[_MemSample]], out: Path) -> int:
    out.mkdir()
    total = 0
    for n, samples in enumerate(shards):
        with open(out / f"train-{n:06d}.tar", "wb") as f:
            writer = ShardTarWriter(f)
            for s in samples:
                writer.write(s.record())
            writer.close()
            os.fsync(f.fileno())
        total += writer.size
    return total


def write_split_writer(shards: list[list[_MemSample]], out: Path, max_samples: int) -> int:
    out.mkdir()
    journal = ShardJournal(out)
    writer = SplitWriter(out, "train", max_samples, 1 << 40, journal)
    for samples in shards:  # one trajectory group at a time, as the export hands them over
        by_traj: dict[str, list] = {}
        for s in samples:
            by_traj.setdefault(s.trajectory_id, []).append(s)
        for group in by_traj.values():
            writer.add_trajectory(group)
    return sum(s["bytes"] for s in writer.finish())


def write_tarfile(shards: list[list[_MemSample]], out: Path) -> int:
    out.mkdir()
    total = 0
    for n, samples in enumerate(shards):
        path = out / f"train-{n:06d}.tar"
        with open(path, "wb") as f:
            with tarfile.open(fileobj=f, mode="w", format=tarfile.USTAR_FORMAT) as tar:
                for s in samples:
                    for ext, data in s.members:
                        info = tarfile.TarInfo(f"{s.key}.{ext}")
                        info.size, info.mtime, info.mode = len(data), 0, 0o644
                        tar.addfile(info, io.BytesIO(data))
            f.flush()
            os.fsync(f.fileno())
        total += path.stat().st_size
    return total


def timed(fn, *args, **kw) -> tuple[float, object]:
    t = time.perf_counter()
    out = fn(*args, **kw)
    return time.perf_counter() - t, out


def read_ours(shard_dir: Path) -> int:
    return sum(1 for _ in iter_samples(shard_dir))


def read_wds(paths: list[str]) -> int:
    import webdataset as wds

    return sum(1 for _ in wds.WebDataset(paths, shardshuffle=False, empty_check=False))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trajectories", type=int, default=60)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--samples-per-shard", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--profile", default="qwen", help="resolution profile for the resize figure")
    ap.add_argument("--workdir", type=Path, default=None, help="default: a temporary folder")
    args = ap.parse_args()
    print(json.dumps(measure(args), indent=2))


def measure(args) -> dict:
    """The figures (what `main` prints) for `args` (main's options)."""
    work = Path(args.workdir or tempfile.mkdtemp(prefix="shard_io-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        store = build_store(work / "raw", args.trajectories, args.steps)
        best = {
            k: float("inf")
            for k in ("export", "ours", "split_writer", "tarfile", "read_ours", "read_wds", "resize")
        }
        sizes: dict[str, int] = {}
        cpu_s: dict[str, float] = {}  # CPU seconds of each write (best): what load cannot blur
        samples = 0
        for r in tqdm(range(args.repeat), desc="rounds", file=sys.stderr):
            out = work / f"export-{r}"
            t, res = timed(
                export_shards,
                store,
                out,
                dataset="bench",
                max_samples_per_shard=args.samples_per_shard,
                splits=[("train", 1.0)],
            )
            best["export"], sizes["export"], samples = min(best["export"], t), res.bytes, res.samples
            shards = load_shards(out)
            exported = [p.read_bytes() for p in sorted(out.glob("*.tar"))]
            writes = {
                "ours": lambda d: write_ours(shards, d),
                "split_writer": lambda d: write_split_writer(shards, d, args.samples_per_shard),
                "tarfile": lambda d: write_tarfile(shards, d),
            }
            for trial in range(WRITE_TRIALS):
                for name, write in writes.items():
                    d = work / f"{name}-{r}-{trial}"
                    cpu = time.process_time()  # this process, its threads included
                    t, sizes[name] = timed(write, d)
                    cpu_s[name] = min(cpu_s.get(name, float("inf")), time.process_time() - cpu)
                    best[name] = min(best[name], t)
                    if name != "tarfile":  # same members, same bytes as the export wrote
                        assert [p.read_bytes() for p in sorted(d.glob("*.tar"))] == exported
                    shutil.rmtree(d)
            t, n = timed(read_ours, out)
            assert n == samples
            best["read_ours"] = min(best["read_ours"], t)
            paths = [str(p) for p in sorted(out.glob("*.tar"))]
            t, n = timed(read_wds, paths)
            assert n == samples
            best["read_wds"] = min(best["read_wds"], t)
            t, _ = timed(
                export_shards,
                store,
                work / f"resized-{r}",
                dataset="bench",
                max_samples_per_shard=args.samples_per_shard,
                splits=[("train", 1.0)],
                resolution=args.profile,
            )
            best["resize"] = min(best["resize"], t)
            shutil.rmtree(work / f"resized-{r}")
        mbps = {k: round(sizes[k] / MB / best[k], 1) for k in ("export", "ours", "split_writer", "tarfile")}
        sps = {k: round(samples / best[k]) for k in ("read_ours", "read_wds", "resize", "export")}
        figures = {
            "samples": samples,
            "shards": len(paths),
            "shard_mb": round(sizes["export"] / MB, 1),
            "mean_sample_kb": round(sizes["export"] / samples / 1e3, 1),
            "write_mb_s": {
                "ours_writer": mbps["ours"],
                "split_writer": mbps["split_writer"],
                "tarfile": mbps["tarfile"],
                "export_end_to_end": mbps["export"],
            },
            "write_ratio_ours_vs_tarfile": round(mbps["ours"] / mbps["tarfile"], 3),
            "write_ratio_split_writer_vs_tarfile": round(mbps["split_writer"] / mbps["tarfile"], 3),
            "write_cpu_ms": {k: round(v * 1e3, 1) for k, v in cpu_s.items()},
            "export_ratio_vs_tarfile": round(mbps["export"] / mbps["tarfile"], 3),
            "export_samples_s": {"native": sps["export"], args.profile: sps["resize"]},
            "read_samples_s": {"trajforge_iter_samples": sps["read_ours"], "webdataset": sps["read_wds"]},
            "read_ratio_ours_vs_webdataset": round(sps["read_ours"] / sps["read_wds"], 3),
            "target_write_ratio": 0.8,
            "repeat": args.repeat,
            "cpus": os.cpu_count(),
        }
        return figures
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)


# run_all's sizes (the documented run is --trajectories 80 --steps 5 --samples-per-shard 100 --repeat 3)
SIZES = {
    "smoke": dict(trajectories=4, steps=3, samples_per_shard=5, repeat=1),
    "quick": dict(trajectories=20, steps=5, samples_per_shard=50, repeat=2),
    "full": dict(trajectories=40, steps=5, samples_per_shard=50, repeat=2),
}


def run(mode: str):
    """run_all's entry: the figures as table rows."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from common import Row, machine_short, pick

    s = pick(mode, SIZES)
    f = measure(argparse.Namespace(profile="qwen", workdir=None, **s))
    mach = machine_short()
    w, r = f["write_mb_s"], f["read_samples_s"]
    tries = s["repeat"] * WRITE_TRIALS
    size = f"{f['samples']} samples, {f['shard_mb']} MB in {f['shards']} shards, best of {tries}"
    return [
        Row(
            "shard_io",
            "shards: trajforge shard writer (ShardTarWriter, sha256 on a helper thread)",
            w["ours_writer"],
            w["tarfile"],
            "MB/s",
            "plain tarfile, same members",
            target=">= 0.8",
            note=size,
            machine=mach,
        ),
        Row(
            "shard_io",
            "shards: export's SplitWriter (rolling, + journal and folder fsyncs)",
            w["split_writer"],
            w["tarfile"],
            "MB/s",
            "plain tarfile, same members",
            note=f"best of {tries}",
            machine=mach,
        ),
        Row(
            "shard_io",
            "shards: export_shards end to end (store read, sort, JSON, write)",
            w["export_end_to_end"],
            w["tarfile"],
            "MB/s",
            "plain tarfile, same members",
            note=f"{f['export_samples_s']['native']} samples/s",
            machine=mach,
        ),
        Row(
            "shard_io",
            "shards: export with the qwen resolution profile (resize)",
            f["export_samples_s"]["qwen"],
            f["export_samples_s"]["native"],
            "samples/s",
            "export at native resolution",
            machine=mach,
        ),
        Row(
            "shard_io",
            "shards: read, trajforge.publish.shards.iter_samples",
            r["trajforge_iter_samples"],
            r["webdataset"],
            "samples/s",
            "webdataset.WebDataset (no decode)",
            machine=mach,
        ),
    ]


if __name__ == "__main__":
    main()
