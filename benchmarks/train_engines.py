"""The SFT engines as labs run them, on real set batches: s/step, tokens/s, MFU, peak memory,
and the share of step time spent waiting for data; padded batches against packed rows.

    python benchmarks/train_engines.py --set data/shards/reasoning       # cuda, 3B shape, random
    python benchmarks/train_engines.py --tiny --device cpu               # the tiny model, < 2 min

Rows (each a fresh model, timed after --warmup steps):
  trl-padded     training.engines.trl_sft (WeightedSFTTrainer + its collator), padded batches
  trl-packed     the same, each micro-batch one padding-free row (pack_tokens)
  builtin-padded training.sft, padded batches, samples from the cache (training.sample_cache)
  builtin-packed training.sft, packed rows of --pack-tokens tokens, from the cache
The set is a reasoning set (the demo's, or the slice benchmarks/gpu_bundle.sh carries; --tiny
without --set builds the small test set) and its TRL conversion (trajforge.convert). The
model is Qwen2.5-VL-3B's shape with random weights (benchmarks/train_gpu.py's builder,
saved once so both engines load it from a path), or the tiny Qwen2-VL with --tiny.

MFU = 6 x (language-model matmul parameters x tokens + vision parameters x patches) / s,
against the measured bf16 matmul peak (train_gpu.py's definitions); patches per token are
the set's own ratio. data_wait_share: seconds the loop waited for its next batch / wall.
Prints one JSON line per row and a table; --out writes them as JSON lines.
"""

from __future__ import annotations

import argparse
import gc
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

ROWS = ("trl-padded", "trl-packed", "builtin-padded", "builtin-packed")


class StepClock:
    """A Reporter that keeps the time of every step's metric call (and prints logs)."""

    def __init__(self):
        self.times: list[float] = []
        self.extras: dict = {}

    def log(self, msg: str) -> None:
        print(msg, flush=True)

    def metric(self, step: int, **values) -> None:
        self.times.append(time.perf_counter())

    def final(self, metrics) -> None:
        pass


def model_dir(args, work: Path) -> tuple[Path, dict[str, int]]:
    """(model folder, parameter counts): the tiny model, or the 3B shape saved once."""
    import torch
    from train_gpu import build_model, parameter_counts

    from trajforge.vlm.tiny import build_tiny_vlm, default_tiny_dir

    tiny = build_tiny_vlm(default_tiny_dir())
    if args.tiny:
        from transformers import AutoModelForImageTextToText

        return tiny, parameter_counts(AutoModelForImageTextToText.from_pretrained(tiny))
    out = work / "qwen25vl-3b-shape"
    ns = argparse.Namespace(tiny=False, layers=args.layers, image_max_pixels=args.image_max_pixels)
    model, processor = build_model(ns, "cpu", torch.bfloat16)
    counts = parameter_counts(model)
    model.save_pretrained(out)
    processor.save_pretrained(out)
    del model
    gc.collect()
    return out, counts


def set_ratios(args, shards: Path, processor_dir: Path) -> dict[str, float]:
    """Tokens and image patches per sample over the benchmark's samples."""
    from training.data import encode_sample, iter_reasoning_samples
    from trajforge.vlm.transformers_backend import load_processor

    processor = load_processor(processor_dir)
    tokens = patches = n = 0
    for sample in iter_reasoning_samples(shards, "train"):
        e = encode_sample(processor, sample.json, sample.image, args.max_length, args.image_max_pixels)
        tokens += e["input_ids"].shape[0]
        patches += int(e["image_grid_thw"].prod(-1).sum())
        n += 1
        if n >= args.batch_size * (args.steps + args.warmup):
            break
    return {"tokens_per_sample": tokens / n, "patches_per_token": patches / tokens}


def run_row(row: str, args, model: Path, shards: Path, trl_data: Path, work: Path) -> dict:
    import torch

    from training.config import SFTConfig, TrlSFTConfig

    cuda = args.device.startswith("cuda")
    common = dict(
        model_path=str(model),
        shards=str(shards),
        out_dir=str(work / f"out-{row}"),
        device=args.device,
        max_steps=args.warmup + args.steps,
        batch_size=args.batch_size,
        lr=1e-5,
        max_length=args.max_length,
        image_max_pixels=args.image_max_pixels,
        gradient_checkpointing=args.grad_ckpt,
        allow_template_thoughts=True,
        pack_tokens=args.pack_tokens if row.endswith("packed") else None,
    )
    clock = StepClock()
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    if row.startswith("trl"):
        from training.engines.trl_sft import run_trl_sft

        trainer = {"dataloader_pin_memory": cuda}
        cfg = TrlSFTConfig(**common, data_dir=str(trl_data), data_workers=args.data_workers, trainer=trainer)
        metrics = run_trl_sft(cfg, clock)
    else:
        from training.sft import train_sft

        fast = dict(trained_logits_only=args.trained_logits_only, checkpoint_every=args.checkpoint_every)
        cfg = SFTConfig(**common, cache_dir=str(work / "cache"), prefetch_batches=2, **fast)
        metrics, _, _ = train_sft(cfg, clock)
    peak = torch.cuda.max_memory_allocated() / 2**30 if cuda else None
    shutil.rmtree(work / f"out-{row}", ignore_errors=True)
    timed = (
        clock.times[args.warmup - 1 :] if args.warmup else [clock.times[0] - metrics["wall_s"]] + clock.times
    )
    seconds = timed[-1] - timed[0]
    steps = len(timed) - 1
    per_step_tokens = metrics["tokens"] / max(len(clock.times), 1)
    return {
        "row": row,
        "steps_timed": steps,
        "s_per_step": seconds / steps if steps else None,
        "tokens_per_step": per_step_tokens,
        "tokens_per_s": per_step_tokens * steps / seconds if seconds > 0 else None,
        "data_wait_share": round(metrics["data_wait_share"], 4),
        "peak_memory_gib": round(peak, 1) if peak is not None else None,
        "loss_first": metrics["loss_first"],
        "samples": metrics["samples"],
    }


def table(rows: list[dict]) -> str:
    head = f"{'row':<16}{'s/step':>9}{'tokens/step':>13}{'tokens/s':>11}{'MFU':>8}{'wait':>7}{'peak GiB':>10}"
    lines = [head]
    for r in rows:
        if "error" in r:
            lines.append(f"{r['row']:<16} failed: {r['error'][:90]}")
            continue
        mfu = f"{100 * r['mfu']:.1f}%" if r.get("mfu") is not None else "-"
        lines.append(
            f"{r['row']:<16}{r['s_per_step']:>9.3f}{r['tokens_per_step']:>13,.0f}{r['tokens_per_s']:>11,.0f}"
            f"{mfu:>8}{100 * r['data_wait_share']:>6.1f}%{r['peak_memory_gib'] or '-':>10}"
        )
    return "\n".join(lines)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--set", type=Path, default=None, help="a reasoning set (default with --tiny: a small one)"
    )
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true", help="the tiny model, small sizes (CPU check)")
    ap.add_argument("--rows", default=",".join(ROWS), help=f"comma-separated, of {', '.join(ROWS)}")
    ap.add_argument("--batch-size", type=int, default=None)
    ap.add_argument("--pack-tokens", type=int, default=None)
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--warmup", type=int, default=None)
    ap.add_argument("--layers", type=int, default=0, help="override the 3B shape's 36 text layers")
    ap.add_argument("--grad-ckpt", action=argparse.BooleanOptionalAction, default=None)
    ap.add_argument("--data-workers", type=int, default=0, help="TRL dataloader workers")
    ap.add_argument(
        "--trained-logits-only", action="store_true", help="builtin rows: LM head on answers only"
    )
    ap.add_argument(
        "--checkpoint-every", type=int, default=1, help="builtin rows: checkpoint every n-th layer"
    )
    ap.add_argument("--max-length", type=int, default=4096)
    ap.add_argument("--image-max-pixels", type=int, default=None)
    ap.add_argument("--matmul-size", type=int, default=None)
    ap.add_argument("--out", type=Path, default=None, help="append the rows as JSON lines here")
    args = ap.parse_args(argv)
    tiny = dict(
        batch_size=2, pack_tokens=2048, steps=2, warmup=1, image_max_pixels=28 * 28 * 16, matmul_size=256
    )
    # full: images in the set's own frame unless --image-max-pixels (a cap below the frame the
    # set's answers are written in is refused for a non-tiny model: training.data.frame_gate)
    full = dict(batch_size=8, pack_tokens=8192, steps=6, warmup=2, matmul_size=8192)
    for k, v in (tiny if args.tiny else full).items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    unknown = set(args.rows.split(",")) - set(ROWS)
    if unknown:
        ap.error(f"unknown rows {sorted(unknown)} (of {', '.join(ROWS)})")
    if args.set is None and not args.tiny:
        ap.error("--set: the reasoning set to train on (the demo's, or the bundle's slice)")
    return args


def main(argv=None) -> list[dict]:
    import torch
    from train_gpu import peak_matmul_tflops

    from trajforge.convert import convert

    args = parse_args(argv)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("no CUDA device: run with --device cpu --tiny for the plumbing check")
    if not args.device.startswith("cuda"):
        torch.set_num_threads(1)  # a shared few-core machine: one thread is the fastest here
    work = Path(tempfile.mkdtemp(prefix="train-engines-"))
    try:
        shards = args.set
        if shards is None:
            from tests.training.conftest import build_small_reasoning_set

            shards = build_small_reasoning_set(work / "set", n_traj=6)
        trl_data = work / "trl"
        convert(shards, "trl", trl_data)
        cuda = args.device.startswith("cuda")
        peak = peak_matmul_tflops(
            args.device, torch.bfloat16 if cuda else torch.float32, args.matmul_size, 20
        )
        model, counts = model_dir(args, work)
        ratios = set_ratios(args, shards, model)
        print(f"peak {peak:.4g} TFLOP/s; params {counts}; set {ratios}", flush=True)
        rows = []
        for row in args.rows.split(","):
            try:
                r = run_row(row, args, model, shards, trl_data, work)
            except Exception as exc:  # noqa: BLE001 - one row's failure (e.g. out of memory) is a result
                r = {"row": row, "error": f"{type(exc).__name__}: {exc}"}
            if "error" not in r and r["tokens_per_s"]:
                patches = r["tokens_per_s"] * ratios["patches_per_token"]
                flops = 6 * (counts["language_matmul"] * r["tokens_per_s"] + counts["vision"] * patches)
                r["mfu"] = round(flops / 1e12 / peak, 4)
            r.update(
                device=args.device, model="tiny-qwen2vl" if args.tiny else "qwen2.5-vl-3b-shape (random)"
            )
            r.update(
                peak_tflops=float(f"{peak:.4g}"), batch_size=args.batch_size, pack_tokens=args.pack_tokens
            )
            print(json.dumps(r), flush=True)
            rows.append(r)
            gc.collect()
        print(table(rows))
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            with args.out.open("a") as f:
                f.writelines(json.dumps(r) + "\n" for r in rows)
        return rows
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
