"""The TRL engine: TRL's own SFTTrainer with the span weights. Its training-step loss is
training.loss.weighted_token_loss on the same batch (and not the unweighted loss); the
weights are the builtin encoder's; `trajforge train sft --engine trl` trains, its dry run
prints the command and files, bad options exit 2; the generated accelerate configs
(FSDP2, ZeRO-3; 8 GPUs x 2 nodes) pass accelerate's own loader and launch validation."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from tests.training.conftest import TINY_IMAGE_PIXELS
from training.checkpoint import finished_checkpoint, load_policy
from training.config import TrlSFTConfig
from training.data import encode_sample, iter_reasoning_samples
from training.engines import TrainRequest, plan
from training.engines.trl import accelerate_config
from training.loss import weighted_token_loss
from trajforge.cli import app
from trajforge.convert import convert


@pytest.fixture(scope="module")
def trl_data(small_reasoning_set, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("trl") / "data"
    convert(small_reasoning_set, "trl", out)
    return out


def _cfg(tiny_model, shards, data, out, **kw) -> TrlSFTConfig:
    base = dict(
        model_path=str(tiny_model),
        shards=str(shards),
        data_dir=str(data),
        out_dir=str(out),
        device="cpu",
        max_steps=1,
        batch_size=2,
        lr=1e-3,
        max_length=1024,
        image_max_pixels=TINY_IMAGE_PIXELS,
        mode_filter="direct",
        max_samples=2,
    )
    return TrlSFTConfig(**{**base, **kw})


class _Recording:
    """Keeps every batch the trainer's collator hands to its training step."""

    def __init__(self, collator):
        self.collator, self.batches = collator, []

    def __call__(self, rows):
        batch = self.collator(rows)
        self.batches.append({k: v.clone() for k, v in batch.items()})
        return batch


def test_the_trainer_step_loss_is_the_weighted_token_loss(
    tiny_model, small_reasoning_set, trl_data, tmp_path
):
    from trl import SFTTrainer

    from training.engines.trl_sft import WeightedSFTTrainer, build_trainer

    cfg = _cfg(tiny_model, small_reasoning_set, trl_data, tmp_path)
    trainer, collator, steps = build_trainer(cfg, tmp_path / "run")
    assert type(trainer) is WeightedSFTTrainer and isinstance(trainer, SFTTrainer)
    before = copy.deepcopy(trainer.model.state_dict())
    trainer.data_collator = recording = _Recording(collator)
    trainer.train()  # one optimiser step: its loss is the step's training loss
    (step_loss,) = steps.losses
    batch = recording.batches[0]

    # the weights are the builtin encoder's, row by row, for the same set samples
    originals = {s.key: s for s in iter_reasoning_samples(small_reasoning_set, "train", "direct")}
    for key in trainer.train_dataset["id"]:
        ref = encode_sample(
            trainer.processing_class,
            originals[key].json,
            originals[key].image,
            cfg.max_length,
            cfg.image_max_pixels,
        )
        n = ref["input_ids"].shape[0]
        matches = [
            j
            for j in range(batch["input_ids"].shape[0])
            if torch.equal(batch["input_ids"][j, :n], ref["input_ids"])
            and torch.equal(batch["weights"][j, :n], ref["weights"])
            and torch.equal(batch["labels"][j, :n], ref["labels"])
        ]
        assert matches, f"row {key}: the batch does not carry the builtin's tokens and weights"
    assert {0.0, 1.0, 2.0, 4.0} <= set(batch["weights"].unique().tolist())

    # the same logits at the parameters the step started from
    trainer.model.load_state_dict(before)
    trainer.model.eval()
    inputs = {k: v for k, v in batch.items() if k not in ("labels", "weights")}
    with torch.no_grad():
        logits = trainer.model(**inputs, use_cache=False).logits
    expected, _ = weighted_token_loss(logits, batch["labels"], batch["weights"])
    unweighted, _ = weighted_token_loss(logits, batch["labels"], torch.ones_like(batch["weights"]))
    print(f"step loss {step_loss:.7f}, weighted {float(expected):.7f}, unweighted {float(unweighted):.7f}")
    assert step_loss == pytest.approx(float(expected), abs=1e-5)
    assert abs(float(unweighted) - float(expected)) > 0.05


def test_train_sft_engine_trl_through_the_cli(small_reasoning_set, tiny_model, tmp_path):
    out = tmp_path / "run"
    options = {
        "mode_filter": "direct",
        "max_length": 1024,
        "image_max_pixels": TINY_IMAGE_PIXELS,
        "batch_size": 2,
        "max_samples": 4,
        "lr": 1e-3,
    }
    args = ["train", "sft", "--engine", "trl", "--set", str(small_reasoning_set), "--model", str(tiny_model)]
    args += ["--out", str(out), "--gpus", "0", "--max-steps", "2"]
    args += [a for k, v in options.items() for a in ("--option", f"{k}={json.dumps(v)}")]

    dry = CliRunner().invoke(app, [*args, "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert f"-m training.engines.trl_sft --config {out / 'trl_sft.yaml'}" in dry.output
    assert f"# before the command: convert {small_reasoning_set} to trl under {out / 'data'}" in dry.output
    assert f"# {out / 'data'}: would be converted" in dry.output
    assert "max_steps: 2" in dry.output and "mode_filter: direct" in dry.output
    assert not out.exists()  # a dry run writes and converts nothing

    run = CliRunner().invoke(app, args)
    assert run.exit_code == 0, run.output
    (ckpt,) = (out / "checkpoints").iterdir()
    metrics = finished_checkpoint(ckpt)
    assert metrics["engine"] == "trl" and metrics["steps"] == 2 and len(metrics["losses"]) == 2
    assert metrics["checkpoint_path"] == str(ckpt) and metrics["tokens_per_s"] > 0
    assert metrics["tokens"] > metrics["trained_tokens"] > 0 and metrics["skipped"] == {}
    model, _ = load_policy(ckpt, "cpu")  # transformers loads what TRL saved
    assert sum(p.numel() for p in model.parameters()) > 0
    # the conversion is kept and known to be this set's: the next dry run does not redo it
    again = CliRunner().invoke(app, [*args, "--dry-run"])
    assert f"# {out / 'data'}: holds this version of the set" in again.output


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--option", "alpha_coord=-1"], "--option alpha_coord"),
        (["--option", "no_such_field=1"], "--option no_such_field"),
        (["--option", "distributed=ddp", "--gpus", "8"], "distributed='ddp'"),
        (["--nodes", "2", "--gpus", "0"], "CPU"),
    ],
)
def test_bad_options_exit_2_with_what_is_wrong(small_reasoning_set, tmp_path, extra, message):
    args = ["train", "sft", "--engine", "trl", "--set", str(small_reasoning_set), "--model", "tiny"]
    r = CliRunner().invoke(app, [*args, "--out", str(tmp_path), "--dry-run", *extra])
    assert r.exit_code == 2 and message in r.output, r.output
    r = CliRunner().invoke(app, ["train", "rl", *args[2:], "--out", str(tmp_path), "--dry-run"])
    assert r.exit_code == 2 and "engine trl trains SFT" in r.output


@pytest.mark.parametrize("distributed", ["fsdp2", "zero3"])
def test_accelerate_configs_for_two_nodes_of_eight_gpus(small_reasoning_set, tmp_path, distributed):
    from accelerate.commands.config.config_args import load_config_from_file
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser

    request = TrainRequest(
        "sft", small_reasoning_set, "tiny", tmp_path, gpus=8, nodes=2, options={"distributed": distributed}
    )
    launch = plan("trl", request)
    launch.write(tmp_path)
    path = tmp_path / "accelerate.yaml"
    loaded = load_config_from_file(str(path))  # accelerate's own loader: unknown keys fail
    assert (loaded.num_machines, loaded.num_processes, loaded.machine_rank) == (2, 16, 0)
    assert loaded.distributed_type.value == ("FSDP" if distributed == "fsdp2" else "DEEPSPEED")
    # the command as node 1 runs it, with its environment filled in
    command = launch.argv[-1]
    assert launch.argv[:2] == ["/bin/sh", "-c"] and '"${MACHINE_RANK:?' in command
    node_args = command.replace('"${MACHINE_RANK:?set MACHINE_RANK on each node}"', "1")
    node_args = node_args.replace('"${MAIN_PROCESS_IP:?set MAIN_PROCESS_IP on each node}"', "10.0.0.1")
    launch_args = node_args.split("accelerate.commands.launch ", 1)[1].split()
    args, defaults, _ = _validate_launch_command(launch_command_parser().parse_args(launch_args))
    assert (args.num_machines, args.num_processes, int(args.machine_rank)) == (2, 16, 1)
    assert args.main_process_ip == "10.0.0.1" and args.main_process_port == 29500
    assert args.training_script == "training.engines.trl_sft" and args.module
    if distributed == "fsdp2":
        from accelerate.utils import FullyShardedDataParallelPlugin
        from accelerate.utils.launch import prepare_multi_gpu_env

        env = prepare_multi_gpu_env(args)
        assert (env["FSDP_VERSION"], env["FSDP_STATE_DICT_TYPE"]) == ("2", "FULL_STATE_DICT")
        assert (args.nnodes, args.nproc_per_node, args.node_rank) == ("2", "8", 1)
        # the plugin the training process builds from that environment accepts it
        import os

        saved = dict(os.environ)
        try:
            os.environ.update(env)
            plugin = FullyShardedDataParallelPlugin()
        finally:
            os.environ.clear()
            os.environ.update(saved)
        assert plugin.fsdp_version == 2 and plugin.reshard_after_forward is True
    else:
        assert args.use_deepspeed and args.zero_stage == 3 and args.deepspeed_multinode_launcher == "standard"
        assert args.zero3_save_16bit_model in (True, "true")
    # one node of 8: no shell, no placeholders
    single = plan("trl", TrainRequest("sft", small_reasoning_set, "tiny", tmp_path, gpus=8))
    assert single.argv[1:4] == ["-m", "accelerate.commands.launch", "--config_file"]
    assert "MACHINE_RANK" not in " ".join(single.argv)
    assert accelerate_config("fsdp2", 8, 1)["num_processes"] == 8
