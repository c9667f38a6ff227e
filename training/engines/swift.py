"""ms-swift (4.6, .venv-trainers): `swift sft` on the set converted to ms-swift's format,
with trajforge's action-aware token weights carried by ms-swift's own loss-scale
mechanism (training/engines/swift_plugin.py: loss scale `trajforge`, loss
`trajforge_weighted`; docs/training.md says what each does and what was checked).

Before the command: the set is converted under OUT/data (a Conversion, done by the
caller, unless OUT/data holds this version of the set); `--model tiny` is laid out under OUT/model (links to the tiny model
plus the preprocessor config ms-swift's processor loader needs). More than one device:
DeepSpeed ZeRO-3, and the `swift` launcher's torchrun environment (NPROC_PER_NODE,
NNODES, NODE_RANK, MASTER_ADDR, MASTER_PORT), as ms-swift documents multi-node runs.
"""

from __future__ import annotations

import json
from pathlib import Path

from training.engines import (
    MULTI_NODE,
    ROOT,
    Conversion,
    EngineError,
    Launch,
    TrainRequest,
    python_for,
    tiny_model_view,
    torchrun_env,
)

PLUGIN = ROOT / "training" / "engines" / "swift_plugin.py"
DATA = "data"
MODEL = "model"
# Fields the plan sets itself; `--option key=value` adds or overrides any other
# `swift sft` argument (e.g. learning_rate, per_device_train_batch_size, lora).
DEFAULTS = {
    "model_type": "qwen2_vl",
    "template": "qwen2_vl",
    "tuner_type": "full",
    "torch_dtype": "bfloat16",
    "per_device_train_batch_size": 1,
    "gradient_accumulation_steps": 1,
    "learning_rate": 1e-5,
    "num_train_epochs": 1,
    "save_strategy": "steps",
    "logging_steps": 1,
    "split_dataset_ratio": 0,
    "dataset_num_proc": 1,
    "report_to": "none",
    # tokens/s in trainer_state.json (ms-swift parses it as a bool: every input token counted)
    "include_num_input_tokens_seen": True,
}


def plan(request: TrainRequest) -> Launch:
    if request.kind != "sft":
        raise EngineError("engine swift trains sft here (ms-swift's RL (GRPO) is not wired: use verl for rl)")
    out = request.out
    data = out / DATA
    tiny = request.model == "tiny"
    options = dict(request.options)
    alphas = {k: str(float(options.pop(k))) for k in ("alpha_action", "alpha_coord") if k in options}
    multi = {k: options.pop(k) for k in MULTI_NODE if k in options}
    fields = {**DEFAULTS, **({"template": "trajforge_qwen2_vl", "torch_dtype": "float32"} if tiny else {})}
    if request.gpus == 0:
        fields["torch_dtype"] = "float32"  # bf16 matmuls on CPU are slow and lossy
    fields.update(
        {
            "model": str(out / MODEL) if tiny else request.model,
            "dataset": str(data / "train.jsonl"),
            "output_dir": str(out / "checkpoints"),
            "external_plugins": str(PLUGIN),
            "loss_scale": "trajforge",
            "loss_type": "trajforge_weighted",
            # ms-swift drops columns it does not know; the loss scale reads `spans`.
            "remove_unused_columns": "false",
            "strict": "true",  # a row it cannot encode is an error, not silently skipped
        }
    )
    if request.max_steps is not None:
        fields["max_steps"] = request.max_steps
    world = max(request.gpus, 1) * request.nodes
    if world > 1:
        fields["deepspeed"] = "zero3"
    fields.update(options)
    argv = [str(Path(python_for("swift")).parent / "swift"), "sft"]
    for key, value in fields.items():
        argv += [f"--{key}", _arg(value)]
    env = {
        "TRAJFORGE_SWIFT_TOKENIZER": fields["model"],
        "ROOT_IMAGE_DIR": str(data),  # the converted rows' image paths are relative to it
        **{f"TRAJFORGE_{k.upper()}": v for k, v in alphas.items()},
    }
    if request.gpus == 0:
        env["CUDA_VISIBLE_DEVICES"] = ""
    if world > 1:
        env.update(torchrun_env(request, multi))
    steps = []
    if tiny:
        steps.append((f"lay out the tiny model in {out / MODEL}", lambda: tiny_model_view(out / MODEL)))
    notes = [
        "token weights: ms-swift loss scale `trajforge` from each row's `spans`, "
        "normalised by the weight total (loss_type trajforge_weighted)"
    ]
    conversion = Conversion(request.set_dir, "swift", data)
    return Launch(
        "swift",
        "sft",
        argv,
        env=env,
        notes=notes,
        conversions=[conversion],
        steps=steps,
        state_dir=Path(fields["output_dir"]),
    )


def _arg(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return str(value)
