"""Encoded samples cached once per set x model profile x processor: data off the GPU's path.

Encoding a sample (training.data.encode_sample: chat template, image decode and resize,
patchify, tokenise, span weights) costs tens of milliseconds of CPU per screenshot; in
the training loop the GPU waits for it. `cached_encodings` encodes the split once and
keeps the results (input_ids, labels, weights, pixel_values, image_grid_thw, ...) as
torch files under <cache_dir>/<key>/, then every pass reads them back. The key hashes
what decides the bytes: the set's manifest and split (shards_fingerprint), the model
profile the manifest names, the processor (image processor settings, tokenizer, chat
template) and the encoding options (max_length, image_max_pixels, alphas, mode filter,
sample cap, DDP rank and world size); change any and a new entry is written.

An entry is written to a sibling folder and renamed into place when complete, so a
crashed run leaves no half entry. A bad sample raises (or, with skip_bad, is skipped and
counted) while the entry is built, as in the uncached stream.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from training.data import encoded_stream, iter_reasoning_samples
from trajforge.publish.shards import read_manifest

CHUNK = 64  # samples per file: a few hundred MB at most for 3B-sized screenshots
DONE = "entry.json"


def processor_fingerprint(processor) -> str:
    """sha256 (16 hex) of what the processor does to a sample: its image processor's
    settings, its tokenizer's vocabulary and rules, its chat template."""
    digest = hashlib.sha256()
    image_processor = getattr(processor, "image_processor", None)
    if image_processor is not None:
        digest.update(image_processor.to_json_string().encode())
    tokenizer = getattr(processor, "tokenizer", processor)
    backend = getattr(tokenizer, "backend_tokenizer", None) or getattr(tokenizer, "_tokenizer", None)
    digest.update(backend.to_str().encode() if backend is not None else repr(tokenizer.get_vocab()).encode())
    digest.update(str(getattr(processor, "chat_template", None) or "").encode())
    return digest.hexdigest()[:16]


def cache_key(cfg, processor, rank: int = 0, world_size: int = 1) -> str:
    """The entry's name for this config's data under this processor (see the module doc)."""
    from training.checkpoint import shards_fingerprint

    manifest = read_manifest(cfg.shards)
    ident: dict[str, Any] = {
        "set": shards_fingerprint(cfg.shards, cfg.split),
        "model_profile": manifest.get("model_profile"),
        "processor": processor_fingerprint(processor),
        "encoding": {
            k: getattr(cfg, k)
            for k in (
                "max_length",
                "image_max_pixels",
                "alpha_action",
                "alpha_coord",
                "mode_filter",
                "max_samples",
            )
        },
        "shard_of": [rank, world_size],
    }
    return hashlib.sha256(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()[:20]


def _build(cfg, processor, entry: Path, rank: int, world_size: int, skipped: dict[str, int]) -> None:
    partial = entry.parent / f".{entry.name}.{os.getpid()}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    samples = iter_reasoning_samples(cfg.shards, cfg.split, cfg.mode_filter, rank=rank, world_size=world_size)
    if cfg.max_samples is not None:
        samples = itertools.islice(samples, cfg.max_samples)
    stream = encoded_stream(
        samples,
        processor,
        max_length=cfg.max_length,
        image_max_pixels=cfg.image_max_pixels,
        alpha_action=cfg.alpha_action,
        alpha_coord=cfg.alpha_coord,
        skip_bad=cfg.skip_bad_samples,
        skipped=skipped,
    )
    n = files = 0
    while chunk := list(itertools.islice(stream, CHUNK)):
        torch.save(chunk, partial / f"{files:05d}.pt")
        n, files = n + len(chunk), files + 1
    (partial / DONE).write_text(json.dumps({"samples": n, "files": files, "skipped": skipped}))
    if entry.exists():  # another rank or run finished the same entry first
        shutil.rmtree(partial)
        return
    os.replace(partial, entry)


def cached_encodings(
    cfg, processor, skipped: dict[str, int], rank: int = 0, world_size: int = 1
) -> tuple[Path, bool]:
    """(entry folder, built now): the entry for cfg's data, encoded now when missing."""
    entry = Path(cfg.cache_dir) / cache_key(cfg, processor, rank, world_size)
    if (entry / DONE).is_file():
        skipped.update(json.loads((entry / DONE).read_text())["skipped"])
        return entry, False
    _build(cfg, processor, entry, rank, world_size, skipped)
    return entry, True


def read_entry(entry: Path) -> Iterator[dict[str, torch.Tensor]]:
    """The encoded samples of an entry, in the set's stream order, one file at a time."""
    info = json.loads((entry / DONE).read_text())
    for i in range(info["files"]):
        yield from torch.load(entry / f"{i:05d}.pt", weights_only=True)
