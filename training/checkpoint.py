"""Checkpoints: ids that are provenance, atomic writes, idempotent re-runs, loading.

A checkpoint id ("sft-3f9a0c1d2e4b") is a hash of what was trained: the kind,
the config fields that matter, the data's fingerprint and the base model's.
Rollouts recorded by a trained policy carry it (source_name "agent:<id>"), and
a re-run with the same inputs finds the finished directory and returns it
instead of training again. A checkpoint is written to a temporary sibling and
renamed, `metrics.json` last inside it, so a half-written one is never found.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

METRICS = "metrics.json"


def checkpoint_id(kind: str, config_dict: dict[str, Any], data_fingerprint: str) -> str:
    """`<kind>-<12 hex>`: deterministic in the kind, the config and the data."""
    blob = json.dumps(
        {"kind": kind, "config": config_dict, "data": data_fingerprint},
        sort_keys=True,
        default=str,
        ensure_ascii=False,
    )
    return f"{kind}-{hashlib.sha256(blob.encode()).hexdigest()[:12]}"


def shards_fingerprint(shards_dir: str | Path, split: str | None = None) -> str:
    """The reasoning set's identity: its manifest lists every shard's sha256, so the
    manifest's hash changes whenever a byte of the data does."""
    from trajforge.publish.shards import MANIFEST

    digest = hashlib.sha256((Path(shards_dir) / MANIFEST).read_bytes())
    if split is not None:
        digest.update(split.encode())
    return digest.hexdigest()[:16]


def model_fingerprint(model_path: str | Path) -> str:
    """A cheap identity of a model directory: config.json and the names and sizes of its
    weight files (hashing 15 GB of weights per run would cost minutes). A trained
    checkpoint's metrics.json holds its own id, which is used when present."""
    p = Path(model_path)
    metrics = p / METRICS
    if metrics.is_file():
        cid = json.loads(metrics.read_text()).get("checkpoint_id")
        if cid:
            return cid
    digest = hashlib.sha256()
    for name in ("config.json", "tiny_vlm.json"):
        if (p / name).is_file():
            digest.update((p / name).read_bytes())
    for w in sorted(p.glob("*.safetensors")) + sorted(p.glob("*.bin")):
        digest.update(f"{w.name}:{w.stat().st_size}".encode())
    return digest.hexdigest()[:16]


def is_tiny_random_model(model_path: str | Path, _depth: int = 0) -> bool:
    """True for the offline tiny Qwen2-VL with random weights (trajforge.vlm.tiny: its
    marker file says random_weights) and for checkpoints trained from it (their
    metrics.json names the base model, followed back to the start)."""
    p = Path(model_path)
    marker = p / "tiny_vlm.json"
    if marker.is_file():
        try:
            return bool(json.loads(marker.read_text()).get("random_weights"))
        except (OSError, ValueError):
            return False
    metrics = p / METRICS
    if _depth < 16 and metrics.is_file():
        try:
            base = json.loads(metrics.read_text()).get("base_model")
        except (OSError, ValueError):
            return False
        return bool(base) and Path(base) != p and is_tiny_random_model(base, _depth + 1)
    return False


def finished_checkpoint(path: str | Path) -> dict[str, Any] | None:
    """The metrics of a finished checkpoint directory, or None (absent or half-written)."""
    metrics = Path(path) / METRICS
    if not metrics.is_file():
        return None
    return json.loads(metrics.read_text(encoding="utf-8"))


def save_checkpoint(model, processor, out_dir: str | Path, metrics: dict[str, Any]) -> Path:
    """Write model + processor + metrics.json to `out_dir` atomically and return it.

    `metrics` must hold kind, checkpoint_id, base_model and steps. A DDP-wrapped model
    is unwrapped. An existing finished directory is replaced only by a finished one.
    """
    missing = [k for k in ("kind", "checkpoint_id", "base_model", "steps") if k not in metrics]
    if missing:
        raise ValueError(f"save_checkpoint: metrics lack {missing}")
    out = Path(out_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    model = getattr(model, "module", model)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        model.save_pretrained(tmp)
        processor.save_pretrained(tmp)
        (tmp / METRICS).write_text(json.dumps(metrics, indent=1, sort_keys=True, default=str))
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def load_policy(
    path: str | Path, device: str = "auto", dtype: str = "auto", gradient_checkpointing: bool | None = None
):
    """(model, processor) from a local directory through transformers' Auto classes.

    Qwen2-VL / Qwen2.5-VL / Qwen3-VL load as AutoModelForImageTextToText (older
    transformers: AutoModelForVision2Seq). bf16 on cuda and fp32 on cpu by default;
    gradient checkpointing on for cuda unless told otherwise (active in train mode only).
    The model is on `device`, in eval mode.
    """
    import transformers

    from trajforge.vlm.transformers_backend import load_processor, resolve_device, resolve_dtype

    device = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, device)
    autos = [
        getattr(transformers, n)
        for n in ("AutoModelForImageTextToText", "AutoModelForVision2Seq")
        if hasattr(transformers, n)
    ]
    for i, auto in enumerate(autos):
        try:
            model = auto.from_pretrained(path, dtype=torch_dtype)
            break
        except ValueError:  # an architecture this Auto class does not map: try the next
            if i == len(autos) - 1:
                raise
    processor = load_processor(path)
    if gradient_checkpointing is None:
        gradient_checkpointing = device.startswith("cuda")
    if gradient_checkpointing:
        kwargs = {"use_reentrant": False}  # works with inputs that need no grad
        if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5 name
            model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
        else:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
        # config.use_cache stays as it is: checkpointing acts only in train mode (forward
        # passes there should say use_cache=False), and generation in eval mode (RL
        # rollouts) keeps its KV cache.
    return model.to(device).eval(), processor


def checkpoint_id_of(path: str | Path) -> str:
    """A checkpoint directory's id (its metrics.json), else the model's id
    (directory name and config hash: an untrained base model)."""
    from trajforge.vlm.transformers_backend import model_id_for

    metrics = finished_checkpoint(path)
    if metrics and metrics.get("checkpoint_id"):
        return str(metrics["checkpoint_id"])
    return model_id_for(path)
