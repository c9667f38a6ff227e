"""Training configurations, loaded from YAML or JSON.

One pydantic model per entry point (SFT, RL; the online RL and evaluation
configs build on `TrainConfig` too). Unknown keys are errors, so a typo in a
config file fails at load time with the file and the field named, not after an
hour on a GPU. `model_path: tiny` means the offline tiny Qwen2-VL
(trajforge.vlm.tiny), built on first use: the CPU/CI mode.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from schemas.errors import SchemaError

TINY = "tiny"

# Fields that say where or how verbosely to run, not what is trained: left out of the
# checkpoint id so that moving a run to another folder or GPU finds the same checkpoint.
# allow_template_thoughts only gates the run (it changes nothing in what is trained);
# data_dir is a converted copy of `shards`, which identifies the data.
NON_IDENTITY_FIELDS = frozenset(
    {
        "out_dir",
        "device",
        "log_every",
        "skip_bad_samples",
        "compile",
        "allow_template_thoughts",
        "data_dir",
        "cache_dir",
        "prefetch_batches",
        "data_workers",
        "liger_kernels",
        "checkpoint_every",
        "trained_logits_only",
    }
)


# Fields added after checkpoints were named: counted only when set, so an older config's
# checkpoint id does not change.
IDENTITY_IF_SET = {"pack_tokens": None, "master_weights": False}


class ConfigError(SchemaError):
    """A config file that cannot be used (names the file and the field)."""


class TrainConfig(BaseModel):
    """Fields every training entry point shares."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    model_path: str
    out_dir: str = "data/checkpoints"
    device: str = "auto"  # auto = cuda when available
    # Training: auto = fp32 master weights (training.precision says why); bfloat16 trains
    # 16-bit weights in place (less memory, updates below its precision are lost).
    dtype: str = "auto"
    mixed_precision: bool = True  # forward passes under bf16 autocast on cuda
    compile: bool = False  # SFT on cuda: torch.compile each transformer block (training.compile)
    seed: int = 0
    max_steps: int = 100
    lr: float = 1e-5
    batch_size: int = 1
    max_length: int = 2048
    gradient_checkpointing: bool | None = None  # None = on for cuda, off on cpu
    image_max_pixels: int | None = None  # cap on the pixels of an image fed to the processor
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    warmup_steps: int = 0
    log_every: int = 1
    # A bad sample (no spans, span outside the text, no image) raises by default;
    # True skips it and counts it under metrics["skipped"].
    skip_bad_samples: bool = False

    @field_validator("max_steps", "batch_size", "max_length", "log_every")
    @classmethod
    def _positive(cls, v: int) -> int:
        if v < 1:
            raise ValueError("must be >= 1")
        return v

    @field_validator("lr")
    @classmethod
    def _lr_positive(cls, v: float) -> float:
        if v <= 0:
            raise ValueError("must be > 0")
        return v

    @field_validator("dtype")
    @classmethod
    def _dtype_known(cls, v: str) -> str:
        if v not in ("auto", "float32", "bfloat16", "float16"):
            raise ValueError("must be auto, float32, bfloat16 or float16")
        return v

    def resolved_model_path(self) -> Path:
        """The model directory (`tiny` builds the offline tiny model on first use)."""
        return resolve_model_path(self.model_path)

    def identity(self) -> dict[str, Any]:
        """The fields that decide what gets trained (for the checkpoint id)."""
        return {
            k: v
            for k, v in self.model_dump(mode="json").items()
            if k not in NON_IDENTITY_FIELDS and not (k in IDENTITY_IF_SET and v == IDENTITY_IF_SET[k])
        }


class SFTConfig(TrainConfig):
    """Supervised fine-tuning on a reasoning set (issue 7, part 1)."""

    shards: str  # a reasoning-set folder with manifest.json
    split: str = "train"
    alpha_action: float = 2.0
    alpha_coord: float = 4.0
    max_samples: int | None = None  # per pass over the split
    mode_filter: Literal["direct", "reason"] | None = None
    shuffle_buffer: int = 0  # 0 = stream order (deterministic either way: seeded)
    # A full run (any model but the tiny random-weights one) that trains on reason-then-act
    # samples refuses a set with template-written thoughts (training.data.template_thought_gate)
    # unless this says so: templates teach a fixed phrasing, not reasoning.
    allow_template_thoughts: bool = False
    # Padding-free packing (training.packing): a step's samples in one row of at most this
    # many tokens (batch_size then caps the samples per row); None = padded batches.
    pack_tokens: int | None = None
    # Encoded samples cached here once per set x profile x processor (training.sample_cache)
    cache_dir: str | None = None
    prefetch_batches: int = 0  # builtin loop: batches prepared ahead in a background thread
    data_workers: int = 0  # TRL engine: dataloader worker processes that run the collator
    # bf16 weights with fp32 master copies in the optimiser (dtype: bfloat16 only)
    master_weights: bool = False
    liger_kernels: bool = True  # RMSNorm/RoPE/SwiGLU kernels when liger-kernel is installed
    # with gradient_checkpointing: checkpoint every n-th text layer only (training.kernels)
    checkpoint_every: int = 1
    # builtin loop: LM-head logits at the trained positions only (training.loss.trained_positions_loss)
    trained_logits_only: bool = False

    @field_validator("checkpoint_every")
    @classmethod
    def _every_positive(cls, v: int) -> int:
        if v < 1:
            raise ValueError("must be >= 1")
        return v

    @field_validator("pack_tokens")
    @classmethod
    def _budget_positive(cls, v: int | None) -> int | None:
        if v is not None and v < 1:
            raise ValueError("must be >= 1 (or null for padded batches)")
        return v

    @field_validator("alpha_action", "alpha_coord")
    @classmethod
    def _alpha_positive(cls, v: float) -> float:
        if v <= 0:
            raise ValueError("must be > 0")
        return v


class TrlSFTConfig(SFTConfig):
    """SFT through TRL's SFTTrainer (training.engines.trl_sft): the SFT fields, read from the TRL
    conversion of the set (`data_dir`, trajforge.convert format trl) with the same
    span weights; `shards` stays the set itself (its manifest is the data's identity and
    feeds the thought and frame gates)."""

    data_dir: str  # the TRL conversion: manifest.json and data/<split>.parquet
    gradient_accumulation_steps: int = 1
    # more trl.SFTConfig fields (e.g. {"optim": "adamw_torch_fused", "lr_scheduler_type": "cosine"})
    trainer: dict[str, Any] = {}

    @field_validator("gradient_accumulation_steps")
    @classmethod
    def _accumulation(cls, v: int) -> int:
        if v < 1:
            raise ValueError("must be >= 1")
        return v


class PPOReuse(TrainConfig):
    """PPO-style reuse of each batch of rollouts: `ppo_epochs` passes over its rows (or
    answer sequences), each pass in shuffled minibatches of `minibatch_size` (None = all:
    one optimiser step per pass). ppo_epochs 1 with minibatch_size None is one on-policy
    step (the ratio is 1, the clip idle); more steps per batch make the ratio move and the
    clip act. Left at those defaults they are out of the checkpoint id."""

    ppo_epochs: int = 1
    minibatch_size: int | None = None

    @field_validator("ppo_epochs")
    @classmethod
    def _epochs(cls, v: int) -> int:
        if v < 1:
            raise ValueError("must be >= 1")
        return v

    @field_validator("minibatch_size")
    @classmethod
    def _minibatch(cls, v: int | None) -> int | None:
        if v is not None and v < 1:
            raise ValueError("must be >= 1 (or null: all rows of the batch)")
        return v

    def identity(self) -> dict[str, Any]:
        ident = super().identity()
        return {k: v for k, v in ident.items() if not (k in PPO_DEFAULTS and v == PPO_DEFAULTS[k])}


PPO_DEFAULTS = {"ppo_epochs": 1, "minibatch_size": None}


class RLConfig(PPOReuse):
    """Offline step-level GRPO on a reasoning set (issue 7, part 2)."""

    ref_model_path: str | None = None  # None = model_path
    shards: str
    split: str = "train"
    group_size: int = 8
    beta: float = 0.001
    clip: float = 0.2
    lambda0: float = 0.5
    kappa: float = 1.5
    temperature: float = 1.0
    max_new_tokens: int = 64
    prompts_per_step: int = 1
    curriculum: bool = False
    # direct-act prompts by default: the reward scores the answer, a thought only adds tokens
    mode_filter: Literal["direct", "reason"] | None = "direct"

    @field_validator("group_size")
    @classmethod
    def _group(cls, v: int) -> int:
        if v < 2:
            raise ValueError("must be >= 2 (advantages compare rollouts of one group)")
        return v

    def resolved_ref_model_path(self) -> Path:
        return resolve_model_path(self.ref_model_path or self.model_path)


def resolve_model_path(model_path: str) -> Path:
    if model_path == TINY:
        from trajforge.vlm.tiny import build_tiny_vlm, default_tiny_dir

        return build_tiny_vlm(default_tiny_dir())
    return Path(os.path.expandvars(os.path.expanduser(model_path)))


C = TypeVar("C", bound=BaseModel)


def _parse_value(text: str) -> Any:
    """A --set value: JSON when it parses (numbers, true, null, lists), else the string."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def load_config(path: str | Path, cls: type[C], overrides: dict[str, Any] | list[str] | None = None) -> C:
    """Read `path` (.yaml/.yml/.json) into `cls`; `overrides` ({field: value} or
    ["field=value", ...] from the command line) win over the file.

    Errors are ConfigError naming the file and the field.
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError("no such config file", source=str(path))
    text = path.read_text(encoding="utf-8")
    try:
        if path.suffix.lower() == ".json":
            data = json.loads(text)
        else:
            import yaml

            data = yaml.safe_load(text)
    except Exception as exc:  # noqa: BLE001 - YAML and JSON raise different types
        raise ConfigError(f"cannot parse: {exc}", source=str(path)) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"must hold a mapping of fields, got {type(data).__name__}", source=str(path))
    if isinstance(overrides, list):
        parsed = {}
        for item in overrides:
            key, sep, value = item.partition("=")
            if not sep:
                raise ConfigError(f"override {item!r} is not field=value", source=str(path), field=key)
            parsed[key.strip()] = _parse_value(value)
        overrides = parsed
    data = {**data, **(overrides or {})}
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or None
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise ConfigError(f"{err['msg']}{more}", source=str(path), field=field) from None
