"""EasyR1 (engine `easyr1`, rl): its YAML for GRPO on the set converted to EasyR1's Parquet.

EasyR1 is not on PyPI (checked with pip: no `easyr1` / `easy-r1`) and its package is named
`verl` too, so it cannot sit beside verl 0.9.1 in .venv-trainers: install it from its
repository in a venv of its own and point $TRAJFORGE_PYTHON_EASYR1 at that interpreter.
The config (OUT/easyr1.yaml) uses EasyR1's documented keys: data (prompt/answer/image
keys of the converter's rows), algorithm (grpo, the KL loss: low_var_kl, kl_coef = beta),
worker.rollout.n (the group size), worker.reward (OUT/data/reward.py:compute_score_easyr1,
batch), trainer.nnodes / n_gpus_per_node. EasyR1's own GRPO has no success-adaptive
negative scaling: use engine verl for that.
"""

from __future__ import annotations

import yaml

from training.engines import EngineError, Launch, TrainRequest, python_for
from training.engines.verl import converted

DEFAULTS = {"group_size": 8, "prompts_per_step": 8, "beta": 0.001, "lr": 1e-6, "max_response_length": 512}


def config(request: TrainRequest, o: dict, train: str, val: str) -> dict:
    return {
        "data": {
            "train_files": train,
            "val_files": val,
            "prompt_key": "prompt",
            "answer_key": "answer",
            "image_key": "images",
            "max_response_length": o["max_response_length"],
            "rollout_batch_size": o["prompts_per_step"],
        },
        "algorithm": {
            "adv_estimator": "grpo",
            "disable_kl": False,
            "use_kl_loss": True,
            "kl_penalty": "low_var_kl",
            "kl_coef": o["beta"],
        },
        "worker": {
            "actor": {"global_batch_size": o["prompts_per_step"], "model": {"model_path": request.model}},
            "rollout": {"n": o["group_size"]},
            "reward": {
                "reward_type": "batch",
                "reward_function": f"{request.out / 'data' / 'reward.py'}:compute_score_easyr1",
            },
        },
        "trainer": {
            "nnodes": request.nodes,
            "n_gpus_per_node": request.gpus,
            "save_checkpoint_path": str(request.out / "checkpoints"),
            **({"max_steps": request.max_steps} if request.max_steps is not None else {}),
        },
    }


def plan(request: TrainRequest) -> Launch:
    if request.kind != "rl":
        raise EngineError("engine easyr1 trains rl only")
    unknown = sorted(set(request.options) - set(DEFAULTS))
    if unknown:
        raise EngineError(
            f"engine easyr1: unknown option(s) {', '.join(unknown)} (known: {', '.join(DEFAULTS)})"
        )
    if request.gpus < 1:
        raise EngineError("engine easyr1 needs GPUs (its rollout is vLLM): --gpus >= 1")
    o = {**DEFAULTS, **request.options}
    conversion, train, val = converted(request, "easyr1")
    cfg = config(request, o, train, val)
    argv = [python_for("easyr1"), "-m", "verl.trainer.main", f"config={request.out / 'easyr1.yaml'}"]
    notes = [
        f"the set is converted to EasyR1's Parquet under {request.out / 'data'} first",
        "EasyR1 is not on PyPI: set TRAJFORGE_PYTHON_EASYR1 to a venv with it (docs/training.md)",
    ]
    return Launch(
        "easyr1",
        "rl",
        argv,
        files={"easyr1.yaml": yaml.safe_dump(cfg, sort_keys=False)},
        notes=notes,
        conversions=[conversion],
    )
