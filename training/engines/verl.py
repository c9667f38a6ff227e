"""verl 0.9.1 (engine `verl`, rl): GRPO on the set converted to verl's Parquet, or online
RL through the `trajforge_gui` agent loop (`--option online=true`).

The command is verl's own entry point, `python -m verl.trainer.main_ppo` with Hydra
overrides, in .venv-trainers:

- data: the set converted under OUT/data (`trajforge convert --to verl`, run before
  the trainer; `--dry-run` prints that command and runs nothing); online: the episode
  rows of training/engines/env_tasks.py (`--option tasks=train.parquet`);
- the reward: OUT/data/reward.py (synthesis/gui_reward.py, copied by the converter)
  through `reward.custom_reward_function`, verl's naive reward manager; online: the
  environment's verifier, via the agent loop;
- GRPO: rollout.n = the group size, advantage estimator and policy loss
  `trajforge_gui_grpo` (training/engines/verl_ext.py: group advantages with
  success-adaptive negative scaling, the clipped surrogate), the KL term as verl's KL
  loss (k3, `low_var_kl`, coefficient beta); verl imports verl_ext in every process that
  imports verl (driver, TaskRunner, Ray workers on every node) because the Ray
  runtime_env sets VERL_USE_EXTERNAL_MODULES and PYTHONPATH;
- the cluster: trainer.nnodes / n_gpus_per_node from --nodes / --gpus (start Ray on
  every node first, `ray start --head` / `ray start --address=...`).

Options (`--option key=value`): group_size 8, prompts_per_step 8, beta 0.001, clip 0.2,
lambda0 0.5, kappa 1.5, lr 1e-6, temperature 1.0, max_prompt_length 4096,
max_response_length 512, rollout `vllm` (or `sglang`), online false, tasks, val_tasks,
server_url, max_turns 15; `overrides` (a list of extra Hydra overrides, appended last).
"""

from __future__ import annotations

import json

import yaml

from training.engines import ROOT, Conversion, EngineError, Launch, TrainRequest, python_for

ADV_ESTIMATOR = "trajforge_gui_grpo"  # training.engines.verl_ext.NAME (that module imports verl)
EXT_MODULE = "training.engines.verl_ext"
AGENT_NAME = "trajforge_gui"
DEFAULTS = {
    "group_size": 8,
    "prompts_per_step": 8,
    "beta": 0.001,
    "clip": 0.2,
    "lambda0": 0.5,
    "kappa": 1.5,
    "lr": 1e-6,
    "temperature": 1.0,
    "max_prompt_length": 4096,
    "max_response_length": 512,
    "rollout": "vllm",
    "online": False,
    "tasks": None,
    "val_tasks": None,
    "server_url": None,
    "max_turns": 15,
    "overrides": [],
}


def options(request: TrainRequest) -> dict:
    unknown = sorted(set(request.options) - set(DEFAULTS))
    if unknown:
        raise EngineError(
            f"engine verl: unknown option(s) {', '.join(unknown)} (known: {', '.join(DEFAULTS)})"
        )
    return {**DEFAULTS, **request.options}


def set_splits(request: TrainRequest) -> list[str]:
    """The splits the set holds (its manifest's shards), in order."""
    try:
        manifest = json.loads((request.set_dir / "manifest.json").read_text(encoding="utf-8"))
        return list(dict.fromkeys(s["split"] for s in manifest["shards"]))
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise EngineError(f"--set {request.set_dir}: cannot read its manifest.json ({err})") from None


def converted(request: TrainRequest, fmt: str) -> tuple[Conversion, str, str]:
    """(the set's conversion to `fmt` under OUT/data, train file, val file)."""
    splits = set_splits(request)
    if "train" not in splits:
        raise EngineError(f"--set {request.set_dir}: no train split (has {', '.join(splits) or 'none'})")
    val = next((s for s in ("val", "test") if s in splits), "train")
    data = request.out / "data"
    return Conversion(request.set_dir, fmt, data), str(data / "train.parquet"), str(data / f"{val}.parquet")


def overrides(request: TrainRequest, o: dict, train: str, val: str) -> list[str]:
    """main_ppo's Hydra overrides (`+` for keys verl's config does not declare)."""
    if request.gpus < 1:
        raise EngineError("engine verl needs GPUs (its rollout is vLLM or SGLang): --gpus >= 1")
    n_gpus = request.gpus * request.nodes
    batch = int(o["prompts_per_step"])
    if batch * int(o["group_size"]) % n_gpus:
        raise EngineError(
            f"prompts_per_step x group_size ({batch} x {o['group_size']}) must divide over {n_gpus} GPUs"
        )
    env = "+ray_kwargs.ray_init.runtime_env.env_vars"
    out = [
        f"data.train_files={train}",
        f"data.val_files={val}",
        "data.prompt_key=prompt",
        "data.image_key=images",
        f"data.train_batch_size={batch}",
        f"data.max_prompt_length={o['max_prompt_length']}",
        f"data.max_response_length={o['max_response_length']}",
        "data.filter_overlong_prompts=True",
        f"actor_rollout_ref.model.path={request.model}",
        f"actor_rollout_ref.actor.optim.lr={o['lr']}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={batch}",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1",
        f"actor_rollout_ref.actor.clip_ratio={o['clip']}",
        f"actor_rollout_ref.actor.policy_loss.loss_mode={ADV_ESTIMATOR}",
        "actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-mean",
        "actor_rollout_ref.actor.use_kl_loss=True",
        f"actor_rollout_ref.actor.kl_loss_coef={o['beta']}",
        "actor_rollout_ref.actor.kl_loss_type=low_var_kl",
        f"actor_rollout_ref.rollout.name={o['rollout']}",
        f"actor_rollout_ref.rollout.n={o['group_size']}",
        f"actor_rollout_ref.rollout.temperature={o['temperature']}",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=1",
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=1",
        f"algorithm.adv_estimator={ADV_ESTIMATOR}",
        "algorithm.use_kl_in_reward=False",
        f"trainer.nnodes={request.nodes}",
        f"trainer.n_gpus_per_node={request.gpus}",
        f"trainer.default_local_dir={request.out / 'checkpoints'}",
        "trainer.project_name=trajforge",
        f"trainer.experiment_name={request.out.name}",
        "trainer.logger=[console]",
        f"{env}.VERL_USE_EXTERNAL_MODULES={EXT_MODULE}",
        f"{env}.PYTHONPATH={ROOT}",
        f"{env}.TRAJFORGE_GRPO_LAMBDA0={o['lambda0']}",
        f"{env}.TRAJFORGE_GRPO_KAPPA={o['kappa']}",
    ]
    if request.max_steps is not None:
        out.append(f"trainer.total_training_steps={request.max_steps}")
    return out


def plan(request: TrainRequest) -> Launch:
    if request.kind != "rl":
        raise EngineError("engine verl trains rl only (sft: use trl, swift or llamafactory)")
    o = options(request)
    files, conversions, notes = {}, [], []
    if o["online"]:
        if not o["tasks"]:
            raise EngineError(
                "engine verl online: --option tasks=<episode rows, training/engines/env_tasks.py>"
            )
        train, val = str(o["tasks"]), str(o["val_tasks"] or o["tasks"])
        extra = [
            "actor_rollout_ref.rollout.mode=async",
            "actor_rollout_ref.rollout.multi_turn.enable=True",
            f"actor_rollout_ref.rollout.multi_turn.max_assistant_turns={o['max_turns']}",
            f"actor_rollout_ref.rollout.agent.default_agent_loop={AGENT_NAME}",
            f"actor_rollout_ref.rollout.agent.agent_loop_config_path={request.out / 'agent_loop.yaml'}",
        ]
        loop = {"name": AGENT_NAME, "_target_": "training.engines.verl_agent_loop.GuiAgentLoop"}
        if o["server_url"]:
            loop["server_url"] = o["server_url"]
        files["agent_loop.yaml"] = yaml.safe_dump([loop], sort_keys=False)
        notes.append("online: episodes on the environment server; reward = its verifier's")
    else:
        conversion, train, val = converted(request, "verl")
        conversions.append(conversion)
        reward = request.out / "data" / "reward.py"
        extra = [
            f"reward.custom_reward_function.path={reward}",
            "reward.custom_reward_function.name=compute_score",
        ]
        extra.append("reward.reward_manager.name=naive")
        notes.append(f"the set is converted to verl's Parquet under {request.out / 'data'} first")
    argv = [python_for("verl"), "-m", "verl.trainer.main_ppo", *overrides(request, o, train, val), *extra]
    argv += [str(x) for x in o["overrides"]]
    env = {"VERL_USE_EXTERNAL_MODULES": EXT_MODULE, "PYTHONPATH": str(ROOT)}
    return Launch("verl", "rl", argv, files=files, env=env, notes=notes, conversions=conversions)
