"""Encoding reasoning-set samples: the prompt is not trained, weights sit on the tokens that
spell the action and the coordinates, bad samples are named, the stream shards by rank."""

from __future__ import annotations

import copy
import json
import re

import pytest
import torch

from schemas.errors import SchemaError
from tests.training.conftest import TINY_IMAGE_PIXELS
from training.data import IGNORE, collate, encode_sample, encoded_stream, iter_reasoning_samples
from trajforge.publish.shards import iter_samples, read_manifest

A_ACT, A_COORD = 2.0, 4.0


@pytest.fixture(scope="module")
def processor(tiny_model):
    from trajforge.vlm.transformers_backend import load_processor

    return load_processor(tiny_model)


@pytest.fixture(scope="module")
def samples(small_reasoning_set):
    return list(iter_reasoning_samples(small_reasoning_set, "train"))


def encode(processor, sample, **kw):
    return encode_sample(
        processor,
        sample.json,
        sample.image,
        1024,
        TINY_IMAGE_PIXELS,
        alpha_action=A_ACT,
        alpha_coord=A_COORD,
        **kw,
    )


def decoded(processor, enc, weight: float) -> str:
    ids = [
        i
        for i, w, lab in zip(enc["input_ids"].tolist(), enc["weights"].tolist(), enc["labels"].tolist())
        if w == weight and lab != IGNORE
    ]
    return processor.tokenizer.decode(ids)


def test_prompt_is_not_trained_and_the_labels_spell_the_answer(processor, samples):
    sample = next(s for s in samples if s.json["mode"] == "reason")
    enc = encode(processor, sample)
    gpt = sample.json["conversations"][-1]["value"]
    trained = enc["labels"] != IGNORE
    first = int(trained.nonzero()[0])
    assert not trained[:first].any() and trained[first:].all()  # prompt -100, then the answer
    assert (enc["weights"][:first] == 0).all()
    assert processor.tokenizer.decode(enc["labels"][first:].tolist()) == gpt + "<|im_end|>"
    # The prompt holds the screenshot's tokens and the task, not the answer.
    prompt = processor.tokenizer.decode(enc["input_ids"][:first].tolist())
    assert "<|image_pad|>" in prompt and ("Add red shoes" in prompt or "红鞋" in prompt)
    assert prompt.endswith("<|im_start|>assistant\n") and "Observation:" not in prompt
    assert enc["pixel_values"].shape[0] > 0 and enc["image_grid_thw"].shape == (1, 3)


def test_coordinate_and_action_weights_land_on_their_tokens(processor, samples):
    with_point = [s for s in samples if s.json["answer"]["point_2d"] != [-100, -100]]
    without = [s for s in samples if s.json["answer"]["point_2d"] == [-100, -100]]
    assert with_point and without
    for sample in with_point + without:
        enc = encode(processor, sample)
        answer = sample.json["answer"]
        coords = decoded(processor, enc, A_COORD)
        actions = decoded(processor, enc, A_ACT)
        if answer["point_2d"] == [-100, -100]:
            assert coords == ""
        else:  # the α_g tokens spell exactly the two numbers of point_2d
            assert re.findall(r"\d+", coords) == [str(v) for v in answer["point_2d"]], coords
        assert answer["action_type"] in actions and str(answer["value"]) in actions, actions
        assert not re.search(r"\d", re.sub(re.escape(str(answer["value"])), "", actions))
        other = decoded(processor, enc, 1.0)
        assert "action_type" in other and "point_2d" in other  # JSON keys weigh 1


def test_bad_samples_name_file_key_and_field_or_are_counted_when_skipped(processor, samples):
    good = samples[0]
    no_spans = copy.deepcopy(good.json)
    del no_spans["spans"]
    outside = copy.deepcopy(good.json)
    outside["spans"]["action"] = [[5, 10_000]]
    bad = [
        type(good)("k_nospans", no_spans, good.image, "shard-a.tar"),
        type(good)("k_outside", outside, good.image, "shard-b.tar"),
        type(good)("k_noimage", good.json, None, "shard-c.tar"),
    ]
    kw = dict(max_length=1024, image_max_pixels=TINY_IMAGE_PIXELS, alpha_action=2.0, alpha_coord=4.0)
    for sample, field in zip(bad, ("spans", "spans.action[0]", "image")):
        with pytest.raises(SchemaError) as err:
            list(encoded_stream([sample], processor, **kw))
        assert (err.value.source, err.value.record, err.value.field) == (sample.source, sample.key, field)
        assert sample.source in str(err.value) and sample.key in str(err.value)
    skipped: dict[str, int] = {}
    kept = list(encoded_stream([good, *bad], processor, skip_bad=True, skipped=skipped, **kw))
    assert len(kept) == 1 and skipped == {"spans": 1, "spans.action[0]": 1, "image": 1}
    with pytest.raises(SchemaError, match="max_length"):
        encode_sample(processor, good.json, good.image, 50, TINY_IMAGE_PIXELS)


def test_collate_pads_right_without_training_the_padding(processor, samples):
    encs = [encode(processor, s) for s in samples[:3]]
    batch = collate(encs, pad_id=7)
    lengths = [e["input_ids"].shape[0] for e in encs]
    assert batch["input_ids"].shape == (3, max(lengths)) and len(set(lengths)) > 1
    for row, n in enumerate(lengths):
        assert torch.equal(batch["input_ids"][row, :n], encs[row]["input_ids"])
        assert (batch["input_ids"][row, n:] == 7).all() and (batch["attention_mask"][row, n:] == 0).all()
        assert (batch["labels"][row, n:] == IGNORE).all() and (batch["weights"][row, n:] == 0).all()
    assert batch["image_grid_thw"].shape == (3, 3)
    assert batch["pixel_values"].shape[0] == sum(e["pixel_values"].shape[0] for e in encs)


def test_stream_filters_by_mode_and_ranks_take_disjoint_shares(small_reasoning_set, samples):
    direct = list(iter_reasoning_samples(small_reasoning_set, "train", mode="direct"))
    assert direct and all(s.json["mode"] == "direct" for s in direct)
    assert len(direct) == sum(s.json["mode"] == "direct" for s in samples)
    r0 = [s.key for s in iter_reasoning_samples(small_reasoning_set, "train", rank=0, world_size=2)]
    r1 = [s.key for s in iter_reasoning_samples(small_reasoning_set, "train", rank=1, world_size=2)]
    assert not set(r0) & set(r1) and sorted(r0 + r1) == sorted(s.key for s in samples)
    assert all(s.source.endswith(".tar") for s in samples)


def test_training_reads_through_the_loader_what_the_shards_hold(small_reasoning_set, tmp_path):
    """iter_reasoning_samples (trajforge.read.loader.read_split) gives every sample of the
    split in file order, JSON and image bytes as written; a split without shards gives none."""
    tars = {k: m for k, m in iter_samples(small_reasoning_set, "train")}
    got = list(iter_reasoning_samples(small_reasoning_set, "train"))
    assert [s.key for s in got] == list(tars)
    for s in got:
        image = next(v for ext, v in tars[s.key].items() if ext != "json")
        assert s.json == tars[s.key]["json"] and s.image == image
        assert s.source == str(small_reasoning_set / s.source.rsplit("/", 1)[-1])
    manifest = read_manifest(small_reasoning_set)
    (tmp_path / "manifest.json").write_text(
        json.dumps({**manifest, "shards": [e for e in manifest["shards"] if e["split"] != "test"]})
    )
    assert list(iter_reasoning_samples(tmp_path, "test")) == []
