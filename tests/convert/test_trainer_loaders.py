"""The trainers' own data loaders read trajforge's converted sets, as subprocesses over outputs
converted here: ms-swift and verl in .venv-trainers (scripts/setup_trainers.sh), LLaMA-Factory
in .venv-llamafactory (scripts/setup_llamafactory.sh); they pin transformers/datasets/torch
versions the main .venv cannot take."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image

from tests.convert.trainer_venvs import LLAMAFACTORY, TRAINERS, run_in_venv
from trajforge.convert import convert


def run_in_trainers(script: str, cwd: Path, *args: str) -> dict:
    return run_in_venv(TRAINERS, script, cwd, *args)


SWIFT = """
import json, sys
from swift import load_dataset
out = {}
for path in sys.argv[1:]:
    train, _ = load_dataset([path], split_dataset_ratio=0.0)
    rows = list(train)
    out[path] = {"rows": len(rows), "messages": all(r["messages"] for r in rows),
                 "images": sum(len(r.get("images") or []) for r in rows),
                 "objects": sum(1 for r in rows if r.get("objects"))}
print(json.dumps(out))
"""


def test_swift_load_dataset_reads_both_sets(reasoning_dir, grounding_dir, tmp_path):
    paths, want = [], {}
    for name, d in (("r", reasoning_dir), ("g", grounding_dir)):
        m = convert(d, "swift", tmp_path / name)
        split = "train" if "train" in m["per_split"] else sorted(m["per_split"])[0]
        p = str(tmp_path / name / f"{split}.jsonl")
        paths.append(p)
        want[p] = (name, m["per_split"][split])
    got = run_in_trainers(SWIFT, tmp_path, *paths)
    for p, (name, n) in want.items():
        assert got[p]["rows"] == n > 0 and got[p]["messages"]
        assert got[p]["images"] >= n
        if name == "g":
            assert got[p]["objects"] == n


VERL = """
import asyncio, json, sys
from omegaconf import OmegaConf
from transformers import AutoProcessor
from verl.utils.dataset.rl_dataset import RLHFDataset
proc = AutoProcessor.from_pretrained(sys.argv[2])
cfg = OmegaConf.create({"prompt_key": "prompt", "image_key": "images", "max_prompt_length": 8192,
                        "filter_overlong_prompts": False, "truncation": "error",
                        "return_raw_chat": False, "cache_dir": sys.argv[3]})
ds = RLHFDataset(data_files=[sys.argv[1]], tokenizer=proc.tokenizer, config=cfg, processor=proc)
image_id = proc.tokenizer.convert_tokens_to_ids("<|image_pad|>")
patch, merge = proc.image_processor.patch_size, proc.image_processor.merge_size
out = []
for i in range(len(ds)):
    it = ds[i]
    # what verl's AgentLoop does with an item: its images through RLHFDataset.process_vision_info
    # (qwen_vl_utils), the chat template, then the processor expands the image pads
    images, _ = asyncio.run(RLHFDataset.process_vision_info(it["raw_prompt"], patch, cfg))
    text = proc.apply_chat_template(it["raw_prompt"], tokenize=False, add_generation_prompt=True)
    enc = proc(text=[text], images=images, return_tensors="pt")
    t, h, w = (int(x) for x in enc["image_grid_thw"][0])
    out.append({"pads": int((enc["input_ids"][0] == image_id).sum()),
                "grid_pads": t * h * w // merge ** 2, "fed": [w * patch, h * patch],
                "ground_truth": it["reward_model"]["ground_truth"]})
print(json.dumps(out))
"""


def test_verl_rlhf_dataset_feeds_the_image_in_the_ground_truths_frame(
    reasoning_dir, full_checkpoint, tmp_path
):
    """verl's RLHFDataset and its AgentLoop's vision path (qwen_vl_utils' fetch_image, its
    smart_resize with the default caps) on the verl parquet: the image expanded into its pads,
    fed at the stored size (the frame the ground truth's pixels are in), ground truths as
    written."""
    import io

    import pandas as pd
    from PIL import Image

    m = convert(reasoning_dir, "verl", tmp_path / "verl")
    df = pd.read_parquet(tmp_path / "verl" / "train.parquet")
    got = run_in_trainers(
        VERL,
        tmp_path,
        str(tmp_path / "verl" / "train.parquet"),
        str(full_checkpoint),
        str(tmp_path / "cache"),
    )
    assert len(got) == m["per_split"]["train"] == len(df) > 0
    for g, (_, row) in zip(got, df.iterrows()):
        assert g["pads"] == g["grid_pads"] > 0
        stored = Image.open(io.BytesIO(row["images"][0]["bytes"])).size
        assert g["fed"] == list(stored)
        assert g["ground_truth"] == row["reward_model"]["ground_truth"]
        point = json.loads(row["reward_model"]["ground_truth"]).get("point")
        if point and point != [-100, -100]:
            assert 0 <= point[0] < stored[0] and 0 <= point[1] < stored[1]


LLAMAFACTORY_DATA = """
import json, sys
from llamafactory.data import get_dataset, get_template_and_fix_tokenizer
from llamafactory.extras.constants import IGNORE_INDEX
from llamafactory.hparams import get_train_args
from llamafactory.model import load_tokenizer
model, data_dir, dataset, out, max_pixels = sys.argv[1:6]
model_args, data_args, training_args, _, _ = get_train_args(dict(
    model_name_or_path=model, stage="sft", do_train=True, finetuning_type="full",
    template="qwen2_vl", dataset=dataset, dataset_dir=data_dir, media_dir=data_dir,
    image_max_pixels=int(max_pixels), cutoff_len=4096, output_dir=out, overwrite_cache=True,
    report_to="none"))
modules = load_tokenizer(model_args)
tok = modules["tokenizer"]
template = get_template_and_fix_tokenizer(tok, data_args)
ds = get_dataset(template, model_args, data_args, training_args, stage="sft", **modules)
pad = tok.convert_tokens_to_ids("<|image_pad|>")
rows = []
for ex in ds["train_dataset"]:
    ids, labels = ex["input_ids"], ex["labels"]
    first = next(i for i, x in enumerate(labels) if x != IGNORE_INDEX)
    decode = lambda t: tok.decode(t, skip_special_tokens=False, clean_up_tokenization_spaces=False)
    rows.append({"images": ex["images"], "image_pads": ids.count(pad),
                 "prompt_masked": all(x == IGNORE_INDEX for x in labels[:first]),
                 "answer_labels_are_inputs": labels[first:] == ids[first:],
                 "prompt": decode(ids[:first]), "labels": decode(labels[first:])})
print(json.dumps({"processor": type(modules["processor"]).__name__, "rows": rows}))
"""


def _image_tokens(processor, path: Path) -> int:
    """<|image_pad|> tokens Qwen2-VL's processor expands this image to: its patch grid
    (t, h, w) after smart_resize, merged merge_size x merge_size."""
    with Image.open(path) as im:
        grid = processor.image_processor(images=[im.convert("RGB")])["image_grid_thw"][0]
    return int(grid.prod()) // processor.image_processor.merge_size**2


@pytest.mark.parametrize("which", ["reasoning", "grounding"])
def test_llamafactory_tokenises_the_set_with_qwen2_vl(
    which, reasoning_dir, grounding_dir, full_checkpoint, tmp_path
):
    """LLaMA-Factory's own data path (hparams, load_tokenizer, the qwen2_vl template,
    get_dataset for sft) over the converted folder, checked against the rows it was given."""
    from trajforge.vlm.transformers_backend import load_processor

    out = tmp_path / "lf"
    m = convert(reasoning_dir if which == "reasoning" else grounding_dir, "llamafactory", out)
    split = "train" if "train" in m["per_split"] else sorted(m["per_split"])[0]
    dataset = f"{m['source']['dataset']}_{split}"
    assert dataset in json.loads((out / "dataset_info.json").read_text())
    rows = [json.loads(line) for line in (out / f"{split}.jsonl").read_text().splitlines()]
    got = run_in_venv(
        LLAMAFACTORY,
        LLAMAFACTORY_DATA,
        tmp_path,
        str(full_checkpoint),
        str(out),
        dataset,
        str(tmp_path / "run"),
        str(m["image_max_pixels"]),
        timeout=240,
    )
    assert got["processor"] == "Qwen2VLProcessor"
    assert len(got["rows"]) == len(rows) == m["per_split"][split] > 0

    # The YAML's image_max_pixels (the manifest's): LLaMA-Factory must not shrink any image.
    assert m["image_max_pixels"] == max(
        w * h for w, h in (Image.open(p).size for p in (out / "images").iterdir())
    )
    processor = load_processor(full_checkpoint)  # this venv's transformers: an independent count
    counts = {}
    for row, ex in zip(rows, got["rows"]):
        msgs = {msg["role"]: msg["content"] for msg in row["messages"]}
        [image] = row["images"]
        # media_dir resolved the relative path to the converted image (not dropped).
        assert ex["images"] == [str(out / image)], row["id"]
        n = counts.setdefault(image, _image_tokens(processor, out / image))
        assert ex["image_pads"] == n > 0, row["id"]
        vision = "<|vision_start|>" + "<|image_pad|>" * n + "<|vision_end|>"
        assert ex["prompt"] == (
            f"<|im_start|>system\n{msgs['system']}<|im_end|>\n"
            f"<|im_start|>user\n{msgs['user'].replace('<image>', vision)}"
            "<|im_end|>\n<|im_start|>assistant\n"
        ), row["id"]
        assert ex["prompt_masked"] and ex["answer_labels_are_inputs"], row["id"]
        # The trained tokens are exactly the set's answer, then the turn's end.
        assert ex["labels"] == msgs["assistant"] + "<|im_end|>\n", row["id"]
        assert (f'"action_type": "{row["action_type"]}"' if which == "reasoning" else '"bbox_2d": [') in ex[
            "labels"
        ], row["id"]


LLAMAFACTORY_TRAIN = """
import json, sys
from llamafactory.train.tuner import run_exp
model, data_dir, dataset, out, max_pixels = sys.argv[1:6]
run_exp(dict(model_name_or_path=model, stage="sft", do_train=True, finetuning_type="full",
             template="qwen2_vl", dataset=dataset, dataset_dir=data_dir, media_dir=data_dir,
             image_max_pixels=int(max_pixels), cutoff_len=1024, max_samples=4,
             per_device_train_batch_size=2, max_steps=2, learning_rate=1e-4, logging_steps=1,
             save_strategy="no", report_to="none", bf16=False, fp16=False, plot_loss=False,
             disable_gradient_checkpointing=True, overwrite_cache=True, seed=0, output_dir=out))
print(json.dumps({"done": True}))
"""


def test_llamafactory_trains_two_steps_on_the_set(reasoning_dir, full_checkpoint, tmp_path):
    """LLaMA-Factory's own sft run (run_exp: its data path, collator and Trainer) on the
    converted set with the tiny Qwen2-VL, full fine-tuning on CPU for 2 optimiser steps."""
    import math

    m = convert(reasoning_dir, "llamafactory", tmp_path / "lf")
    run = tmp_path / "run"
    run_in_venv(
        LLAMAFACTORY,
        LLAMAFACTORY_TRAIN,
        tmp_path,
        str(full_checkpoint),
        str(tmp_path / "lf"),
        f"{m['source']['dataset']}_train",
        str(run),
        str(m["image_max_pixels"]),
        timeout=300,
    )
    state = json.loads((run / "trainer_state.json").read_text())
    losses = [h["loss"] for h in state["log_history"] if "loss" in h]
    assert state["global_step"] == 2 and len(losses) == 2
    assert all(math.isfinite(x) and x > 0 for x in losses)
