"""sft_checkpoint -> rl_checkpoint materialised through the real PipesSubprocessClient
(python -m training.sft / training.rl in child processes, tiny model, a few steps), their
metrics back as metadata; the Kubernetes pod spec checked against the kubernetes client's
models (no cluster is called)."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import dagster as dg
import pytest
import yaml

from dagster_project.assets.training import (
    TRAINING_ASSETS,
    RLAssetConfig,
    SFTAssetConfig,
    loss_fell,
    rl_train_config,
    sft_train_config,
    train_mode,
)
from dagster_project.resources import StorageResource
from dagster_project.training_launcher import (
    K8sToleration,
    TrainingLauncher,
    build_pod_spec,
    launch_pod_command,
)
from tests.training.conftest import TINY_IMAGE_PIXELS, build_small_reasoning_set
from tests.vlm.helpers import tiny_model_path
from training.config import RLConfig, SFTConfig


def _meta(result, node: str) -> dict:
    mats = result.asset_materializations_for_node(node)
    assert len(mats) == 1, node
    return {k: getattr(v, "value", v) for k, v in mats[0].metadata.items()}


def test_sft_then_rl_through_pipes_in_tiny_mode(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAJFORGE_TRAIN_MODE", "tiny")
    data = tmp_path / "data"
    shutil.move(str(build_small_reasoning_set(tmp_path / "build")), data / "shards" / "reasoning_set")
    model = str(tiny_model_path())
    train_job = dg.define_asset_job("train_job", selection=["sft_checkpoint", "rl_checkpoint"])
    defs = dg.Definitions(
        assets=TRAINING_ASSETS,
        jobs=[train_job],
        resources={
            "storage": StorageResource(root=str(data)),
            "launcher": TrainingLauncher(kind="subprocess"),
        },
    )
    run_config = {
        "ops": {
            "sft_checkpoint": {
                "config": {
                    "model_path": model,
                    "max_steps": 4,
                    "max_samples": 12,
                    "max_length": 512,
                    "image_max_pixels": TINY_IMAGE_PIXELS,
                    "overrides": json.dumps({"mode_filter": "direct"}),
                }
            },
            "rl_checkpoint": {
                "config": {
                    "max_steps": 1,
                    "group_size": 4,
                    "max_new_tokens": 12,
                    "max_length": 512,
                    "image_max_pixels": TINY_IMAGE_PIXELS,
                    "overrides": json.dumps({"mode_filter": "direct"}),
                }
            },
        }
    }
    result = defs.resolve_job_def("train_job").execute_in_process(
        run_config=run_config, instance=dg.DagsterInstance.ephemeral()
    )
    assert result.success

    sft = _meta(result, "sft_checkpoint")  # reported by the child process through Pipes
    assert sft["checkpoint_id"].startswith("sft-") and sft["steps"] == 4 and sft["train_mode"] == "tiny"
    losses = json.loads(sft["losses"])
    assert len(losses) == 4 and all(math.isfinite(v) for v in losses)
    assert (sft["loss_first"], sft["loss_last"]) == (losses[0], losses[-1])
    assert sft["tokens"] > 0 and sft["tokens_per_s"] > 0
    assert sft["loss_curve"].startswith("![SFT loss")
    # the set's thoughts are template-written; direct-act samples do not train them
    assert sft["thought_backend_share.template"] == 1.0 and sft["template_thoughts"] == "not trained"
    ckpt = Path(sft["checkpoint_path"])
    assert ckpt.name == sft["checkpoint_id"] and ckpt.parent == data / "checkpoints" / "sft"
    saved = json.loads((ckpt / "metrics.json").read_text())
    assert saved["checkpoint_id"] == sft["checkpoint_id"] and saved["losses"] == losses
    checks = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert checks["sft_loss_fell"].passed == loss_fell(losses)[0] is True

    rl = _meta(result, "rl_checkpoint")
    assert rl["checkpoint_id"].startswith("rl-") and rl["init_checkpoint"] == str(ckpt)
    assert rl["rollouts"] == 4 and 0.0 <= rl["reward_mean"] <= 1.0 and 0.0 <= rl["success_rate"] <= 1.0
    assert math.isfinite(rl["kl"]) and rl["kl"] >= 0.0 and math.isfinite(rl["loss"])
    assert rl["ppo_epochs"] == 2 and len(json.loads(rl["clip_frac_per_epoch"])) == 2  # tiny default
    rl_saved = json.loads((Path(rl["checkpoint_path"]) / "metrics.json").read_text())
    assert rl_saved["base_model"] == str(ckpt)  # RL started from the SFT checkpoint
    # the YAML each child read is kept in the run's training dir
    (run_dir,) = (data / "training" / "runs").iterdir()
    assert {p.name for p in run_dir.iterdir()} == {"sft.yaml", "rl.yaml"}
    # headline figures beside the data, for reports and for runs without the instance's history
    assert json.loads((data / "training" / "sft_checkpoint.json").read_text())["checkpoint_path"] == str(ckpt)
    summary = json.loads((data / "training" / "rl_checkpoint.json").read_text())
    assert (summary["checkpoint_id"], summary["kl"], summary["train_mode"]) == (
        rl["checkpoint_id"],
        rl["kl"],
        "tiny",
    )


def test_tiny_mode_is_the_default_without_a_model(monkeypatch, tmp_path):
    monkeypatch.delenv("TRAJFORGE_TRAIN_MODE", raising=False)
    monkeypatch.delenv("TRAJFORGE_TRAIN_MODEL", raising=False)
    assert train_mode() == "tiny"
    cfg = sft_train_config(SFTAssetConfig(max_steps=3), tmp_path, tmp_path / "shards", "tiny")
    assert cfg["model_path"] == "tiny" and cfg["max_steps"] == 3 and cfg["image_max_pixels"] == 28 * 28 * 16
    monkeypatch.setenv("TRAJFORGE_TRAIN_MODEL", "/models/qwen")
    assert train_mode() == "full"
    full = sft_train_config(SFTAssetConfig(overrides='{"mode_filter": "direct"}'), tmp_path, tmp_path, "full")
    assert full["model_path"] == "/models/qwen" and full["mode_filter"] == "direct"
    with pytest.raises(ValueError, match="overrides"):
        sft_train_config(SFTAssetConfig(overrides="[1]"), tmp_path, tmp_path, "full")
    # full mode: a template set is refused unless the config allows it (through overrides)
    allowed = sft_train_config(
        SFTAssetConfig(overrides='{"allow_template_thoughts": true}'), tmp_path, tmp_path, "full"
    )
    assert SFTConfig.model_validate(allowed).allow_template_thoughts is True
    assert SFTConfig.model_validate(full).allow_template_thoughts is False
    # full-mode RL reuses each batch of rollouts: 2 passes x 2 minibatches of 32 of its 64 rows
    rl = RLConfig.model_validate(rl_train_config(RLAssetConfig(), tmp_path, tmp_path, "/ckpt", "full"))
    assert (rl.ppo_epochs, rl.minibatch_size, rl.prompts_per_step * rl.group_size) == (2, 32, 64)
    assert loss_fell([3.0, 2.9, float("nan")])[0] is False and loss_fell([3.0, 3.1])[0] is False


def test_k8s_pod_spec_is_a_valid_gpu_pod(tmp_path):
    from dagster_k8s.pipes import build_pod_body

    from training.engines import TrainRequest, plan

    launcher = TrainingLauncher(
        kind="k8s",
        image="registry/trajforge-train:1",
        gpus=8,
        cpu="32",
        memory="512Gi",
        node_selector={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
        tolerations=[K8sToleration(key="nvidia.com/gpu", effect="NoSchedule")],
        pvc_name="trajforge-data",
        mount_path="/data",
        service_account="trainer",
        env_secret="trajforge-train-env",
    )
    spec = build_pod_spec(launcher)
    # the builtin engine's SFT as the sft_checkpoint asset launches it, its paths under the data root
    data = tmp_path / "data"
    out = data / "training" / "sft"
    launch = plan("builtin", TrainRequest("sft", data / "shards" / "rs", "/models/q", out, gpus=8))
    command, env = launch_pod_command(launch, out, "python", str(data), "/data")
    # the same path PipesK8sClient takes: snake-cased and parsed into kubernetes.client models
    pod = build_pod_body(
        "train-pod", launcher.image, command, {"DAGSTER_PIPES_CONTEXT": "x", **env}, None, spec
    )
    c = pod.spec.containers[0]
    assert c.image == launcher.image and c.command[-1].endswith(
        "exec python -m torch.distributed.run --standalone --nproc_per_node=8 "
        "-m training.sft --config /data/training/sft/sft.yaml"
    )
    assert c.resources.limits == {"cpu": "32", "memory": "512Gi", "nvidia.com/gpu": "8"}
    assert "nvidia.com/gpu" not in c.resources.requests
    mounts = {m.name: m.mount_path for m in c.volume_mounts}
    assert mounts == {"data": "/data", "dshm": "/dev/shm"}
    vols = {v.name: v for v in pod.spec.volumes}
    assert vols["data"].persistent_volume_claim.claim_name == "trajforge-data"
    assert vols["dshm"].empty_dir.medium == "Memory"
    assert [(t.key, t.operator, t.effect) for t in pod.spec.tolerations] == [
        ("nvidia.com/gpu", "Exists", "NoSchedule")
    ]
    assert pod.spec.node_selector == launcher.node_selector and pod.spec.service_account_name == "trainer"
    assert c.env_from[0].secret_ref.name == "trajforge-train-env"
    assert not any(e.value and "secret" in e.value.lower() for e in c.env)  # the secret's name only
    assert pod.spec.restart_policy == "Never"
    with pytest.raises(Exception, match="volumeMount"):  # a typo fails
        build_pod_body("p", "i", None, {}, None, {**spec, "volumeMount": []})
    # config paths under the local data root move to the PVC mount; others stay
    config = yaml.safe_load(next(iter(env.values())))
    assert config == {
        "shards": "/data/shards/rs",
        "out_dir": "/data/training/sft/checkpoints",
        "model_path": "/models/q",
    }
    assert str(data) not in c.command[-1]
    with pytest.raises(ValueError, match="not one of"):
        TrainingLauncher(kind="slurm").resolved_kind


def test_online_rl_takes_its_rollout_pool_from_the_asset_config_or_the_ray_address(monkeypatch, tmp_path):
    from training.online import OnlineRLConfig

    monkeypatch.delenv("TRAJFORGE_RAY_ADDRESS", raising=False)
    online = OnlineRLConfig.model_validate(
        rl_train_config(RLAssetConfig(online=True), tmp_path, tmp_path, "/ckpt", "tiny")
    )
    assert (online.rollout_envs, online.ray_address) == (1, None)  # one browser, in turn
    pooled = OnlineRLConfig.model_validate(
        rl_train_config(RLAssetConfig(online=True, rollout_envs=4), tmp_path, tmp_path, "/ckpt", "tiny")
    )
    assert (pooled.rollout_envs, pooled.ray_address) == (4, None)  # 4 local browsers
    monkeypatch.setenv("TRAJFORGE_RAY_ADDRESS", "ray://head:10001")
    on_ray = OnlineRLConfig.model_validate(
        rl_train_config(RLAssetConfig(online=True, rollout_envs=4), tmp_path, tmp_path, "/ckpt", "tiny")
    )
    assert (on_ray.rollout_envs, on_ray.ray_address) == (4, "ray://head:10001")
    # Where the rollouts play is not part of what is trained: the same checkpoint id.
    assert on_ray.identity() == online.identity()


def materialise_sft(defs: dg.Definitions, config: dict):
    """sft_checkpoint alone, with `config` as its asset config."""
    return dg.materialize(
        [a for a in TRAINING_ASSETS if a.key.path == ["sft_checkpoint"]],
        resources=defs.resources,
        run_config={"ops": {"sft_checkpoint": {"config": config}}},
        instance=dg.DagsterInstance.ephemeral(),
    )


def test_sft_with_engine_trl_materialises_through_pipes(tmp_path, monkeypatch):
    """engine: trl: the set converted to TRL's format, TRL's SFTTrainer in a child process
    (python -m training.engines.trl_sft) under PipesSubprocessClient; its metrics are the metadata."""
    from training.checkpoint import load_policy

    monkeypatch.setenv("TRAJFORGE_TRAIN_MODE", "tiny")
    data = tmp_path / "data"
    shutil.move(str(build_small_reasoning_set(tmp_path / "build")), data / "shards" / "reasoning_set")
    defs = dg.Definitions(
        assets=TRAINING_ASSETS,
        resources={
            "storage": StorageResource(root=str(data)),
            "launcher": TrainingLauncher(kind="subprocess"),
        },
    )
    sft_config = {
        "engine": "trl",
        "model_path": str(tiny_model_path()),
        "max_steps": 3,
        "lr": 1e-3,
        "max_samples": 4,
        "max_length": 1024,
        "image_max_pixels": TINY_IMAGE_PIXELS,
        "overrides": json.dumps({"mode_filter": "direct"}),
    }
    result = materialise_sft(defs, sft_config)
    assert result.success
    sft = _meta(result, "sft_checkpoint")
    assert sft["engine"] == "trl" and sft["steps"] == 3 and sft["train_mode"] == "tiny"
    losses = json.loads(sft["losses"])
    assert len(losses) == 3 and all(math.isfinite(v) for v in losses) and sft["loss_last"] == losses[-1]
    assert sft["tokens_per_s"] > 0 and sft["trained_tokens"] > 0
    ckpt = Path(sft["checkpoint_path"])
    out = data / "training" / "engines" / "trl" / "sft"
    assert ckpt.parent == out / "checkpoints" and ckpt.name == sft["checkpoint_id"]
    assert json.loads((ckpt / "metrics.json").read_text())["losses"] == losses
    assert (out / "data" / "data" / "train.parquet").is_file()  # the TRL conversion, kept
    model, _ = load_policy(ckpt, "cpu")  # transformers loads the checkpoint TRL saved
    assert model.config.model_type == "qwen2_vl"
    checks = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert checks["sft_loss_fell"].passed is loss_fell(losses)[0] is True


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["swift", "llamafactory"])
def test_sft_with_an_engine_outside_pipes_materialises_from_its_trainer_state(engine, tmp_path, monkeypatch):
    """engine: swift / llamafactory: their own CLIs (`swift sft`, `llamafactory-cli train`)
    in their venvs under PipesSubprocessClient train the tiny model for 2 optimiser steps on
    CPU; they cannot speak Pipes, so run_launch reads the Trainer's trainer_state.json of
    the run: loss, steps, tokens/s and the checkpoint path become the metadata."""
    from transformers import AutoConfig

    monkeypatch.setenv("TRAJFORGE_TRAIN_MODE", "tiny")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    tiny_model_path()  # built once under $TRAJFORGE_DATA (the engines' tiny-model view links to it)
    data = tmp_path / "data"
    shutil.move(
        str(build_small_reasoning_set(tmp_path / "build", n_traj=4)), data / "shards" / "reasoning_set"
    )
    defs = dg.Definitions(
        assets=TRAINING_ASSETS,
        resources={
            "storage": StorageResource(root=str(data)),
            "launcher": TrainingLauncher(kind="subprocess"),
        },
    )
    fields = {"learning_rate": 1e-3}
    fields.update({"cutoff_len": 1024} if engine == "llamafactory" else {"max_length": 1024})
    sft_config = {"engine": engine, "max_steps": 2, "device": "cpu", "overrides": json.dumps(fields)}
    result = materialise_sft(defs, sft_config)
    assert result.success
    sft = _meta(result, "sft_checkpoint")
    assert sft["engine"] == engine and sft["metrics_source"] == "trainer_state.json"
    losses = json.loads(sft["losses"])
    assert sft["steps"] == 2 and len(losses) == 2 and all(math.isfinite(v) and v > 0 for v in losses)
    assert (sft["loss_first"], sft["loss_last"]) == (losses[0], losses[-1])
    assert sft["tokens"] > 0 and sft["tokens_per_s"] > 0
    ckpt = Path(sft["checkpoint_path"])
    out = data / "training" / "engines" / engine / "sft"
    assert ckpt.is_relative_to(out / "checkpoints") and (ckpt / "trainer_state.json").is_file()
    assert AutoConfig.from_pretrained(ckpt).model_type == "qwen2_vl"  # the engine saved the model there
    assert (out / "data" / "convert_manifest.json").is_file()  # its conversion, kept
    checks = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert checks["sft_loss_fell"].passed is loss_fell(losses)[0]
    summary = json.loads((data / "training" / "sft_checkpoint.json").read_text())
    assert summary["checkpoint_path"] == str(ckpt) and summary["loss_last"] == losses[-1]


def test_an_engine_run_without_a_trainer_state_fails(tmp_path):
    """run_launch's read of trainer_state.json can fail: a run that left none of its own
    (an older one does not count) is a Failure naming the folder."""
    import os
    import time

    from dagster_project.training_launcher import with_trainer_state
    from training.engines import Launch

    old = tmp_path / "checkpoints" / "checkpoint-1" / "trainer_state.json"
    old.parent.mkdir(parents=True)
    old.write_text(json.dumps({"global_step": 1, "log_history": [{"loss": 2.0, "step": 1}]}))
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    launch = Launch("swift", "sft", ["true"], state_dir=tmp_path / "checkpoints")
    with pytest.raises(dg.Failure, match="no trainer_state.json under .*checkpoints"):
        with_trainer_state(dg.MaterializeResult(), launch, started=time.time() - 60)
    got = with_trainer_state(dg.MaterializeResult(), launch, started=time.time() - 7200)
    meta = {k: getattr(v, "value", v) for k, v in got.metadata.items()}
    assert (meta["steps"], meta["loss_last"], meta["checkpoint_path"]) == (1, 2.0, str(old.parent))


@pytest.mark.parametrize(
    "engine, kind, message",
    [("nope", "sft", "engine 'nope'"), ("trl", "rl", "engine trl trains SFT")],
)
def test_an_engine_that_cannot_take_the_request_fails_clearly(tmp_path, engine, kind, message):
    from dagster_project.assets.training import engine_request

    config = {"model_path": "tiny", "shards": str(tmp_path), "max_steps": 1}
    with pytest.raises(dg.Failure, match=message):
        engine_request(engine, kind, config, "", tmp_path, TrainingLauncher(kind="subprocess"))


def test_an_engine_launch_becomes_a_valid_pod(tmp_path):
    from dagster_k8s.pipes import build_pod_body

    from dagster_project.training_launcher import launch_pod_command
    from training.engines import TrainRequest, plan

    data = tmp_path / "data"
    out = data / "training" / "engines" / "trl" / "sft"
    shards = data / "shards" / "reasoning_set"
    launch = plan("trl", TrainRequest("sft", shards, "tiny", out, gpus=8))
    command, env = launch_pod_command(launch, out, "python", str(data), "/data")
    pod = build_pod_body(
        "p", "img", command, env, None, build_pod_spec(TrainingLauncher(kind="k8s", image="i"))
    )
    script = pod.spec.containers[0].command[-1]
    assert str(data) not in script and str(data) not in "".join(env.values())
    assert script.endswith(
        "exec python -m accelerate.commands.launch --config_file /data/training/engines/trl/sft/accelerate.yaml "
        "-m training.engines.trl_sft --config /data/training/engines/trl/sft/trl_sft.yaml"
    )
    assert "> /data/training/engines/trl/sft/trl_sft.yaml" in script
    assert "shards: /data/shards/reasoning_set" in env["TRAJFORGE_TRAIN_FILE_0"]
