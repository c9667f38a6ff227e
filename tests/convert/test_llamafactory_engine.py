"""LLaMA-Factory engine (training/engines/llamafactory.py) in .venv-llamafactory: `trajforge
train sft --engine llamafactory` trains the tiny model on CPU (LLaMA-Factory's own launcher,
data path and Trainer); the planned YAML, on one CPU node and on 2 nodes x 8 GPUs, parses
with LLaMA-Factory's own get_train_args; the token weights are not carried, and the plan
says so."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest
import yaml

from tests.convert.trainer_venvs import LLAMAFACTORY, ROOT, run_in_venv
from training.engines import EngineError, TrainRequest, plan
from training.engines.llamafactory import CONFIG, DEEPSPEED


@pytest.mark.slow
def test_train_sft_engine_llamafactory_trains_two_steps_on_cpu(reasoning_dir, tmp_path):
    """The CLI converts the set, lays out the tiny model and runs llamafactory-cli train (CPU)."""
    out = tmp_path / "run"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRAJFORGE_DATA": str(tmp_path / "td")}
    cmd = [sys.executable, "-m", "trajforge.cli", "train", "sft", "--engine", "llamafactory", "--set"]
    cmd += [str(reasoning_dir), "--model", "tiny", "--out", str(out), "--gpus", "0", "--max-steps", "2"]
    cmd += ["--option", "cutoff_len=1024", "--option", "learning_rate=1e-4"]
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-4000:]
    written = json.loads((out / "data" / "convert_manifest.json").read_text())
    assert written["format"] == "llamafactory" and written["token_weights"]["carried"] is False
    state = json.loads((out / "checkpoints" / "trainer_state.json").read_text())
    losses = [h["loss"] for h in state["log_history"] if "loss" in h]
    assert state["global_step"] == 2 and len(losses) == 2, state
    assert all(math.isfinite(x) and x > 0 for x in losses)
    # the model LLaMA-Factory saved at the end is a checkpoint transformers loads
    from training.checkpoint import load_policy

    model, _ = load_policy(out / "checkpoints", "cpu")
    assert model.config.model_type == "qwen2_vl"


# LLaMA-Factory's own argument parser on the planned YAML, without the distributed launch:
# what get_train_args returns for the fields the plan sets.
PARSE = """
import json, sys
import yaml
from llamafactory.hparams import get_train_args
config = yaml.safe_load(open(sys.argv[1]))
model, data, train, finetune, _ = get_train_args(config)
print(json.dumps({"stage": finetune.stage, "finetuning_type": finetune.finetuning_type,
                  "template": data.template, "dataset": data.dataset, "dataset_dir": data.dataset_dir,
                  "media_dir": data.media_dir, "image_max_pixels": model.image_max_pixels,
                  "max_steps": train.max_steps, "bf16": train.bf16, "output_dir": train.output_dir,
                  "deepspeed": train.deepspeed}))
"""


def _parse(tmp_path, config: dict) -> dict:
    path = tmp_path / "parse.yaml"
    path.write_text(yaml.safe_dump(config))
    return run_in_venv(LLAMAFACTORY, PARSE, tmp_path, str(path), timeout=240)


def test_one_node_cpu_yaml_parses_with_get_train_args(reasoning_dir, full_checkpoint, tmp_path):
    from trajforge.convert import convert

    req = TrainRequest("sft", reasoning_dir, str(full_checkpoint), tmp_path / "out", gpus=0, max_steps=2)
    launch = plan("llamafactory", req)
    assert launch.argv[1:4] == ["-m", "llamafactory.cli", "train"]
    assert launch.argv[4] == str(tmp_path / "out" / CONFIG) and set(launch.files) == {CONFIG}
    assert "FORCE_TORCHRUN" not in launch.env and launch.env["CUDA_VISIBLE_DEVICES"] == ""
    assert any("NOT carried" in n for n in launch.notes)  # the weights: said in the plan
    [conv] = launch.conversions
    assert (conv.format, conv.out) == ("llamafactory", tmp_path / "out" / "data")
    written = convert(reasoning_dir, "llamafactory", conv.out)
    config = yaml.safe_load(launch.files[CONFIG])
    # the dataset the YAML names is one dataset_info.json registers, and no image is shrunk
    assert config["dataset"] in json.loads((conv.out / "dataset_info.json").read_text())
    assert config["image_max_pixels"] >= written["image_max_pixels"]
    got = _parse(tmp_path, config)
    assert (got["stage"], got["finetuning_type"], got["template"]) == ("sft", "full", "qwen2_vl")
    assert got["dataset"] == [f"{written['source']['dataset']}_train"]
    assert got["dataset_dir"] == got["media_dir"] == str(conv.out)
    assert (got["max_steps"], got["bf16"], got["deepspeed"]) == (2, False, None)
    assert got["output_dir"] == str(tmp_path / "out" / "checkpoints")


def test_two_nodes_of_eight_gpus_plan_zero3_and_torchrun_env(reasoning_dir, full_checkpoint, tmp_path):
    req = TrainRequest(
        "sft",
        reasoning_dir,
        str(full_checkpoint),
        tmp_path / "out",
        gpus=8,
        nodes=2,
        max_steps=5,
        options={"node_rank": 1, "master_addr": "10.0.0.1", "master_port": 29501},
    )
    launch = plan("llamafactory", req)
    env = launch.env
    assert (env["FORCE_TORCHRUN"], env["NNODES"], env["NPROC_PER_NODE"]) == ("1", "2", "8")
    assert (env["NODE_RANK"], env["MASTER_ADDR"], env["MASTER_PORT"]) == ("1", "10.0.0.1", "29501")
    # LLaMA-Factory's launcher runs `torchrun` from PATH: the engine's own comes first
    assert env["PATH"].split(os.pathsep)[0] == os.path.dirname(launch.argv[0])
    config = yaml.safe_load(launch.files[CONFIG])
    assert config["bf16"] is True and config["deepspeed"] == str(tmp_path / "out" / DEEPSPEED)
    ds = json.loads(launch.files[DEEPSPEED])
    zero = ds["zero_optimization"]
    assert zero["stage"] == 3 and zero["stage3_gather_16bit_weights_on_model_save"] is True
    # the "auto" values are the HF Trainer's (filled from the arguments it runs with)
    assert ds["train_micro_batch_size_per_gpu"] == ds["gradient_accumulation_steps"] == "auto"
    # get_train_args refuses DeepSpeed outside a torchrun launch and needs the deepspeed
    # package (not installed on this CPU machine), and bf16 needs a GPU: the rest of the
    # YAML is checked by the parser, the ZeRO-3 file above.
    got = _parse(tmp_path, {k: v for k, v in config.items() if k not in ("deepspeed", "bf16")})
    assert (got["stage"], got["finetuning_type"], got["max_steps"]) == ("sft", "full", 5)
    with pytest.raises(EngineError, match="node_rank"):
        plan("llamafactory", TrainRequest("sft", reasoning_dir, "/m", tmp_path / "o", gpus=8, nodes=2))
    with pytest.raises(EngineError, match="trains sft"):
        plan("llamafactory", TrainRequest("rl", reasoning_dir, "/m", tmp_path / "o"))
    with pytest.raises(EngineError, match="manifest.json"):
        plan("llamafactory", TrainRequest("sft", tmp_path / "nowhere", "/m", tmp_path / "o"))
