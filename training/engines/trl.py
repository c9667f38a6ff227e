"""TRL: SFT with TRL's SFTTrainer and the action-aware span weights (training.engines.trl_sft).

The set is converted to TRL's format under OUT/data (trajforge.convert, format trl) by
the caller before the command, when that copy is missing or made from another version.
One process: `python -m training.engines.trl_sft --config OUT/trl_sft.yaml`. Several GPUs or
nodes: the same under `accelerate launch --config_file OUT/accelerate.yaml`, whose
configuration is generated for the cluster size, FSDP2 (option distributed=fsdp2, the
default) or DeepSpeed ZeRO-3 (distributed=zero3; DeepSpeed must be installed). On
several nodes every node runs the same command with its own $MACHINE_RANK (0 on the
main node) and $MAIN_PROCESS_IP (the main node's address).
"""

from __future__ import annotations

import shlex

import yaml
from pydantic import ValidationError

from training.engines import Conversion, EngineError, Launch, TrainRequest, python_for

ENTRY = "training.engines.trl_sft"
CONFIG = "trl_sft.yaml"
ACCELERATE = "accelerate.yaml"
DATA = "data"
DISTRIBUTED = ("fsdp2", "zero3")
PORT = 29500
NODE_ENV = ("MACHINE_RANK", "MAIN_PROCESS_IP")


def accelerate_config(
    distributed: str, gpus: int, nodes: int, *, accumulation: int = 1, clip: float = 1.0
) -> dict:
    """An accelerate config (what `accelerate config` writes) for gpus x nodes processes.
    machine_rank is the main node's; the others pass --machine_rank (the command does)."""
    if distributed not in DISTRIBUTED:
        raise EngineError(f"--option distributed={distributed!r}: expected one of {', '.join(DISTRIBUTED)}")
    config = {
        "compute_environment": "LOCAL_MACHINE",
        "debug": False,
        "machine_rank": 0,
        "num_machines": nodes,
        "num_processes": gpus * nodes,  # in all, over every node
        "main_process_port": PORT,
        "main_training_function": "main",
        "mixed_precision": "bf16",
        "rdzv_backend": "static",
        "same_network": True,
        "use_cpu": False,
        "downcast_bf16": "no",
        "gpu_ids": "all",
        "tpu_env": [],
        "tpu_use_cluster": False,
        "tpu_use_sudo": False,
    }
    if distributed == "fsdp2":
        config["distributed_type"] = "FSDP"
        config["fsdp_config"] = {
            "fsdp_version": 2,
            "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",  # the model's _no_split_modules
            "fsdp_cpu_ram_efficient_loading": True,
            "fsdp_offload_params": False,
            "fsdp_reshard_after_forward": True,
            "fsdp_state_dict_type": "FULL_STATE_DICT",  # a checkpoint transformers loads
            "fsdp_activation_checkpointing": False,  # the trainer's gradient checkpointing does it
        }
    else:
        config["distributed_type"] = "DEEPSPEED"
        config["deepspeed_config"] = {
            "zero_stage": 3,
            "zero3_init_flag": True,
            "zero3_save_16bit_model": True,  # gathered on save: a checkpoint transformers loads
            "offload_optimizer_device": "none",
            "offload_param_device": "none",
            "gradient_accumulation_steps": accumulation,
            "gradient_clipping": clip,
            "deepspeed_multinode_launcher": "standard",  # torchrun on each node, no ssh
        }
    return config


def _train_config(request: TrainRequest, options: dict) -> dict:
    from training.config import TrlSFTConfig

    config = {
        "model_path": request.model,
        "shards": str(request.set_dir),
        "data_dir": str(request.out / DATA),
        "out_dir": str(request.out / "checkpoints"),
        **({"max_steps": request.max_steps} if request.max_steps is not None else {}),
        **({"device": "cpu"} if request.gpus == 0 else {}),
        **options,
    }
    try:
        return TrlSFTConfig.model_validate(config).model_dump(mode="json", exclude_unset=True)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"])
        raise EngineError(f"engine trl: --option {field}: {err['msg']}") from None


def plan(request: TrainRequest) -> Launch:
    if request.kind != "sft":
        raise EngineError("engine trl trains SFT (the span-weighted loss); for RL use verl or easyr1")
    if request.gpus == 0 and request.nodes > 1:
        raise EngineError("engine trl: --gpus 0 (CPU) runs on one node")
    options = dict(request.options)
    distributed = options.pop("distributed", "fsdp2")
    config = _train_config(request, options)
    files = {CONFIG: yaml.safe_dump(config, sort_keys=True)}
    python = python_for("trl")
    entry = ["-m", ENTRY, "--config", str(request.out / CONFIG)]
    argv, notes, world = [python, *entry], [], max(request.gpus, 1) * request.nodes
    if world > 1:
        files[ACCELERATE] = yaml.safe_dump(
            accelerate_config(
                distributed,
                request.gpus,
                request.nodes,
                accumulation=config.get("gradient_accumulation_steps", 1),
                clip=config.get("max_grad_norm", 1.0),
            ),
            sort_keys=True,
        )
        launcher = [
            python,
            "-m",
            "accelerate.commands.launch",
            "--config_file",
            str(request.out / ACCELERATE),
        ]
        if request.nodes == 1:
            argv = [*launcher, *entry]
        else:
            # each node: the same files (shared storage), its own rank and the main node's address
            node = " ".join(f'--{n.lower()} "${{{n}:?set {n} on each node}}"' for n in NODE_ENV)
            argv = ["/bin/sh", "-c", f"exec {shlex.join(launcher)} {node} {shlex.join(entry)}"]
            notes.append(
                f"run on each of the {request.nodes} nodes with MACHINE_RANK (0..{request.nodes - 1}) "
                "and MAIN_PROCESS_IP (the rank-0 node's address) set"
            )
    conversion = Conversion(request.set_dir, "trl", request.out / DATA)
    return Launch("trl", "sft", argv, files=files, notes=notes, conversions=[conversion])
