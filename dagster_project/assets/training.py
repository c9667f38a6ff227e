"""Training assets: SFT, then RL, then evaluation, each a training process run through Pipes.

The asset bodies only build the entry point's config, plan it as `trajforge train`
does (a training.engines.TrainRequest; the engine plans the Launch: command, files,
conversion of the set to its format) and hand the Launch to the TrainingLauncher
resource (a local subprocess, a GPU pod on Kubernetes, a Ray node); the training
process reports its metrics back through Dagster Pipes, and they become the
materialisation's metadata here (plus a loss / reward chart).

`engine` (config) picks the trainer: builtin (the loop of training/: sft, rl, online
and eval are its plans) or one of the engines labs use (trl, swift, llamafactory,
verl, easyr1; docs/training.md, "Engines").

Tiny mode ($TRAJFORGE_TRAIN_MODE=tiny, or no model configured anywhere): the
offline tiny Qwen2-VL with random weights under <data>/models, a few steps on
small images: it proves the plumbing on a CPU, its numbers mean nothing.
Otherwise the model is `model_path` (config) or $TRAJFORGE_TRAIN_MODEL, a local
Hugging Face directory (Qwen2.5-VL, Qwen3-VL).
"""

# No `from __future__ import annotations`: Dagster reads the asset functions' annotations.
import json
import math
import os
from pathlib import Path

import dagster as dg

from dagster_project.assets.synthesis import REASONING_SET
from dagster_project.resources import StorageResource
from dagster_project.training_launcher import TrainingLauncher, metadata_value
from training.presets import PRESETS
from trajforge.report import plots

MODE_ENV = "TRAJFORGE_TRAIN_MODE"  # tiny | full
MODEL_ENV = "TRAJFORGE_TRAIN_MODEL"  # a local model directory
TINY = "tiny"  # training.config resolves it to <data>/models/tiny-qwen2vl


def train_mode(model_path: str = "", requested: str = "") -> str:
    """ "tiny" or "full": as requested (config, then $TRAJFORGE_TRAIN_MODE), else "tiny"
    exactly when no model is configured (neither `model_path` nor $TRAJFORGE_TRAIN_MODEL)."""
    mode = (requested or os.environ.get(MODE_ENV, "")).lower()
    if mode:
        if mode not in ("tiny", "full"):
            raise ValueError(f"training mode {mode!r} (config `mode` or ${MODE_ENV}) is not tiny or full")
        return mode
    return "full" if (model_path or os.environ.get(MODEL_ENV)) else TINY


def base_model(model_path: str, mode: str) -> str:
    """The configured model; else the tiny one in tiny mode, else $TRAJFORGE_TRAIN_MODEL."""
    if model_path:
        return model_path
    if mode == TINY:
        return TINY
    if not os.environ.get(MODEL_ENV):
        raise ValueError(f"full training mode needs a model: config model_path or ${MODEL_ENV}")
    return os.environ[MODEL_ENV]


def merged(defaults: dict, set_fields: dict, overrides_json: str, where: str) -> dict:
    """Mode defaults, then the fields set in the asset config, then `overrides` (JSON)."""
    out = {**defaults, **{k: v for k, v in set_fields.items() if v is not None}}
    if overrides_json:
        try:
            extra = json.loads(overrides_json)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{where}.overrides: not JSON ({exc})") from None
        if not isinstance(extra, dict):
            raise ValueError(f"{where}.overrides: must be a JSON object of config fields")
        out.update(extra)
    return out


class TrainAssetConfig(dg.Config):
    """Fields shared by the training assets; None = the mode's default."""

    mode: str = ""  # tiny | full ("" = $TRAJFORGE_TRAIN_MODE, else the upstream's)
    # builtin | trl | swift | llamafactory | verl | easyr1 (training.engines; docs/training.md)
    engine: str = "builtin"
    max_steps: int | None = None
    lr: float | None = None
    batch_size: int | None = None
    max_length: int | None = None
    image_max_pixels: int | None = None
    device: str = "auto"
    dtype: str = "auto"
    seed: int = 0
    overrides: str = ""  # JSON object: any other field of the entry point's config

    def common(self) -> dict:
        return {
            "max_steps": self.max_steps,
            "lr": self.lr,
            "batch_size": self.batch_size,
            "max_length": self.max_length,
            "image_max_pixels": self.image_max_pixels,
            "device": self.device,
            "dtype": self.dtype,
            "seed": self.seed,
        }


class SFTAssetConfig(TrainAssetConfig):
    model_path: str = ""  # "" = $TRAJFORGE_TRAIN_MODEL, else the tiny model
    alpha_action: float = 2.0
    alpha_coord: float = 4.0
    max_samples: int | None = None


class RLAssetConfig(TrainAssetConfig):
    online: bool = False  # True: online GRPO in the sandbox (training.online)
    init_checkpoint: str = ""  # "" = the latest sft_checkpoint
    group_size: int | None = None  # G (offline); k for online
    beta: float = 0.001
    clip: float = 0.2
    lambda0: float = 0.5
    kappa: float = 1.5
    max_new_tokens: int | None = None
    # online: where the rollouts play (training.online): N envs at once, local browsers or,
    # with ray_address ("" = $TRAJFORGE_RAY_ADDRESS, else none), Ray actors.
    rollout_envs: int | None = None
    ray_address: str = ""


class EvalAssetConfig(dg.Config):
    mode: str = ""  # tiny | full ("" = $TRAJFORGE_TRAIN_MODE, else the upstream's)
    checkpoint: str = ""  # "" = the latest rl_checkpoint
    offline: bool = True  # step accuracy on the held-out split
    online: bool = True  # task success in the sandbox (rollouts recorded: the flywheel)
    split: str = "test"
    max_samples: int | None = None
    k: int = 1
    max_steps: int | None = None
    max_new_tokens: int | None = None
    server_url: str = ""  # "" = the training process starts its own sandbox
    device: str = "auto"
    overrides: str = ""


def sft_train_config(cfg: SFTAssetConfig, data: Path, shards: Path, mode: str) -> dict:
    return merged(
        PRESETS["sft"][mode],
        {
            **cfg.common(),
            "model_path": base_model(cfg.model_path, mode),
            "shards": str(shards),
            "split": "train",
            "out_dir": str(data / "checkpoints" / "sft"),
            "alpha_action": cfg.alpha_action,
            "alpha_coord": cfg.alpha_coord,
            "max_samples": cfg.max_samples,
        },
        cfg.overrides,
        "sft_checkpoint",
    )


def rl_train_config(cfg: RLAssetConfig, data: Path, shards: Path, init: str, mode: str) -> dict:
    shared = {
        **cfg.common(),
        "model_path": init,
        "beta": cfg.beta,
        "clip": cfg.clip,
        "lambda0": cfg.lambda0,
        "kappa": cfg.kappa,
        "max_new_tokens": cfg.max_new_tokens,
    }
    if cfg.online:
        ray = cfg.ray_address or os.environ.get("TRAJFORGE_RAY_ADDRESS") or None
        return merged(
            PRESETS["online"][mode],
            {
                **shared,
                "k": cfg.group_size,
                "store": str(data / "raw"),
                "out_dir": str(data / "checkpoints" / "online"),
                "rollout_envs": cfg.rollout_envs,
                "ray_address": ray,
            },
            cfg.overrides,
            "rl_checkpoint",
        )
    return merged(
        PRESETS["rl"][mode],
        {
            **shared,
            "shards": str(shards),
            "split": "train",
            "group_size": cfg.group_size,
            "out_dir": str(data / "checkpoints" / "rl"),
        },
        cfg.overrides,
        "rl_checkpoint",
    )


def eval_config(cfg: EvalAssetConfig, data: Path, shards: Path, checkpoint: str, mode: str) -> dict:
    defaults = dict(PRESETS["eval"][mode])
    if not cfg.online:
        defaults.pop("tasks", None)
    return merged(
        defaults,
        {
            "model_path": checkpoint,
            "device": cfg.device,
            "split": cfg.split,
            "k": cfg.k,
            "max_samples": cfg.max_samples,
            "max_steps": cfg.max_steps,
            "max_new_tokens": cfg.max_new_tokens,
            "shards": str(shards) if cfg.offline else None,
            "store": str(data / "raw") if cfg.online else None,
            "server_url": cfg.server_url or None,
            "out_dir": str(data / "checkpoints" / "eval"),
        },
        cfg.overrides,
        "online_eval",
    )


# -- what the training process reported -------------------------------------------------------


def pointer_path(data: Path, asset: str) -> Path:
    """<data>/training/<asset>.json: the latest checkpoint of an asset, for runs that do not
    share the Dagster instance's history (a fresh DAGSTER_HOME, a test)."""
    return data / "training" / f"{asset}.json"


def upstream_checkpoint(context: dg.AssetExecutionContext, asset: str, data: Path) -> tuple[str, str]:
    """(checkpoint path, train mode) of `asset`'s latest materialisation (its metadata),
    else of its pointer file; an error naming the asset when there is neither."""
    event = context.instance.get_latest_materialization_event(dg.AssetKey(asset))
    if event is not None and event.asset_materialization is not None:
        meta = event.asset_materialization.metadata
        if meta.get("checkpoint_path") is not None:
            return (
                str(getattr(meta["checkpoint_path"], "value", meta["checkpoint_path"])),
                str(getattr(meta.get("train_mode"), "value", "") or ""),
            )
    pointer = pointer_path(data, asset)
    if pointer.is_file() and json.loads(pointer.read_text()).get("checkpoint_path"):
        saved = json.loads(pointer.read_text())
        return saved["checkpoint_path"], saved.get("train_mode", "")
    raise ValueError(
        f"no {asset} materialisation with a checkpoint_path (nor {pointer}): "
        f"materialise {asset} first or set the checkpoint in the config"
    )


def reported_list(result: dg.MaterializeResult, key: str) -> list:
    """A per-step list the process reported (JSON text in the metadata), else the one in
    its checkpoint's metrics.json (the metadata text is cut at 2000 characters; on
    Kubernetes the checkpoint is not on this machine, and the chart may then be empty)."""
    value = metadata_value(result, key)
    if isinstance(value, list):
        return value
    path = metadata_value(result, "checkpoint_path")
    metrics = Path(str(path)) / "metrics.json" if path else None
    if metrics is not None and metrics.is_file():
        return json.loads(metrics.read_text()).get(key) or []
    return []


def reported_series(result: dg.MaterializeResult, key: str) -> list[float]:
    return [float(v) for v in reported_list(result, key)]


def rl_series(result: dg.MaterializeResult) -> dict[str, list[float]]:
    """Per-step reward (and success rate, for online RL's iterations) to chart."""
    history = reported_list(result, "history")  # training.online: one row per iteration
    if history:
        return {
            "reward": [float(h["reward_mean"]) for h in history],
            "success rate": [float(h["success_rate"]) for h in history],
        }
    return {"reward": reported_series(result, "rewards")}


def curve_md(series: dict[str, list[float]], title: str, xlabel: str = "step") -> str:
    """A small line chart as a markdown image (data URI) for the metadata."""
    return plots.image_md(plots.line_png(series, title, xlabel), title)


def loss_fell(losses: list[float]) -> tuple[bool, str]:
    """Finite, and the mean of the last quarter of steps below the first quarter's
    (one batch per step: single values are noisy)."""
    if not losses:
        return False, "no losses reported"
    if not all(math.isfinite(v) for v in losses):
        return False, f"non-finite loss in {losses}"
    q = max(1, len(losses) // 4)
    first, last = sum(losses[:q]) / q, sum(losses[-q:]) / q
    return last < first, f"mean of first {q} step(s) {first:.4f} -> last {q} {last:.4f}"


SUMMARY_KEYS = (
    "checkpoint_id",
    "checkpoint_path",
    "steps",
    "loss_first",
    "loss_last",
    "tokens_per_s",
    "reward_mean",
    "reward_first",
    "reward_last",
    "kl",
    "success_rate",
    "rollouts_per_s",
    "offline_step_success",
    "online_rollouts",
    "wall_s",
    "reused",
)


def finish(
    result: dg.MaterializeResult,
    data: Path,
    asset: str,
    mode: str,
    extra: dict,
    check_results: list | None = None,
) -> dg.MaterializeResult:
    """The reported metadata plus charts and paths. The headline figures go to
    <data>/training/<asset>.json too: the next asset's fallback for the checkpoint
    path, and what a report (the demo's) reads without the Dagster instance."""
    metadata = {**(result.metadata or {}), "train_mode": mode}
    path = metadata_value(result, "checkpoint_path")
    if path:
        metadata["checkpoint_path"] = dg.MetadataValue.path(str(path))
    summary = {k: metadata_value(result, k) for k in SUMMARY_KEYS if k in (result.metadata or {})}
    pointer = pointer_path(data, asset)
    pointer.parent.mkdir(parents=True, exist_ok=True)
    pointer.write_text(json.dumps({**summary, "train_mode": mode}, indent=1, default=str))
    metadata.update(extra)
    return dg.MaterializeResult(
        metadata=metadata, check_results=check_results, data_version=result.data_version
    )


# -- the plan and the launch (training.engines) --------------------------------------------------

# Engines whose entry point reads training.config's fields: they get the asset's whole train
# config (mode defaults included); the others get the `overrides` JSON, in their own terms.
ENGINES_WITH_OUR_FIELDS = {"builtin", "trl"}
REQUEST_FIELDS = ("model_path", "shards", "out_dir", "max_steps")  # what the TrainRequest says


def engine_out(context: dg.AssetExecutionContext, data: Path, engine: str, kind: str) -> Path:
    """Where a run's configs go: the builtin loop's in the run's folder; another engine's,
    with its converted data and checkpoints, kept across runs (the conversion is reused
    while the set is unchanged, a finished checkpoint is found again)."""
    if engine == "builtin":
        return data / "training" / "runs" / context.run.run_id[:8]
    return data / "training" / "engines" / engine / kind


def engine_gpus(device: str, launcher: TrainingLauncher) -> int:
    """GPUs per node for an engine: 0 (CPU: no bf16, no GPU launch) when the config says
    device cpu, or, on the local subprocess launcher with device auto, when this machine
    has no CUDA device; else the launcher's processes per node."""
    if device == "cpu":
        return 0
    if device == "auto" and launcher.resolved_kind == "subprocess":
        import torch

        if not torch.cuda.is_available():
            return 0
    return max(launcher.nproc_per_node, 1)


def engine_request(
    engine: str, kind: str, train_config: dict, overrides_json: str, out: Path, launcher: TrainingLauncher
):
    """(TrainRequest, Launch) of `kind` on `engine`; a clear error for an unknown engine,
    one not built in this version, or a kind or option it does not take."""
    from training.engines import EngineError, TrainRequest, plan

    if engine == "builtin":  # its entry point's config, as the asset built it
        options = dict(train_config)
    elif engine in ENGINES_WITH_OUR_FIELDS:
        options = {k: v for k, v in train_config.items() if k not in REQUEST_FIELDS}
    else:
        options = json.loads(overrides_json) if overrides_json else {}
    gpus = engine_gpus(train_config.get("device", "auto"), launcher)
    try:
        request = TrainRequest(
            kind,
            Path(train_config["shards"]) if train_config.get("shards") else None,
            str(train_config["model_path"]),
            out,
            gpus=gpus if kind == "sft" else min(gpus, 1),  # only SFT runs DDP (engine builtin)
            max_steps=train_config.get("max_steps"),
            options=options,
        )
        return request, plan(engine, request)
    except EngineError as exc:
        raise dg.Failure(f"{kind} with engine {engine!r}: {exc}") from None


def train(
    context: dg.AssetExecutionContext,
    launcher: TrainingLauncher,
    engine: str,
    kind: str,
    train_config: dict,
    overrides_json: str,
    data: Path,
) -> dg.MaterializeResult:
    """Plan `kind` on `engine` and run the Launch through the launcher, as `trajforge train`."""
    out = engine_out(context, data, engine, kind)
    _, launch = engine_request(engine, kind, train_config, overrides_json, out, launcher)
    return launcher.run_launch(context, launch, out=out, data_root=data)


# -- the assets -------------------------------------------------------------------------------

SFT_CHECK = dg.AssetCheckSpec(
    "sft_loss_fell",
    asset="sft_checkpoint",
    blocking=True,
    description="the SFT loss is finite and fell over the run",
)


@dg.asset(group_name="train", kinds={"pytorch"}, deps=["reasoning_set"], check_specs=[SFT_CHECK])
def sft_checkpoint(
    context: dg.AssetExecutionContext,
    config: SFTAssetConfig,
    storage: StorageResource,
    launcher: TrainingLauncher,
) -> dg.MaterializeResult:
    """Supervised fine-tuning on the reasoning set's train split with the weighted loss
    (reasoning 1, action alpha_a, coordinates alpha_g), through training.sft."""
    data = storage.path
    mode = train_mode(config.model_path, config.mode)
    train_config = sft_train_config(config, data, storage.shards_dir(REASONING_SET), mode)
    result = train(context, launcher, config.engine, "sft", train_config, config.overrides, data)
    losses = reported_series(result, "losses")
    passed, detail = loss_fell(losses)
    check = dg.AssetCheckResult(check_name=SFT_CHECK.name, passed=passed, metadata={"detail": detail})
    return finish(
        result,
        data,
        "sft_checkpoint",
        mode,
        {
            "loss_curve": dg.MetadataValue.md(curve_md({"loss": losses}, f"SFT loss ({len(losses)} steps)")),
        },
        [check],
    )


@dg.asset(group_name="train", kinds={"pytorch"}, deps=["sft_checkpoint"])
def rl_checkpoint(
    context: dg.AssetExecutionContext,
    config: RLAssetConfig,
    storage: StorageResource,
    launcher: TrainingLauncher,
) -> dg.MaterializeResult:
    """GRPO from the SFT checkpoint: offline over reasoning-set steps (training.rl,
    reward synthesis.rewards.step_reward), or online in the sandbox (training.online,
    `online: true`). KL to the SFT policy (k3, beta), clip, lambda-scaled negatives."""
    data = storage.path
    init, upstream_mode = (
        (config.init_checkpoint, "")
        if config.init_checkpoint
        else upstream_checkpoint(context, "sft_checkpoint", data)
    )
    mode = train_mode("", config.mode or upstream_mode)
    train_config = rl_train_config(config, data, storage.shards_dir(REASONING_SET), init, mode)
    kind = "online" if config.online else "rl"
    result = train(context, launcher, config.engine, kind, train_config, config.overrides, data)
    series = rl_series(result)
    return finish(
        result,
        data,
        "rl_checkpoint",
        mode,
        {
            "init_checkpoint": dg.MetadataValue.path(init),
            "reward_curve": dg.MetadataValue.md(
                curve_md(series, f"RL reward ({len(series['reward'])} steps)")
            ),
        },
    )


@dg.asset(group_name="train", kinds={"pytorch"}, deps=["rl_checkpoint"])
def online_eval(
    context: dg.AssetExecutionContext,
    config: EvalAssetConfig,
    storage: StorageResource,
    launcher: TrainingLauncher,
) -> dg.MaterializeResult:
    """Offline step accuracy (type, point in box, value) on the held-out split and online
    task success in the sandbox (the state verifier decides); the online rollouts are
    recorded in the raw store by verdict with the checkpoint id (the flywheel)."""
    data = storage.path
    checkpoint, upstream_mode = (
        (config.checkpoint, "") if config.checkpoint else upstream_checkpoint(context, "rl_checkpoint", data)
    )
    mode = train_mode("", config.mode or upstream_mode)
    eval_cfg = eval_config(config, data, storage.shards_dir(REASONING_SET), checkpoint, mode)
    result = train(context, launcher, "builtin", "eval", eval_cfg, config.overrides, data)
    return finish(result, data, "online_eval", mode, {"checkpoint": dg.MetadataValue.path(checkpoint)})


TRAINING_ASSETS = [sft_checkpoint, rl_checkpoint, online_eval]

# SFT -> RL -> evaluation in one run (the demo and a GPU node's nightly run).
train_job = dg.define_asset_job(
    "train_job",
    selection=dg.AssetSelection.groups("train"),
    description="SFT on the reasoning set, GRPO from the SFT checkpoint, then evaluation, "
    "each a training process launched through Dagster Pipes.",
)

# The flywheel's turn: online_eval records the checkpoint's rollouts in the raw store
# (verified successes in rollouts/<checkpoint>, failures in rollouts-failed/<checkpoint>);
# the next export run's raw_steps takes the successes, so each turn trains on data grown
# from the previous model. Stopped by default: it wants a GPU node.
TRAIN_CRON = os.environ.get("TRAJFORGE_TRAIN_CRON", "0 8 * * 0")
weekly_training = dg.ScheduleDefinition(
    name="weekly_training",
    job=train_job,
    cron_schedule=TRAIN_CRON,
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.STOPPED,
)
