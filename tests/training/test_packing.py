"""Padding-free packing (training.packing), the sample cache (training.sample_cache), the
background prefetch and fp32 master weights, on the tiny Qwen2-VL and the small set.

Packed and padded batches of the same samples give the same weighted loss (to 1e-5) and
gradients; a packed sample's logits are its logits alone (attention does not cross
samples), while the same row without the packed positions differs; the M-RoPE positions
are the model's own; the builtin loop and the TRL engine train packed rows; the cache
returns the collator's bytes and its key moves with the processor and the options."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch

from tests.training.conftest import TINY_IMAGE_PIXELS
from training.checkpoint import load_policy
from training.config import SFTConfig, TrlSFTConfig
from training.data import collate, encode_sample, iter_reasoning_samples
from training.data_feed import Prefetcher
from training.loss import weighted_token_loss
from training.packing import bins, mrope_positions, pack, spatial_merge_size
from training.precision import MasterWeightsAdamW, adamw
from training.sample_cache import cache_key, cached_encodings, read_entry


@pytest.fixture(scope="module")
def policy(tiny_model):
    torch.manual_seed(0)
    model, processor = load_policy(tiny_model, "cpu", "float32", False)
    return model.train(), processor


@pytest.fixture(scope="module")
def encodings(policy, small_reasoning_set):
    _, processor = policy
    samples = list(iter_reasoning_samples(small_reasoning_set, "train"))[:3]
    return [encode_sample(processor, s.json, s.image, 1024, TINY_IMAGE_PIXELS) for s in samples]


def _loss_and_grads(model, batch):
    model.zero_grad(set_to_none=True)
    inputs = {k: v for k, v in batch.items() if k not in ("labels", "weights")}
    logits = model(**inputs, use_cache=False).logits
    loss, stats = weighted_token_loss(logits, batch["labels"], batch["weights"])
    loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return float(loss.detach()), stats, grads, logits.detach()


def test_mrope_positions_are_the_models_own(policy, encodings):
    model, processor = policy
    merge = spatial_merge_size(processor)
    assert merge == spatial_merge_size(model) == 2
    for e in encodings:
        ref, _ = model.model.get_rope_index(
            e["input_ids"][None], e["mm_token_type_ids"][None], e["image_grid_thw"]
        )
        assert torch.equal(mrope_positions(e["mm_token_type_ids"], e["image_grid_thw"], merge), ref[:, 0])
    # an image's tokens share the temporal row and walk its merged grid
    e = encodings[0]
    image = e["mm_token_type_ids"] == 1
    pos = mrope_positions(e["mm_token_type_ids"], e["image_grid_thw"], merge)[:, image]
    t, h, w = (int(x) for x in e["image_grid_thw"][0])
    assert pos[0].unique().numel() == 1 and pos[1].unique().numel() == h // merge
    assert pos[2].unique().numel() == w // merge


def test_packed_loss_and_gradients_equal_the_padded_batch(policy, encodings):
    model, processor = policy
    padded = collate(encodings, processor.tokenizer.pad_token_id or 0)
    packed = pack(encodings, spatial_merge_size(processor))
    lengths = [e["input_ids"].shape[0] for e in encodings]
    assert len(set(lengths)) > 1, "the samples must differ in length for padding to exist"
    assert packed["input_ids"].shape == (1, sum(lengths)) and "attention_mask" not in packed
    assert packed["position_ids"].shape == (4, 1, sum(lengths))
    assert padded["input_ids"].numel() > packed["input_ids"].numel()  # the padding is gone

    loss_pad, stats_pad, grads_pad, _ = _loss_and_grads(model, padded)
    loss_pack, stats_pack, grads_pack, logits_pack = _loss_and_grads(model, packed)
    print(f"padded {loss_pad:.7f} packed {loss_pack:.7f}")
    assert loss_pack == pytest.approx(loss_pad, abs=1e-5)
    assert stats_pack["tokens"] == stats_pad["tokens"] and stats_pack["weight"] == stats_pad["weight"]
    assert grads_pack.keys() == grads_pad.keys()
    worst = max(
        float((grads_pack[n] - grads_pad[n]).abs().max() / grads_pad[n].abs().max()) for n in grads_pad
    )
    assert worst < 1e-3, f"gradients differ by {worst:.2e} of their scale"

    # the second sample's logits in the packed row are its logits alone
    alone = pack([encodings[1]], spatial_merge_size(processor))
    _, _, _, logits_alone = _loss_and_grads(model, alone)
    start = lengths[0]
    assert torch.allclose(logits_pack[0, start : start + lengths[1]], logits_alone[0], atol=1e-4)

    # without the packed positions (a plain causal row) the samples attend to each other
    crossed = {k: v for k, v in packed.items() if k != "position_ids"}
    crossed["attention_mask"] = torch.ones_like(packed["input_ids"])
    loss_crossed, _, _, _ = _loss_and_grads(model, crossed)
    assert abs(loss_crossed - loss_pad) > 1e-3


def test_bins_respect_the_budget_and_the_sample_cap(encodings):
    lengths = [int(e["input_ids"].shape[0]) for e in encodings]
    budget = max(lengths[0] + lengths[1], lengths[2])
    grouped = [[int(e["input_ids"].shape[0]) for e in b] for b in bins(encodings, budget)]
    assert grouped == [lengths[:2], lengths[2:]]
    assert [len(b) for b in bins(encodings, 10**6, max_samples=2)] == [2, 1]
    with pytest.raises(ValueError, match="exceeds the packing budget of 10 tokens"):
        list(bins(encodings, 10))


def _sft_cfg(tiny_model, shards, out, **kw) -> SFTConfig:
    base = dict(
        model_path=str(tiny_model),
        shards=str(shards),
        out_dir=str(out),
        device="cpu",
        max_steps=2,
        batch_size=3,
        lr=1e-3,
        max_length=1024,
        image_max_pixels=TINY_IMAGE_PIXELS,
        max_samples=6,
    )
    return SFTConfig(**{**base, **kw})


def test_the_cache_returns_the_collators_bytes_and_its_key_moves(
    policy, tiny_model, small_reasoning_set, tmp_path
):
    _, processor = policy
    cfg = _sft_cfg(tiny_model, small_reasoning_set, tmp_path, cache_dir=str(tmp_path / "cache"))
    skipped: dict[str, int] = {}
    entry, built = cached_encodings(cfg, processor, skipped)
    again, built_again = cached_encodings(cfg, processor, skipped)
    assert built and not built_again and again == entry
    cached = list(read_entry(entry))
    samples = list(iter_reasoning_samples(small_reasoning_set, "train"))[: cfg.max_samples]
    assert len(cached) == len(samples) == 6
    for sample, got in zip(samples, cached):
        want = encode_sample(processor, sample.json, sample.image, cfg.max_length, cfg.image_max_pixels)
        assert got.keys() == want.keys()
        for k in want:
            assert got[k].dtype == want[k].dtype and got[k].shape == want[k].shape
            assert got[k].numpy().tobytes() == want[k].numpy().tobytes(), k
    pad = processor.tokenizer.pad_token_id or 0
    for k, v in collate(cached[:3], pad).items():
        assert torch.equal(
            v,
            collate(
                [encode_sample(processor, s.json, s.image, 1024, TINY_IMAGE_PIXELS) for s in samples[:3]], pad
            )[k],
        )

    key = cache_key(cfg, processor)
    assert cache_key(cfg.model_copy(update={"alpha_coord": 5.0}), processor) != key
    assert cache_key(cfg.model_copy(update={"split": "val"}), processor) != key
    assert cache_key(cfg, processor, rank=1, world_size=2) != key
    other = copy.deepcopy(processor)
    other.image_processor.max_pixels = TINY_IMAGE_PIXELS * 2
    assert cache_key(cfg, other) != key
    assert cache_key(cfg.model_copy(update={"lr": 1.0}), processor) == key  # not a data option


def test_builtin_loop_trains_packed_rows_from_the_cache(tiny_model, small_reasoning_set, tmp_path):
    from training.sft import train_sft

    common = dict(cache_dir=str(tmp_path / "cache"), prefetch_batches=2)
    padded, _, _ = train_sft(_sft_cfg(tiny_model, small_reasoning_set, tmp_path / "a", **common))
    packed, _, _ = train_sft(
        _sft_cfg(tiny_model, small_reasoning_set, tmp_path / "b", pack_tokens=4096, **common)
    )
    # the same samples, the same parameters at step 1: the same first loss
    assert packed["loss_first"] == pytest.approx(padded["loss_first"], abs=1e-5)
    assert packed["tokens"] == padded["tokens"]  # real tokens both; the padded rows had padding too
    assert packed["samples"] == padded["samples"] == 6
    assert packed["checkpoint_id"] != padded["checkpoint_id"]
    for m in (padded, packed):
        assert 0.0 <= m["data_wait_share"] < 1.0 and m["data_wait_s"] >= 0.0


def test_the_trl_collator_packs_a_micro_batch(policy, tiny_model, small_reasoning_set, tmp_path):
    from training.engines.trl_sft import SpanWeightCollator, row_sample
    from trajforge.convert import convert

    _, processor = policy
    data = tmp_path / "trl"
    convert(small_reasoning_set, "trl", data)
    import datasets

    rows = datasets.load_dataset("parquet", data_files=str(data / "data" / "train.parquet"), split="train")
    rows = rows.cast_column("images", datasets.List(datasets.Image(decode=False)))
    rows = [rows[i] for i in range(3)]
    cfg = TrlSFTConfig(
        model_path=str(tiny_model),
        shards=str(small_reasoning_set),
        data_dir=str(data),
        device="cpu",
        max_length=1024,
        image_max_pixels=TINY_IMAGE_PIXELS,
        pack_tokens=4096,
    )
    batch = SpanWeightCollator(processor, cfg, "rows")(rows)
    want = pack(
        [encode_sample(processor, *row_sample(r), 1024, TINY_IMAGE_PIXELS) for r in rows],
        spatial_merge_size(processor),
    )
    assert batch.keys() == want.keys() and all(torch.equal(batch[k], want[k]) for k in want)
    small = cfg.model_copy(update={"pack_tokens": 100})
    with pytest.raises(ValueError, match="over pack_tokens=100"):
        SpanWeightCollator(processor, small, "rows")(rows)


def test_prefetch_keeps_order_and_raises_where_the_source_did():
    assert list(Prefetcher(iter(range(50)), 3)) == list(range(50))

    def broken():
        yield 1
        raise ValueError("bad sample at 2")

    feed = Prefetcher(broken(), 2)
    assert next(feed) == 1
    with pytest.raises(ValueError, match="bad sample at 2"):
        next(feed)
    feed.close()


def test_master_weights_keep_updates_that_bf16_in_place_loses():
    torch.manual_seed(0)
    w = torch.nn.Parameter(torch.full((64,), 0.02).bfloat16())

    class Cfg:
        lr, weight_decay = 1e-5, 0.0

    opt = adamw([w], Cfg, "cpu", master_weights=True)
    assert isinstance(opt, MasterWeightsAdamW)
    plain_w = torch.nn.Parameter(w.detach().clone())
    plain = adamw([plain_w], Cfg, "cpu")
    for _ in range(40):
        for p, o in ((w, opt), (plain_w, plain)):
            p.grad = torch.ones_like(p)
            o.step()
            o.zero_grad()
    master = opt.param_groups[0]["params"][0]
    assert master.dtype == torch.float32
    assert float(master[0]) == pytest.approx(0.02 - 40 * 1e-5, rel=1e-3)  # every update kept
    assert float(plain_w[0]) == pytest.approx(0.02, rel=1e-3)  # each one rounded away in bf16
    assert float(w[0]) < float(plain_w[0])  # the bf16 weights follow their master copy
    assert w.grad is None
    assert isinstance(adamw([torch.nn.Parameter(torch.ones(2))], Cfg, "cpu", True), torch.optim.AdamW)


def test_liger_line_says_what_ran(policy):
    from training.kernels import apply_liger, liger_available

    model, _ = policy
    line = apply_liger(model)
    assert line.startswith("liger kernels: ")
    assert ("not installed" in line) == (not liger_available())
    assert apply_liger(model, enabled=False) == "liger kernels: off (liger_kernels: false)"


def test_packing_config_is_checked(tiny_model, small_reasoning_set, tmp_path):
    with pytest.raises(ValueError, match="pack_tokens"):
        _sft_cfg(tiny_model, small_reasoning_set, tmp_path, pack_tokens=0)
    plain = _sft_cfg(tiny_model, small_reasoning_set, tmp_path)
    assert "pack_tokens" not in plain.identity() and "master_weights" not in plain.identity()
    assert _sft_cfg(tiny_model, small_reasoning_set, tmp_path, pack_tokens=64).identity()["pack_tokens"] == 64
    assert Path(plain.out_dir) == tmp_path


def test_checkpointing_thinned_to_every_other_layer(tiny_model):
    from training.kernels import thin_checkpointing

    model, _ = load_policy(tiny_model, "cpu", "float32", gradient_checkpointing=True)
    kept, layers = thin_checkpointing(model, 1)
    assert kept == layers >= 2
    kept, layers = thin_checkpointing(model, 2)
    assert kept == (layers + 1) // 2
    plain, _ = load_policy(tiny_model, "cpu", "float32", gradient_checkpointing=False)
    assert thin_checkpointing(plain, 2)[0] == 0


def test_trained_positions_loss_equals_the_full_logits_loss_packed_or_not(policy, encodings):
    from training.loss import trained_positions_loss

    model, processor = policy
    for batch in (collate(encodings, processor.tokenizer.pad_token_id or 0), pack(encodings, 2)):
        inputs = {k: v for k, v in batch.items() if k not in ("labels", "weights")}
        full, _, grads_full, _ = _loss_and_grads(model, batch)
        model.zero_grad(set_to_none=True)
        loss, stats = trained_positions_loss(model, inputs, batch["labels"], batch["weights"])
        loss.backward()
        assert float(loss) == pytest.approx(full, abs=1e-5) and stats["tokens"] > 0
        for n, p in model.named_parameters():
            if p.grad is not None:
                assert torch.allclose(p.grad, grads_full[n], atol=1e-5, rtol=1e-3), n
