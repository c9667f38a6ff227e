"""The tiny Qwen2-VL builds offline and loads through the Auto classes."""

from __future__ import annotations

import json
import os

import torch
from transformers import AutoImageProcessor, AutoModelForImageTextToText, AutoTokenizer

from trajforge.vlm.messages import image_part, split_images, text_part
from trajforge.vlm.tiny import MARKER, SPECIAL_TOKENS, build_tiny_vlm
from trajforge.vlm.transformers_backend import load_processor

from .helpers import screenshot, tiny_model_path


def test_builds_offline_and_loads_through_auto_classes():
    assert os.environ.get("HF_HUB_OFFLINE") == "1"  # tests/conftest.py: no network for the hub
    path = tiny_model_path()
    info = json.loads((path / MARKER).read_text())
    assert info["random_weights"] is True and info["parameters"] < 1_000_000

    tok = AutoTokenizer.from_pretrained(path)
    for special in SPECIAL_TOKENS:  # each special token is one id, never split into bytes
        assert len(tok(special, add_special_tokens=False)["input_ids"]) == 1, special
    assert (
        tok.decode(tok('任务：加入购物车 {"success": true}')["input_ids"])
        == '任务：加入购物车 {"success": true}'
    )

    model = AutoModelForImageTextToText.from_pretrained(path)
    assert type(model).__name__ == "Qwen2VLForConditionalGeneration"
    assert model.config.text_config.hidden_size == 64 and model.config.text_config.num_hidden_layers == 2
    assert model.config.vision_config.depth == 2
    assert model.config.image_token_id == tok.convert_tokens_to_ids("<|image_pad|>")
    assert AutoImageProcessor.from_pretrained(path, backend="pil").patch_size == 14

    proc = load_processor(path)
    messages, images = split_images(
        [{"role": "user", "content": [text_part("Look:"), image_part(screenshot(300, 200, "x"))]}]
    )
    prompt = proc.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert prompt.endswith("<|im_start|>assistant\n")
    assert "<|vision_start|><|image_pad|><|vision_end|>" in prompt
    enc = proc(text=[prompt], images=images, return_tensors="pt")
    # 300x200 is scaled to fit 112x112 pixels: a 6x8 grid of 14-pixel patches -> 12 tokens after the 2x2 merge.
    t, h, w = enc["image_grid_thw"][0].tolist()
    n_image_tokens = int((enc["input_ids"] == model.config.image_token_id).sum())
    assert n_image_tokens == t * h * w // 4 and h * w * 14 * 14 <= 112 * 112
    with torch.no_grad():
        logits = model(**enc).logits
    assert logits.shape[-1] == model.config.text_config.vocab_size and torch.isfinite(logits).all()


def test_build_is_idempotent_and_rebuilds_a_half_built_dir(tmp_path):
    path = tiny_model_path()
    stamp = (path / "model.safetensors").stat().st_mtime_ns
    assert build_tiny_vlm(path) == path
    assert (path / "model.safetensors").stat().st_mtime_ns == stamp  # not rebuilt

    half = tmp_path / "tiny"
    half.mkdir()
    (half / "config.json").write_text("{")  # an interrupted build: no marker
    build_tiny_vlm(half)
    assert (half / MARKER).exists()
    # Same seed, same weights: the rebuilt model is byte-identical to the first one.
    assert (half / "model.safetensors").read_bytes() == (path / "model.safetensors").read_bytes()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tiny.")]  # no temporary left
