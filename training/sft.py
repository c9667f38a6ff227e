"""Supervised fine-tuning on a reasoning set with the action/coordinate-weighted loss.

    python -m training.sft --config examples/train/sft_tiny.yaml [--set max_steps=20 ...]

Streams the split's shards (never loaded whole), encodes each sample with the
model's chat template (training.data), and trains with AdamW, gradient clipping
and the weighted token loss (training.loss). On CUDA: fp32 master weights, bf16
autocast and fused AdamW (training.precision), gradient checkpointing (config
`gradient_checkpointing`, default on for cuda). On CPU (the tests, the tiny model):
fp32, no checkpointing. Deterministic for a seed.

Speed (issue 35; docs/benchmarks.md "GPU training speed"): `pack_tokens` packs a step's
samples into one padding-free row (training.packing), `cache_dir` encodes the split once
(training.sample_cache), `prefetch_batches` prepares batches in a background thread
(training.data_feed); the metrics report data_wait_share, the share of wall time the loop
waited for data. `trained_logits_only` runs the LM head on the answer positions only,
`checkpoint_every` checkpoints every n-th layer, `master_weights` keeps fp32 copies of
bf16 weights in AdamW, and Liger's kernels are applied when liger-kernel is installed.

The checkpoint lands in <out_dir>/<checkpoint_id>; its id hashes the config, the
data's manifest and the base model, so a re-run with the same inputs returns the
finished checkpoint without training (idempotent materialisation).

Template thoughts: a full run (any model but the tiny random-weights one) on
reason-then-act samples refuses a set whose thoughts the template backend wrote,
unless the config says `allow_template_thoughts: true`; the metrics report the set's
thought_backend_share and what was done (template_thoughts).

Multi-GPU: launch under torchrun, e.g.
    torchrun --nproc_per_node 8 -m training.sft --config examples/train/sft_qwen25vl_7b.yaml
WORLD_SIZE > 1 wraps the model in DistributedDataParallel (NCCL) and each rank
takes every WORLD_SIZE-th sample of the stream (rank-strided sharding), so the
effective batch is batch_size x WORLD_SIZE; rank 0 saves and reports. Plain DDP keeps a
whole model, its gradients and AdamW states on every rank: 16 bytes per parameter with fp32
master weights (a 3B model fits one GPU), 8 with `dtype: bfloat16`. There is no FSDP/ZeRO
sharding: a model whose weights, gradients and AdamW states do not fit one GPU does not train. tests/training/test_cuda.py covers the single-GPU
path (run on an H200); DDP across GPUs is untested here.
"""

from __future__ import annotations

import itertools
import os
import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from .checkpoint import (
    checkpoint_id,
    finished_checkpoint,
    is_tiny_random_model,
    load_policy,
    model_fingerprint,
    save_checkpoint,
    shards_fingerprint,
)
from .compile import compile_blocks
from .config import SFTConfig
from .data import collate, encoded_stream, frame_gate, iter_reasoning_samples, shuffled, template_thought_gate
from .data_feed import Prefetcher
from .entry import entry_point
from .kernels import apply_liger, thin_checkpointing
from .loss import trained_positions_loss, weighted_token_loss
from .packing import attention_kernel, bins, pack, spatial_merge_size
from .pipes_report import Reporter, StdoutReporter
from .precision import adamw, forward_context, low_precision_warning, training_dtype
from .sample_cache import cached_encodings, read_entry

KIND = "sft"


def sft_checkpoint_id(cfg: SFTConfig) -> tuple[str, str]:
    """(checkpoint id, base model fingerprint): paths are replaced by what they hold."""
    base = model_fingerprint(cfg.resolved_model_path())
    ident = {**cfg.identity(), "model_path": base, "shards": None}
    return checkpoint_id(KIND, ident, shards_fingerprint(cfg.shards, cfg.split)), base


def _dist() -> tuple[int, int, int]:
    """(rank, world_size, local_rank) from torchrun's environment."""
    return (
        int(os.environ.get("RANK", 0)),
        int(os.environ.get("WORLD_SIZE", 1)),
        int(os.environ.get("LOCAL_RANK", 0)),
    )


def _encodings(cfg: SFTConfig, processor, skipped: dict[str, int], rank: int, world_size: int, epoch: int):
    """One pass's encoded samples, shuffled: from the cache (encoded once; training.sample_cache)
    when cfg.cache_dir is set, else encoded as they stream past."""
    if cfg.cache_dir:
        entry, _ = cached_encodings(cfg, processor, skipped, rank, world_size)
        return shuffled(read_entry(entry), cfg.shuffle_buffer, cfg.seed + epoch)
    samples = iter_reasoning_samples(cfg.shards, cfg.split, cfg.mode_filter, rank=rank, world_size=world_size)
    if cfg.max_samples is not None:
        samples = itertools.islice(samples, cfg.max_samples)
    return encoded_stream(
        shuffled(samples, cfg.shuffle_buffer, cfg.seed + epoch),
        processor,
        max_length=cfg.max_length,
        image_max_pixels=cfg.image_max_pixels,
        alpha_action=cfg.alpha_action,
        alpha_coord=cfg.alpha_coord,
        skip_bad=cfg.skip_bad_samples,
        skipped=skipped,
    )


def batches(
    cfg: SFTConfig, processor, pad_id: int, skipped: dict[str, int], rank: int = 0, world_size: int = 1
) -> Iterator[tuple[dict[str, torch.Tensor], int]]:
    """(batch, samples in it) forever: passes over the split, reshuffled per pass. A batch
    is batch_size padded rows, or with pack_tokens one packed row (training.packing) of at
    most that many tokens and at most batch_size samples."""
    merge = spatial_merge_size(processor)
    for epoch in itertools.count():
        stream = _encodings(cfg, processor, skipped, rank, world_size, epoch)
        if cfg.pack_tokens:
            groups = bins(stream, cfg.pack_tokens, cfg.batch_size)
        else:
            groups = iter(lambda: list(itertools.islice(stream, cfg.batch_size)), [])
        produced = False
        for chunk in groups:
            produced = True
            yield (pack(chunk, merge) if cfg.pack_tokens else collate(chunk, pad_id)), len(chunk)
        if not produced:
            raise ValueError(
                f"{cfg.shards}: no usable sample in split {cfg.split!r}"
                f" (mode {cfg.mode_filter}, skipped {skipped})"
            )


def batch_tokens(batch: dict[str, torch.Tensor]) -> int:
    """The real (not padding) tokens of a padded or packed batch."""
    mask = batch.get("attention_mask")
    return int(mask.sum()) if mask is not None else int(batch["input_ids"].numel())


def thought_gate(cfg: SFTConfig) -> dict[str, Any]:
    """training.data.template_thought_gate for this run: a full run is one whose model is
    not the tiny random-weights one (that one proves the plumbing: `make demo`, the tests,
    Dagster's tiny mode); it trains thoughts unless mode_filter is "direct"."""
    return template_thought_gate(
        cfg.shards,
        full_run=not is_tiny_random_model(cfg.resolved_model_path()),
        trains_thoughts=cfg.mode_filter != "direct",
        allow=cfg.allow_template_thoughts,
    )


def run_sft(cfg: SFTConfig, report: Reporter | None = None) -> dict[str, Any]:
    """Train (or find the finished checkpoint) and return its metrics: checkpoint_id,
    checkpoint_path, steps, loss_first, loss_last, losses, tokens, tokens_per_s, samples,
    wall_s (plus trained_tokens, skipped, the config, and reused: True when the finished
    checkpoint was found and returned without training)."""
    report = report or StdoutReporter()
    thought_gate(cfg)  # raises before anything is loaded
    cid, _ = sft_checkpoint_id(cfg)
    out = Path(cfg.out_dir) / cid
    done = finished_checkpoint(out)
    if done is not None:
        report.log(f"{cid}: finished checkpoint at {out}, not training again")
        return {**done, "reused": True}
    metrics, _, _ = train_sft(cfg, report)
    return metrics


def train_sft(cfg: SFTConfig, report: Reporter | None = None) -> tuple[dict[str, Any], Any, Any]:
    """Train and save (no check for a finished checkpoint): (metrics, model, processor),
    the model unwrapped from DDP and in eval mode."""
    report = report or StdoutReporter()
    thoughts = thought_gate(cfg)
    if thoughts["template_thoughts"] in ("allowed", "tiny model"):
        report.log(
            f"warning: training on template-written thoughts ({thoughts['template_share']:.0%} "
            f"of {cfg.shards}; {thoughts['template_thoughts']})"
        )
    frame = frame_gate(
        cfg.shards, cfg.image_max_pixels, full_run=not is_tiny_random_model(cfg.resolved_model_path())
    )
    if frame["frame"] != "kept":
        report.log(f"warning: the tiny model is fed images outside the answers' frame: {frame['detail']}")
    rank, world, local_rank = _dist()
    cid, base_id = sft_checkpoint_id(cfg)
    out = Path(cfg.out_dir) / cid
    random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    device = cfg.device
    if world > 1:
        torch.distributed.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
        if torch.cuda.is_available():
            torch.cuda.set_device(local_rank)
            device = f"cuda:{local_rank}"
    model_path = cfg.resolved_model_path()
    model, processor = load_policy(model_path, device, training_dtype(cfg.dtype), cfg.gradient_checkpointing)
    model.train()
    device = str(next(model.parameters()).device)
    on_cuda = device.startswith("cuda")
    model_dtype = next(model.parameters()).dtype
    if cfg.compile and on_cuda:
        report.log(f"{cid}: compiled {compile_blocks(model)} blocks")
    report.log(f"{cid}: {apply_liger(model, cfg.liger_kernels)}")
    if cfg.checkpoint_every > 1:
        kept, layers = thin_checkpointing(model, cfg.checkpoint_every)
        report.log(f"{cid}: activation checkpointing on {kept} of {layers} text layers")
    if cfg.pack_tokens:
        report.log(f"{cid}: packing {cfg.pack_tokens} tokens a row; attention {attention_kernel(model)}")
    warning = None if cfg.master_weights else low_precision_warning(model, cfg.lr)
    if warning:
        report.log(f"{cid}: warning: {warning}")
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local_rank] if on_cuda else None)
    head_only = cfg.trained_logits_only and world == 1  # DDP needs its wrapper's forward
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = adamw(params, cfg, device, master_weights=cfg.master_weights)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / cfg.warmup_steps) if cfg.warmup_steps else 1.0
    )
    pad_id = processor.tokenizer.pad_token_id or 0
    skipped: dict[str, int] = {}
    stream = Prefetcher(batches(cfg, processor, pad_id, skipped, rank, world), cfg.prefetch_batches)
    report.log(
        f"{cid}: SFT of {model_path} on {cfg.shards}/{cfg.split}, {cfg.max_steps} steps, "
        f"batch {cfg.batch_size} x {world}, device {device}, dtype {model_dtype}"
    )

    losses: list[float] = []
    tokens = trained = samples = 0
    data_wait = 0.0  # seconds the step loop waited for its next batch (the GPU idles meanwhile)
    t0 = time.perf_counter()
    for step in range(1, cfg.max_steps + 1):
        t_wait = time.perf_counter()
        batch, n = next(stream)
        data_wait += time.perf_counter() - t_wait
        labels, weights = batch.pop("labels").to(device), batch.pop("weights").to(device)
        batch = {k: v.to(device) for k, v in batch.items()}
        if "pixel_values" in batch:
            batch["pixel_values"] = batch["pixel_values"].to(model_dtype)
        if head_only:
            with forward_context(model, cfg.mixed_precision):
                loss, stats = trained_positions_loss(model, batch, labels, weights)
        else:
            with forward_context(model, cfg.mixed_precision):
                logits = model(**batch, use_cache=False).logits
            loss, stats = weighted_token_loss(logits, labels, weights)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(stats["loss"])
        tokens += batch_tokens(batch)
        trained += stats["tokens"]
        samples += n
        if step % cfg.log_every == 0 or step == cfg.max_steps:
            report.metric(
                step,
                loss=stats["loss"],
                nll=stats["nll"],
                grad_norm=float(grad_norm),
                lr=scheduler.get_last_lr()[0],
            )
    wall = time.perf_counter() - t0
    stream.close()

    metrics = {
        "kind": KIND,
        "checkpoint_id": cid,
        "checkpoint_path": str(out),
        "base_model": str(model_path),
        "base_model_id": base_id,
        "steps": cfg.max_steps,
        "loss_first": losses[0],
        "loss_last": losses[-1],
        "losses": losses,
        "tokens": tokens * world,
        "trained_tokens": trained * world,
        "tokens_per_s": tokens * world / wall if wall > 0 else 0.0,
        "samples": samples * world,
        "wall_s": wall,
        "data_wait_s": data_wait,
        "data_wait_share": data_wait / wall if wall > 0 else 0.0,
        "skipped": dict(skipped),
        "world_size": world,
        "device": device,
        **thoughts,
        "model_profile": frame["model_profile"],
        "frame": frame["frame"],
        "data": {
            "shards": str(cfg.shards),
            "split": cfg.split,
            "fingerprint": shards_fingerprint(cfg.shards, cfg.split),
        },
        "config": cfg.model_dump(mode="json"),
    }
    model = getattr(model, "module", model).eval()
    if rank == 0:
        save_checkpoint(model, processor, out, metrics)
        report.log(f"{cid}: saved {out} (loss {losses[0]:.4f} -> {losses[-1]:.4f})")
    if world > 1:
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()
    return {**metrics, "reused": False}, model, processor


def main(argv: list[str] | None = None) -> dict[str, Any]:
    return entry_point(
        argv,
        prog="python -m training.sft",
        doc=__doc__,
        config_cls=SFTConfig,
        run=run_sft,
        reports_final=lambda: _dist()[0] == 0,
    )


if __name__ == "__main__":
    main()
