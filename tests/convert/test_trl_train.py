"""The TRL output trains: TRL's own SFTTrainer, the project's tiny Qwen2-VL, 2 real
optimiser steps on CPU on the converted set (TRL is in the `trainers` extra)."""

from __future__ import annotations

import pytest

from trajforge.convert import convert

trl = pytest.importorskip("trl", reason="the `trainers` extra (pip install -e .[trainers])")


@pytest.mark.slow
def test_sft_trainer_takes_two_optimiser_steps(reasoning_dir, tmp_path):
    import datasets
    import torch
    from transformers import AutoModelForImageTextToText

    from tests.vlm.helpers import tiny_model_path
    from trajforge.vlm.transformers_backend import load_processor

    m = convert(reasoning_dir, "trl", tmp_path / "trl")
    train = datasets.load_dataset(
        "parquet", data_files={"train": str(tmp_path / "trl" / m["data_files"]["train"])}, split="train"
    ).select_columns(["messages", "images"])
    path = tiny_model_path()
    model = AutoModelForImageTextToText.from_pretrained(path)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    args = trl.SFTConfig(
        output_dir=str(tmp_path / "run"),
        max_steps=2,
        per_device_train_batch_size=2,
        learning_rate=1e-3,
        report_to=[],
        save_strategy="no",
        logging_steps=1,
        use_cpu=True,
        max_length=None,
        dataloader_num_workers=0,
    )
    trainer = trl.SFTTrainer(
        model=model, args=args, train_dataset=train, processing_class=load_processor(path)
    )
    out = trainer.train()
    assert trainer.state.global_step == 2
    assert torch.isfinite(torch.tensor(out.training_loss))
    changed = sum(not torch.equal(before[n], p) for n, p in model.named_parameters())
    assert changed > 0
