"""LLaMA-Factory (0.9.5, .venv-llamafactory): `llamafactory-cli train OUT/llamafactory.yaml`
(run as `python -m llamafactory.cli`, the same entry point under the engine's interpreter)
on the set converted to LLaMA-Factory's format under OUT/data (a Conversion, done by the
caller; its dataset_info.json registers `<dataset>_<split>`).

The YAML: full fine-tuning, the qwen2_vl template, the train split, `image_max_pixels` at
least the set's largest image (LLaMA-Factory shrinks anything above its own cap, which
would move a screenshot out of the frame its answers are written in), bf16 only on GPUs.
`--option key=value` adds or overrides any other LLaMA-Factory field.

trajforge's action-aware token weights are NOT carried: LLaMA-Factory's supervised
processor masks whole turns (a label is the token or IGNORE_INDEX), its loss is the plain
mean cross-entropy, and a dataset has no per-token column; this engine trains every answer
token with weight 1 (docs/training.md; the convert manifest says so too).

More than one device: DeepSpeed ZeRO-3 (OUT/ds_z3_config.json) and LLaMA-Factory's own
torchrun launch through the environment, as its README documents multi-node runs:
FORCE_TORCHRUN=1, NNODES, NODE_RANK, NPROC_PER_NODE, MASTER_ADDR, MASTER_PORT. Its launcher
calls `torchrun` from PATH, so the engine's venv goes first on PATH.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import yaml

from training.engines import (
    MULTI_NODE,
    Conversion,
    EngineError,
    Launch,
    TrainRequest,
    python_for,
    tiny_model_view,
    torchrun_env,
)

CONFIG = "llamafactory.yaml"
DEEPSPEED = "ds_z3_config.json"
DATA = "data"
MODEL = "model"
SPLIT = "train"
# Qwen2-VL's processor's own cap (16384 patches of 28x28): for a set that names no profile.
PROCESSOR_MAX_PIXELS = 16384 * 28 * 28
DEFAULTS = {
    "stage": "sft",
    "do_train": True,
    "finetuning_type": "full",
    "template": "qwen2_vl",
    "cutoff_len": 4096,
    "per_device_train_batch_size": 1,
    "gradient_accumulation_steps": 1,
    "learning_rate": 1.0e-5,
    "num_train_epochs": 1.0,
    "lr_scheduler_type": "cosine",
    "warmup_ratio": 0.0,
    "logging_steps": 1,
    "save_strategy": "no",  # the final model is saved in output_dir at the end
    "plot_loss": False,
    "overwrite_output_dir": True,
    "overwrite_cache": True,
    "report_to": "none",
    "include_num_input_tokens_seen": "non_padding",  # tokens/s in trainer_state.json
    "seed": 0,
}
NOT_CARRIED = (
    "token weights: NOT carried by LLaMA-Factory (its supervised processor masks whole turns, "
    "its loss is the plain mean cross-entropy): every answer token has weight 1"
)


def zero3_config() -> dict:
    """DeepSpeed ZeRO-3 for the HF Trainer LLaMA-Factory runs: "auto" values are filled from
    the training arguments (batch sizes, accumulation, clipping, bf16); the full 16-bit
    weights are gathered on save, so output_dir holds a checkpoint transformers loads."""
    return {
        "train_batch_size": "auto",
        "train_micro_batch_size_per_gpu": "auto",
        "gradient_accumulation_steps": "auto",
        "gradient_clipping": "auto",
        "zero_allow_untested_optimizer": True,
        "bf16": {"enabled": "auto"},
        "fp16": {"enabled": "auto"},
        "zero_optimization": {
            "stage": 3,
            "overlap_comm": False,
            "contiguous_gradients": True,
            "sub_group_size": 1e9,
            "reduce_bucket_size": "auto",
            "stage3_prefetch_bucket_size": "auto",
            "stage3_param_persistence_threshold": "auto",
            "stage3_max_live_parameters": 1e9,
            "stage3_max_reuse_distance": 1e9,
            "stage3_gather_16bit_weights_on_model_save": True,
        },
    }


def _set_manifest(set_dir: Path) -> dict:
    path = set_dir / "manifest.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise EngineError(f"engine llamafactory: {path}: cannot read the set's manifest ({exc})") from None


def _max_pixels(manifest: dict) -> int:
    """The set's images are stored at its profile's frame: at most its max_pixels."""
    from schemas.model_profiles import manifest_profile

    profile = manifest_profile(manifest)
    return PROCESSOR_MAX_PIXELS if profile is None else profile.max_pixels


def train_config(request: TrainRequest, options: dict) -> dict:
    manifest = _set_manifest(request.set_dir)
    if "dataset" not in manifest:
        raise EngineError(f"engine llamafactory: {request.set_dir / 'manifest.json'}: no field `dataset`")
    data = request.out / DATA
    config = {
        "model_name_or_path": str(request.out / MODEL) if request.model == "tiny" else request.model,
        **DEFAULTS,
        "dataset": f"{manifest['dataset']}_{SPLIT}",
        "dataset_dir": str(data),
        "media_dir": str(data),  # the rows' image paths are relative to the converted folder
        "image_max_pixels": _max_pixels(manifest),
        "output_dir": str(request.out / "checkpoints"),
        "bf16": request.gpus > 0,
    }
    if request.gpus == 0:
        # gradient checkpointing gains nothing on CPU and slows every step
        config["disable_gradient_checkpointing"] = True
        config["dataloader_num_workers"] = 0
    if request.max_steps is not None:
        config["max_steps"] = request.max_steps
    if max(request.gpus, 1) * request.nodes > 1:
        config["deepspeed"] = str(request.out / DEEPSPEED)
    config.update(options)
    return config


def plan(request: TrainRequest) -> Launch:
    if request.kind != "sft":
        raise EngineError("engine llamafactory trains sft here (for RL use verl or easyr1)")
    if request.gpus == 0 and request.nodes > 1:
        raise EngineError("engine llamafactory: --gpus 0 (CPU) runs on one node")
    options = dict(request.options)
    multi = {k: options.pop(k) for k in MULTI_NODE if k in options}
    config = train_config(request, options)
    files = {CONFIG: yaml.safe_dump(config, sort_keys=False)}
    python = python_for("llamafactory")
    argv = [python, "-m", "llamafactory.cli", "train", str(request.out / CONFIG)]
    env = {"HF_HUB_OFFLINE": "1", "DISABLE_VERSION_CHECK": "1"}
    notes = [NOT_CARRIED]
    if request.gpus == 0:
        env["CUDA_VISIBLE_DEVICES"] = ""
    if max(request.gpus, 1) * request.nodes > 1:
        files[DEEPSPEED] = json.dumps(zero3_config(), indent=2) + "\n"
        env.update(launcher_env(request, multi, str(Path(python).parent)))
        notes.append(
            f"LLaMA-Factory's launcher runs torchrun ({request.nodes} node(s) x {max(request.gpus, 1)} "
            "processes) from PATH: the engine's venv bin is put first"
        )
    steps = []
    if request.model == "tiny":
        view = request.out / MODEL
        steps.append((f"lay out the tiny model in {view}", lambda: tiny_model_view(view)))
    conversion = Conversion(request.set_dir, "llamafactory", request.out / DATA)
    return Launch(
        "llamafactory",
        "sft",
        argv,
        files=files,
        env=env,
        notes=notes,
        conversions=[conversion],
        steps=steps,
        state_dir=Path(config["output_dir"]),
    )


def launcher_env(request: TrainRequest, given: dict, venv_bin: str) -> dict[str, str]:
    """LLaMA-Factory's own torchrun launch (FORCE_TORCHRUN), with its venv's bin first on PATH."""
    env = {"FORCE_TORCHRUN": "1", "PATH": os.pathsep.join(filter(None, [venv_bin, os.environ.get("PATH")]))}
    return env | torchrun_env(request, given)
