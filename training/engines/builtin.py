"""The builtin loop of training/: every kind a plan, DDP at most, no extra dependency.

sft (training.sft), rl (training.rl), online (training.online: online RL in
environments) and eval (training.evaluate: offline and online evaluation), each
`python -m <module> --config <out>/<module>.yaml`; the request's options are the
entry point's config fields (they win over what the request says).
"""

from __future__ import annotations

import yaml

from training.engines import EngineError, Launch, TrainRequest, python_for

MODULES = {
    "sft": "training.sft",
    "rl": "training.rl",
    "online": "training.online",
    "eval": "training.evaluate",
}
ONE_GPU = {"rl": "RL", "online": "online RL", "eval": "evaluation"}  # kinds without DDP


def plan(request: TrainRequest) -> Launch:
    if request.nodes > 1:
        raise EngineError(
            "engine builtin runs on one node (DDP at most): use trl, swift or verl for --nodes > 1"
        )
    if request.kind in ONE_GPU and request.gpus > 1:
        raise EngineError(f"engine builtin runs {ONE_GPU[request.kind]} on one GPU: use verl for --gpus > 1")
    config = {"model_path": request.model, "out_dir": str(request.out / "checkpoints")}
    if request.set_dir is not None:
        config["shards"] = str(request.set_dir)
    if request.max_steps is not None:
        config["max_steps"] = request.max_steps
    config.update(request.options)
    module = MODULES[request.kind]
    name = f"{module.rsplit('.', 1)[-1]}.yaml"
    python = python_for("builtin")
    argv = [python, "-m", module, "--config", str(request.out / name)]
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
