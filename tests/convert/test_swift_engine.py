"""ms-swift engine (training/engines/swift.py + swift_plugin.py) in .venv-trainers: ms-swift's
own template and trainer compute trajforge's weighted loss; `trajforge train sft --engine
swift` trains the tiny model on CPU; the multi-node command parses with ms-swift's own
SftArguments."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.convert.trainer_venvs import ROOT, TRAINERS, run_in_venv
from training.data import encode_sample, iter_reasoning_samples
from training.engines import TrainRequest, plan
from training.engines.swift import tiny_model_view

# ms-swift's own pipeline: args (with the plugin), model, template, dataset, trainer; one
# batch through the trainer's compute_loss; the reference on the same logits and labels
# with the weights trajforge's own encoder gave each answer token.
STEP = """
import json, sys
import torch
sys.path.insert(0, sys.argv[1])
from training.loss import weighted_token_loss
from swift.pipelines import SwiftSft
from swift.trainers import TrainerFactory
argv, ref = json.loads(sys.argv[2]), json.loads(sys.argv[3])
pipe = SwiftSft(argv)
train, _ = pipe._prepare_dataset()
args = pipe.args
trainer = TrainerFactory.get_trainer_cls(args)(model=pipe.model, args=args.training_args,
    template=pipe.template, train_dataset=train, eval_dataset=None)
rows = [train[i] for i in range(len(train))]
rows = [r for r in rows if r["_extra_kwargs"]["id"] in ref]
batch = trainer.data_collator(rows)
trainer.model.train()
samples, n = trainer.get_batch_samples(iter([batch]), 1, torch.device("cpu"))
inputs = trainer._prepare_inputs(samples[0])
labels, scales = inputs["labels"].clone(), inputs["loss_scale"].clone()
with torch.no_grad():
    swift_loss = float(trainer.compute_loss(trainer.model, dict(inputs), num_items_in_batch=n))
    fwd = {k: v for k, v in inputs.items() if k not in ("labels", "loss_scale", "compute_loss_func")
           and (isinstance(v, torch.Tensor) or k == "logits_to_keep")}
    logits = trainer.model(**fwd).logits
# trajforge's weights on ms-swift's trained positions (the same answer tokens, checked below)
weights = torch.zeros_like(labels, dtype=torch.float32)
got = []
for i, row in enumerate(rows):
    pos = (labels[i] != -100).nonzero().flatten()
    want = ref[row["_extra_kwargs"]["id"]]
    got.append({"ids": labels[i][pos].tolist(), "scales": scales[i][pos].tolist(), "want_ids": want["ids"]})
    if len(pos) == len(want["weights"]):
        weights[i, pos] = torch.tensor(want["weights"])
ref_loss, _ = weighted_token_loss(logits, labels, weights)
plain = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]).float(),
                                          labels[:, 1:].reshape(-1), ignore_index=-100)
print(json.dumps({"swift": swift_loss, "ref": float(ref_loss), "plain": float(plain), "rows": got,
                  "n": int(n)}))
"""


def _swift_argv(model: Path, data: Path, out: Path) -> list[str]:
    launch = plan("swift", TrainRequest("sft", data, "tiny", out, gpus=0, max_steps=1))
    argv = launch.argv[2:]
    argv[argv.index("--model") + 1] = str(model)
    argv[argv.index("--dataset") + 1] = str(data / "train.jsonl")
    return argv


@pytest.mark.slow
def test_swift_trainer_computes_trajforge_weighted_loss(reasoning_dir, tmp_path, monkeypatch):
    from trajforge.convert import convert
    from trajforge.vlm.transformers_backend import load_processor

    data = tmp_path / "data"
    convert(reasoning_dir, "swift", data)
    model = tiny_model_view(tmp_path / "model")
    processor = load_processor(model)
    rows = [json.loads(x) for x in (data / "train.jsonl").read_text().splitlines()]
    with_coords = [r["id"] for r in rows if json.loads(r["spans"])["coords"]][:2]
    without = [r["id"] for r in rows if not json.loads(r["spans"])["coords"]][:1]
    keys = set(with_coords + without)
    assert len(with_coords) == 2 and without
    ref = {}
    for s in iter_reasoning_samples(reasoning_dir, "train"):
        if s.key in keys:
            enc = encode_sample(processor, s.json, s.image, max_length=4096)
            trained = enc["labels"] != -100
            ref[s.key] = {"ids": enc["labels"][trained].tolist(), "weights": enc["weights"][trained].tolist()}
    assert set(ref) == keys
    monkeypatch.setenv("TRAJFORGE_SWIFT_TOKENIZER", str(model))
    monkeypatch.setenv("ROOT_IMAGE_DIR", str(data))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    argv = _swift_argv(model, data, tmp_path / "out")
    got = run_in_venv(TRAINERS, STEP, ROOT, str(ROOT), json.dumps(argv), json.dumps(ref), timeout=600)

    assert len(got["rows"]) == 3
    for row in got["rows"]:
        assert row["ids"] == row["want_ids"]  # ms-swift trains exactly trajforge's answer tokens
    scales = sorted({s for row in got["rows"] for s in row["scales"]})
    assert scales == [1.0, 2.0, 4.0]
    assert abs(got["swift"] - got["ref"]) < 1e-5, got  # ms-swift's trainer = training.loss
    assert abs(got["swift"] - got["plain"]) > 1e-3  # and the weights change it


@pytest.mark.slow
def test_train_sft_engine_swift_trains_two_steps_on_cpu(reasoning_dir, tmp_path):
    """The CLI converts the set, lays out the tiny model and runs `swift sft` (CPU)."""
    out = tmp_path / "run"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRAJFORGE_DATA": str(tmp_path / "td")}
    cmd = [sys.executable, "-m", "trajforge.cli", "train", "sft", "--engine", "swift", "--set"]
    cmd += [str(reasoning_dir), "--model", "tiny", "--out", str(out), "--gpus", "0", "--max-steps", "2"]
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-4000:]
    assert (out / "data" / "convert_manifest.json").is_file()
    logs = [
        json.loads(x)
        for f in (out / "checkpoints").rglob("logging.jsonl")
        for x in f.read_text().splitlines()
    ]
    losses = [e["loss"] for e in logs if "loss" in e]
    final = [e for e in logs if "global_step" in e]
    assert final and final[-1]["global_step"] == 2, logs
    assert len(losses) == 2 and all(math.isfinite(float(x)) for x in losses)


PARSE = """
import json, os, sys
from swift.arguments import SftArguments
from swift.utils import parse_args
args, rest = parse_args(SftArguments, json.loads(sys.argv[1]))
print(json.dumps({"rest": rest, "deepspeed": bool(args.deepspeed), "loss_scale": args.loss_scale,
                  "loss_type": args.loss_type, "max_steps": args.max_steps,
                  "zero": (args.deepspeed or {}).get("zero_optimization", {}).get("stage")}))
"""


def test_multi_node_command_parses_with_swift_sft_arguments(tmp_path, full_checkpoint):
    req = TrainRequest(
        "sft",
        tmp_path / "set",
        str(full_checkpoint),
        tmp_path / "out",
        gpus=8,
        nodes=2,
        max_steps=5,
        options={"node_rank": 1, "master_addr": "10.0.0.1"},
    )
    launch = plan("swift", req)
    assert launch.env["NNODES"] == "2" and launch.env["NPROC_PER_NODE"] == "8"
    assert launch.env["NODE_RANK"] == "1" and launch.env["MASTER_ADDR"] == "10.0.0.1"
    assert launch.argv[1] == "sft" and launch.argv[launch.argv.index("--deepspeed") + 1] == "zero3"
    # DeepSpeed is not installed in .venv-trainers (a CPU machine): its config is checked
    # to be ms-swift's own zero3.json, the rest of the command by SftArguments.
    argv = launch.argv[2:]
    i = argv.index("--deepspeed")
    argv[argv.index("--torch_dtype") + 1] = "float32"  # bf16 validation asks for a GPU
    got = run_in_venv(TRAINERS, PARSE, ROOT, json.dumps(argv[:i] + argv[i + 2 :]))
    assert got["rest"] == [] and got["zero"] is None
    config = TRAINERS.glob("lib/python*/site-packages/swift/config/zero3.json")
    assert json.loads(next(config).read_text())["zero_optimization"]["stage"] == 3
    assert (got["loss_scale"], got["loss_type"], got["max_steps"]) == ("trajforge", "trajforge_weighted", 5)
    with pytest.raises(Exception, match="node_rank"):
        plan("swift", TrainRequest("sft", tmp_path, "/m", tmp_path / "o", gpus=8, nodes=2))
