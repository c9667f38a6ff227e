"""The builtin loop (training.sft / training.rl): DDP at most, no extra dependency."""

from __future__ import annotations

import yaml

from training.engines import EngineError, Launch, TrainRequest, python_for

MODULES = {"sft": "training.sft", "rl": "training.rl"}


def plan(request: TrainRequest) -> Launch:
    if request.nodes > 1:
        raise EngineError(
            "engine builtin runs on one node (DDP at most): use trl, swift or verl for --nodes > 1"
        )
    if request.kind == "rl" and request.gpus > 1:
        raise EngineError("engine builtin trains RL on one GPU: use verl for --gpus > 1")
    config = {
        "model_path": request.model,
        "out_dir": str(request.out / "checkpoints"),
        "shards": str(request.set_dir),
    }
    if request.max_steps is not None:
        config["max_steps"] = request.max_steps
    config.update(request.options)
    name = f"{request.kind}.yaml"
    python = python_for("builtin")
    argv = [python, "-m", MODULES[request.kind], "--config", str(request.out / name)]
    if request.gpus > 1:
        argv = [
            python,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc_per_node={request.gpus}",
            *argv[1:],
        ]
    return Launch("builtin", request.kind, argv, files={name: yaml.safe_dump(config, sort_keys=True)})
