"""SFT with TRL's own SFTTrainer and the action-aware weighted loss.

    python -m training.engines.trl_sft --config OUT/trl_sft.yaml
    python -m accelerate.commands.launch --config_file OUT/accelerate.yaml \\
        -m training.engines.trl_sft --config OUT/trl_sft.yaml          # FSDP2 / ZeRO-3, nodes

`trajforge train sft --engine trl` writes both files (training.engines.trl). The data is
the TRL conversion of a reasoning set (trajforge.convert, format trl: `messages`,
`images`, `spans`). Each batch is encoded by `SpanWeightCollator` with the builtin's
own encoder (training.data.encode_sample: the chat template, the prompt labelled -100,
one weight per answer token from its character span: reasoning 1, action alpha_action,
coordinates alpha_coord), so both engines train on the same tokens and weights.
With `pack_tokens` each micro-batch is one padding-free row (training.packing: per-sample
positions, attention kept inside each sample); `data_workers` runs the collator in
dataloader worker processes, off the GPU's path (a worker's skipped rows are not counted).
`WeightedSFTTrainer.compute_loss` keeps TRL's fused LM head (per-token log-probabilities
without the [B, T, V] logits) and reduces them with training.loss.weighted_nll: the
loss of training.loss.weighted_token_loss, per micro-batch (tests/training/
test_trl_sft.py checks the two agree). Gradient accumulation averages the micro-batch
losses; data parallel ranks average theirs.

The checkpoint lands in <out_dir>/<checkpoint_id> (the id hashes the config, the set's
manifest, the base model and the engine), `metrics.json` last; a re-run finds it and
does not train again. Loss, tokens/s and the path go back through Dagster Pipes when
Dagster launched the run (training.pipes_report), else as a TRAJFORGE_METRICS line.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import torch
from transformers import TrainerCallback
from trl import SFTTrainer

from schemas.errors import SchemaError
from training.checkpoint import (
    METRICS,
    checkpoint_id,
    finished_checkpoint,
    is_tiny_random_model,
    model_fingerprint,
    shards_fingerprint,
)
from training.config import TrlSFTConfig
from training.data import IMAGE_MARKER, collate, encode_sample, frame_gate
from training.entry import entry_point
from training.loss import weighted_nll
from training.packing import pack, spatial_merge_size
from training.pipes_report import Reporter, StdoutReporter
from training.sft import thought_gate

KIND = "sft"
ENGINE = "trl"


def trl_checkpoint_id(cfg: TrlSFTConfig) -> tuple[str, str]:
    """(checkpoint id, base model fingerprint), apart from the builtin loop's ids."""
    base = model_fingerprint(cfg.resolved_model_path())
    ident = {**cfg.identity(), "model_path": base, "shards": None, "engine": ENGINE}
    return checkpoint_id(KIND, ident, shards_fingerprint(cfg.shards, cfg.split)), base


def _text(message: dict) -> str:
    return "".join(part.get("text") or "" for part in message["content"] if part.get("type") == "text")


def row_sample(row: dict) -> tuple[dict, bytes | None]:
    """A TRL row (messages, images, spans) as the set's sample JSON and its image bytes:
    what training.data.encode_sample takes."""
    roles = {"system": "system", "user": "human", "assistant": "gpt"}
    conversations = []
    for i, message in enumerate(row["messages"]):
        if message["role"] not in roles:
            raise SchemaError(f"unexpected role {message['role']!r}", field=f"messages[{i}].role")
        value = _text(message)
        if message["role"] == "user":
            value = f"{IMAGE_MARKER}\n{value}"
        conversations.append({"from": roles[message["role"]], "value": value})
    if not row.get("spans"):
        raise SchemaError("empty (the answer's action and coordinate spans)", field="spans")
    try:
        spans = json.loads(row["spans"])
    except json.JSONDecodeError as exc:
        raise SchemaError(f"not JSON ({exc})", field="spans") from None
    images = row.get("images") or []
    image = images[0].get("bytes") if images and isinstance(images[0], dict) else None
    return {"conversations": conversations, "spans": spans}, image


class SpanWeightCollator:
    """TRL rows -> a batch with `weights` beside `labels` (training.data.encode_sample per
    row, training.data.collate). A bad row raises SchemaError naming the file, the row id
    and the field; with `skip_bad` it is dropped and counted in `skipped` by field."""

    def __init__(self, processor, cfg: TrlSFTConfig, source: str):
        self.processor, self.cfg, self.source = processor, cfg, source
        self.pad_id = processor.tokenizer.pad_token_id or 0
        self.merge = spatial_merge_size(processor)
        self.skipped: dict[str, int] = {}

    def __call__(self, rows: list[dict]) -> dict[str, torch.Tensor]:
        encodings = []
        for row in rows:
            try:
                sample, image = row_sample(row)
                encodings.append(
                    encode_sample(
                        self.processor,
                        sample,
                        image,
                        self.cfg.max_length,
                        self.cfg.image_max_pixels,
                        alpha_action=self.cfg.alpha_action,
                        alpha_coord=self.cfg.alpha_coord,
                    )
                )
            except SchemaError as exc:
                if not self.cfg.skip_bad_samples:
                    raise exc.located(source=self.source, record=row.get("id")) from None
                self.skipped[exc.field or "sample"] = self.skipped.get(exc.field or "sample", 0) + 1
        if not encodings:
            raise ValueError(
                f"{self.source}: no usable row in a batch of {len(rows)} (skipped {self.skipped})"
            )
        if not self.cfg.pack_tokens:
            return collate(encodings, self.pad_id)
        length = sum(int(e["input_ids"].shape[0]) for e in encodings)
        if length > self.cfg.pack_tokens:
            raise ValueError(
                f"{self.source}: a micro-batch of {len(encodings)} rows is {length} tokens, over "
                f"pack_tokens={self.cfg.pack_tokens} (raise pack_tokens or lower batch_size)"
            )
        return pack(encodings, self.merge)


class WeightedSFTTrainer(SFTTrainer):
    """TRL's SFTTrainer whose loss weighs each token by the batch's `weights`."""

    # The loss is a mean per micro-batch: Trainer divides it by the accumulation steps.
    loss_is_scaled_for_ga = False

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.trained_tokens = 0  # answer tokens (labels != -100), all ranks
        self.data_wait_s = 0.0  # seconds the training loop waited for its batches

    def get_batch_samples(self, *args, **kwargs):
        t0 = time.perf_counter()
        try:
            return super().get_batch_samples(*args, **kwargs)
        finally:
            self.data_wait_s += time.perf_counter() - t0

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        weights = inputs.pop("weights")
        outputs = model(**inputs, use_cache=False, fused_lm_head=True)
        # log_probs[:, t] scores labels[:, t + 1] (zero where that label is -100)
        loss, _ = weighted_nll(-outputs.log_probs, inputs["labels"][:, 1:], weights[:, 1:])
        mode = "train" if model.training else "eval"
        gather = self.accelerator.gather_for_metrics
        valid = gather(outputs.label_mask.sum()).sum()
        correct = gather(outputs.is_top1.sum()).sum()
        self._metrics[mode]["mean_token_accuracy"].append(float(correct / valid.clamp(min=1)))
        if mode == "train":
            real = (
                inputs["attention_mask"].sum()
                if "attention_mask" in inputs
                else inputs["labels"].new_tensor(inputs["input_ids"].numel())
            )
            self._total_train_tokens += int(gather(real).sum())
            self.trained_tokens += int(valid)
        self._metrics[mode]["num_tokens"] = [self._total_train_tokens]
        return (loss, outputs) if return_outputs else loss


class _StepReport(TrainerCallback):
    """Each logged optimiser step's loss to the reporter (and kept for the metrics)."""

    def __init__(self, report: Reporter):
        self.report, self.losses = report, []

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "loss" in logs and state.is_world_process_zero:
            self.losses.append(float(logs["loss"]))
            extra = {k: float(logs[k]) for k in ("grad_norm", "learning_rate") if k in logs}
            self.report.metric(state.global_step, loss=float(logs["loss"]), **extra)


def load_rows(cfg: TrlSFTConfig):
    """The split's rows of the TRL conversion (images as bytes), mode-filtered and capped."""
    import datasets

    path = Path(cfg.data_dir) / "data" / f"{cfg.split}.parquet"
    if not path.is_file():
        raise SchemaError(f"no split {cfg.split!r} in the TRL conversion", source=str(path), field="split")
    rows = datasets.load_dataset("parquet", data_files={cfg.split: str(path)}, split=cfg.split)
    rows = rows.cast_column("images", datasets.List(datasets.Image(decode=False)))
    if cfg.mode_filter is not None:
        rows = rows.filter(
            lambda meta: json.loads(meta).get("mode") == cfg.mode_filter, input_columns=["meta"]
        )
    if cfg.max_samples is not None:
        rows = rows.select(range(min(cfg.max_samples, len(rows))))
    if len(rows) == 0:
        raise SchemaError(f"no row in split {cfg.split!r} (mode {cfg.mode_filter})", source=str(path))
    return rows, str(path)


def trainer_args(cfg: TrlSFTConfig, output_dir: Path):
    """trl.SFTConfig for this run: fp32 master weights, bf16 autocast on cuda (as the
    builtin loop), constant learning rate after a linear warmup, every step logged."""
    import trl

    cpu = cfg.device == "cpu" or not torch.cuda.is_available()
    fields = dict(
        output_dir=str(output_dir),
        max_steps=cfg.max_steps,
        per_device_train_batch_size=cfg.batch_size,
        gradient_accumulation_steps=cfg.gradient_accumulation_steps,
        learning_rate=cfg.lr,
        weight_decay=cfg.weight_decay,
        max_grad_norm=cfg.max_grad_norm,
        warmup_steps=cfg.warmup_steps,
        lr_scheduler_type="constant_with_warmup",
        logging_steps=1,
        seed=cfg.seed,
        report_to=[],
        save_strategy="no",
        use_cpu=cpu,
        bf16=not cpu and cfg.mixed_precision,
        gradient_checkpointing=bool(
            cfg.gradient_checkpointing if cfg.gradient_checkpointing is not None else not cpu
        ),
        remove_unused_columns=False,  # the collator needs `spans` and `id`
        dataloader_num_workers=cfg.data_workers,  # workers run the collator (encode_sample)
        max_length=None,  # the collator refuses over-long rows (encode_sample)
        model_init_kwargs={"dtype": "bfloat16" if cfg.dtype == "bfloat16" else "float32"},
        **cfg.trainer,
    )
    try:
        return trl.SFTConfig(**fields)
    except TypeError as exc:
        raise SchemaError(f"not a trl.SFTConfig field: {exc}", field="trainer") from None


def build_trainer(cfg: TrlSFTConfig, output_dir: Path, report: Reporter | None = None):
    """(trainer, collator, step reporter), the model loaded by TRL from cfg.model_path."""
    from trajforge.vlm.transformers_backend import load_processor

    model_path = cfg.resolved_model_path()
    rows, source = load_rows(cfg)
    processor = load_processor(model_path)
    collator = SpanWeightCollator(processor, cfg, source)
    steps = _StepReport(report or StdoutReporter())
    trainer = WeightedSFTTrainer(
        model=str(model_path),
        args=trainer_args(cfg, output_dir),
        data_collator=collator,
        train_dataset=rows,
        processing_class=processor,
        callbacks=[steps],
    )
    return trainer, collator, steps


def save(trainer, out: Path, metrics: dict[str, Any]) -> None:
    """The model (gathered from FSDP / ZeRO-3 shards by TRL's save_model on every rank)
    and the processor to a sibling folder, metrics.json last, renamed into place by rank 0."""
    partial = out.parent / f".{out.name}.partial"
    if trainer.is_world_process_zero() and partial.exists():
        shutil.rmtree(partial)
    trainer.accelerator.wait_for_everyone()
    trainer.save_model(str(partial))
    if trainer.is_world_process_zero():
        trainer.processing_class.save_pretrained(partial)
        (partial / METRICS).write_text(json.dumps(metrics, indent=1, sort_keys=True, default=str))
        if out.exists():
            shutil.rmtree(out)
        os.replace(partial, out)
    trainer.accelerator.wait_for_everyone()


def run_trl_sft(cfg: TrlSFTConfig, report: Reporter | None = None) -> dict[str, Any]:
    """Train (or find the finished checkpoint) and return its metrics: checkpoint_id,
    checkpoint_path, steps, loss_first, loss_last, losses, tokens, tokens_per_s, wall_s
    (the builtin loop's keys, plus engine: trl)."""
    report = report or StdoutReporter()
    thoughts = thought_gate(cfg)  # raises before anything is loaded
    cid, base_id = trl_checkpoint_id(cfg)
    out = Path(cfg.out_dir) / cid
    done = finished_checkpoint(out)
    if done is not None:
        report.log(f"{cid}: finished checkpoint at {out}, not training again")
        return {**done, "reused": True}
    model_path = cfg.resolved_model_path()
    frame = frame_gate(cfg.shards, cfg.image_max_pixels, full_run=not is_tiny_random_model(model_path))
    scratch = Path(cfg.out_dir) / f".{cid}.trainer"
    trainer, collator, steps = build_trainer(cfg, scratch, report)
    world = trainer.accelerator.num_processes
    report.log(
        f"{cid}: TRL SFT of {model_path} on {cfg.data_dir}/{cfg.split}, {cfg.max_steps} steps, "
        f"batch {cfg.batch_size} x {cfg.gradient_accumulation_steps} x {world}, "
        f"device {trainer.args.device}, {trainer.accelerator.distributed_type.value}"
    )
    t0 = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - t0
    losses = steps.losses
    metrics = {
        "kind": KIND,
        "engine": ENGINE,
        "checkpoint_id": cid,
        "checkpoint_path": str(out),
        "base_model": str(model_path),
        "base_model_id": base_id,
        "steps": trainer.state.global_step,
        "loss_first": losses[0] if losses else None,
        "loss_last": losses[-1] if losses else None,
        "losses": losses,
        "tokens": trainer._total_train_tokens,
        "trained_tokens": trainer.trained_tokens,
        "tokens_per_s": trainer._total_train_tokens / wall if wall > 0 else 0.0,
        "samples": trainer.state.global_step * cfg.batch_size * cfg.gradient_accumulation_steps * world,
        "wall_s": wall,
        "data_wait_s": trainer.data_wait_s,
        "data_wait_share": trainer.data_wait_s / wall if wall > 0 else 0.0,
        "skipped": dict(collator.skipped),
        "world_size": world,
        "device": str(trainer.args.device),
        "distributed": trainer.accelerator.distributed_type.value,
        **thoughts,
        "model_profile": frame["model_profile"],
        "frame": frame["frame"],
        "data": {
            "shards": str(cfg.shards),
            "converted": str(cfg.data_dir),
            "split": cfg.split,
            "fingerprint": shards_fingerprint(cfg.shards, cfg.split),
        },
        "config": cfg.model_dump(mode="json"),
    }
    save(trainer, out, metrics)
    if trainer.is_world_process_zero():
        shutil.rmtree(scratch, ignore_errors=True)
        report.log(f"{cid}: saved {out} (loss {metrics['loss_first']} -> {metrics['loss_last']})")
    return {**metrics, "reused": False}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    return entry_point(
        argv,
        prog="python -m training.engines.trl_sft",
        doc=__doc__,
        config_cls=TrlSFTConfig,
        run=run_trl_sft,
        reports_final=lambda: int(os.environ.get("RANK", 0)) == 0,
    )


if __name__ == "__main__":
    main()
