"""The trainers on a CUDA device: fp32 master weights under bf16 autocast, fused AdamW,
gradient checkpointing, GRPO sampling and updates on the GPU.

Skipped without CUDA (CI has none); run on a GPU machine with
`python -m pytest tests/training/test_cuda.py` (benchmarks/gpu_checks.sh does, with the
GPU benchmarks). Tolerances are bf16's: autocast matmuls keep ~3 significant digits.
"""

from __future__ import annotations

import io
import re

import pytest
import torch

from tests.training.conftest import TINY_IMAGE_PIXELS
from tests.training.test_rl import _cfg as rl_config
from tests.training.test_sft import config as sft_config
from training.checkpoint import load_policy
from training.data import collate, encode_sample, iter_reasoning_samples
from training.pipes_report import StdoutReporter
from training.rl import rl_step, setup
from training.sft import train_sft

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.fixture(scope="module")
def cuda_sft(tiny_model, small_reasoning_set, tmp_path_factory):
    cfg = sft_config(
        tiny_model,
        small_reasoning_set,
        tmp_path_factory.mktemp("cuda-ckpt"),
        device="cuda",
        dtype="auto",
        gradient_checkpointing=True,
    )
    report = StdoutReporter(io.StringIO())
    metrics, model, processor = train_sft(cfg, report)
    return cfg, metrics, model, processor


def test_sft_on_cuda_trains_fp32_master_weights_under_bf16_autocast(cuda_sft, tmp_path):
    cfg, metrics, model, _ = cuda_sft
    p = next(model.parameters())
    assert p.device.type == "cuda" and p.dtype == torch.float32
    assert metrics["device"].startswith("cuda") and metrics["steps"] == 8
    assert metrics["loss_last"] < 0.5 * metrics["loss_first"], metrics["losses"]
    # The same first batch on CPU in fp32: bf16 autocast changes the loss by well under 2 %.
    cpu, _, _ = train_sft(
        cfg.model_copy(update={"device": "cpu", "max_steps": 1, "out_dir": str(tmp_path / "cpu")}),
        StdoutReporter(io.StringIO()),
    )
    assert metrics["losses"][0] == pytest.approx(cpu["losses"][0], rel=0.02)


def test_cuda_checkpoint_reloads_on_cpu_to_the_same_logits(cuda_sft, small_reasoning_set):
    _, metrics, model, processor = cuda_sft
    sample = next(iter_reasoning_samples(small_reasoning_set, "val"))
    batch = collate([encode_sample(processor, sample.json, sample.image, 1024, TINY_IMAGE_PIXELS)])
    batch.pop("labels"), batch.pop("weights")
    reloaded, _ = load_policy(metrics["checkpoint_path"], "cpu", "float32")
    tf32 = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    # cuDNN runs fp32 convolutions (the vision patch embedding) in TF32 by default: off, so
    # both sides compute in true fp32 and only summation order differs.
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    try:
        with torch.no_grad():
            on_gpu = model(**{k: v.to("cuda") for k, v in batch.items()}).logits.float().cpu()
            on_cpu = reloaded(**batch).logits
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = tf32
    diff = float((on_gpu - on_cpu).abs().max())
    assert diff < 1e-3, f"max |logit difference| {diff:.3g}"


def test_grpo_step_on_cuda_raises_the_rewarded_completion(tiny_model, small_reasoning_set, tmp_path):
    cfg = rl_config(tiny_model, small_reasoning_set, tmp_path, batch_size=8, device="cuda", dtype="auto")
    state = setup(cfg)
    assert next(state.model.parameters()).dtype == torch.float32
    samples = list(iter_reasoning_samples(small_reasoning_set, "train", "direct"))
    by_len = sorted(samples, key=lambda s: len(s.json["conversations"][1]["value"]))
    stats, roll, _ = rl_step(state, [by_len[0], by_len[-1]], 1, lambda texts, j: [1.0, 0.0, 0.0, 0.0])
    assert stats["group_success_rates"] == [0.25, 0.25]
    # Old log-probs were taken under the same autocast as the update's: on policy, ratio 1.
    assert stats["ratio_mean"] == pytest.approx(1.0, abs=2e-2)
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        after = roll.logprobs(state.model).sum(-1).float().cpu()
    delta = after - roll.old_logp.sum(-1)
    for g in range(2):
        assert delta[4 * g] > 0, delta
        assert delta[4 * g + 1 : 4 * g + 4].mean() < 0, delta


def test_compiled_blocks_train_like_eager_ones(cuda_sft, tmp_path):
    cfg, metrics, _, _ = cuda_sft
    log = io.StringIO()
    compiled, model, _ = train_sft(
        cfg.model_copy(update={"compile": True, "max_steps": 2, "out_dir": str(tmp_path / "c")}),
        StdoutReporter(log),
    )
    found = re.search(r"compiled (\d+) blocks", log.getvalue())
    blocks = sum(type(m).__name__ in model._no_split_modules for m in model.modules())
    assert found and int(found.group(1)) == blocks > 0, log.getvalue()
    assert compiled["losses"][0] == pytest.approx(metrics["losses"][0], rel=1e-2)
    assert compiled["losses"][1] < compiled["losses"][0]
