"""The trainers' own data loaders read trajforge's converted sets: LLaMA-Factory, ms-swift
and verl run in .venv-trainers (scripts/setup_trainers.sh; they pin transformers/datasets
versions the main .venv cannot take), as subprocesses over outputs converted here."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from trajforge.convert import convert

ROOT = Path(__file__).resolve().parents[2]
VPY = ROOT / ".venv-trainers" / "bin" / "python"


def run_in_trainers(script: str, cwd: Path, *args: str) -> dict:
    if not VPY.exists():
        pytest.fail(f"{VPY} is missing: run scripts/setup_trainers.sh (make test runs it)")
    p = subprocess.run([str(VPY), "-c", textwrap.dedent(script), *args], cwd=cwd,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-4000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


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
import json, sys
from omegaconf import OmegaConf
from transformers import AutoTokenizer, Qwen2VLImageProcessor, Qwen2VLProcessor
from verl.utils.dataset.rl_dataset import RLHFDataset
# image-only (the video processor needs torchvision, not installed): the slow PIL processor
class ImageOnly(Qwen2VLProcessor):
    def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kw):
        super().__init__(image_processor, tokenizer, None, chat_template=chat_template, **kw)
tok = AutoTokenizer.from_pretrained(sys.argv[2])
proc = ImageOnly(Qwen2VLImageProcessor.from_pretrained(sys.argv[2]), tok, chat_template=tok.chat_template)
cfg = OmegaConf.create({"prompt_key": "prompt", "image_key": "images", "max_prompt_length": 8192,
                        "filter_overlong_prompts": False, "truncation": "error",
                        "return_raw_chat": False, "cache_dir": sys.argv[3]})
ds = RLHFDataset(data_files=[sys.argv[1]], tokenizer=proc.tokenizer, config=cfg, processor=proc)
import asyncio
items = [ds[i] for i in range(len(ds))]
# verl 0.9 items carry raw_prompt; its AgentLoop tokenises them as RLHFDataset documents
ids = []
for it in items:
    # (its process_vision_info needs qwen_vl_utils -> torchvision: the chat text only,
    # whose image placeholder is one <|image_pad|> before the processor expands it)
    text = proc.apply_chat_template(it["raw_prompt"], tokenize=False, add_generation_prompt=True)
    ids.append(tok(text, return_tensors="pt")["input_ids"][0])
image_id = proc.tokenizer.convert_tokens_to_ids("<|image_pad|>")
print(json.dumps({"n": len(ds),
    "input_ids": all(int(x.numel()) > 0 for x in ids),
    "image_tokens": all(int((x == image_id).sum()) > 0 for x in ids),
    "ground_truth": [it["reward_model"]["ground_truth"] for it in items]}))
"""


def test_verl_rlhf_dataset_tokenises_the_parquet(reasoning_dir, tmp_path):
    from tests.vlm.helpers import tiny_model_path

    m = convert(reasoning_dir, "verl", tmp_path / "verl")
    import pandas as pd

    df = pd.read_parquet(tmp_path / "verl" / "train.parquet")
    got = run_in_trainers(VERL, tmp_path, str(tmp_path / "verl" / "train.parquet"),
                          str(tiny_model_path()), str(tmp_path / "cache"))
    assert got["n"] == m["per_split"]["train"] == len(df) > 0
    assert got["input_ids"] and got["image_tokens"]
    assert got["ground_truth"] == [r["ground_truth"] for r in df["reward_model"]]
