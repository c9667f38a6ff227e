"""Offline grounding evaluation: the scorer on known answers (the breakdown by role, size,
language and kind exact), and the tiny model through the step evaluation's generation path."""

from __future__ import annotations

import json

import pytest

from synthesis.grounding_checks import iter_records
from synthesis.grounding_writer import write_grounding_set
from synthesis.set_options import SetOptions
from tests.synthesis.grounding_fixtures import build_grounding_store
from training.evaluate import offline_grounding_accuracy
from training.grounding_eval import predicted_point


@pytest.fixture(scope="module")
def gset(tmp_path_factory):
    root = tmp_path_factory.mktemp("geval")
    b = build_grounding_store(root / "curated")
    write_grounding_set(b.store, root / "set", options=SetOptions(splits=(("test", 1.0),)))
    return root / "set"


class Scripted:
    model_id = "scripted"

    def __init__(self, answer):
        self.answer = answer

    def generate(self, requests, max_new_tokens, **kw):
        return [self.answer(r.key) for r in requests]


def test_scorer_on_known_answers(gset):
    samples = {s["id"]: s for _, rec, _ in iter_records(gset) for s in rec["samples"]}
    gold = offline_grounding_accuracy(
        Scripted(lambda k: samples[k]["conversations"][2]["value"]), gset, "test", batch_size=5
    )
    assert (gold["samples"], gold["point_in_box"], gold["parse_rate"]) == (80, 1.0, 1.0)

    # Right on buttons only, elsewhere the far corner of the frame: the breakdown says so.
    def buttons(k):
        s = samples[k]
        if s["element"]["role"] == "button":
            return json.dumps({"point_2d": s["point"]})
        return "(0, 0)" if s["box"][0] > 0 or s["box"][1] > 0 else "(300, 190)"

    r = offline_grounding_accuracy(Scripted(buttons), gset, "test")
    n_buttons = sum(s["element"]["role"] == "button" for s in samples.values())
    assert r["by_role"]["button"] == {"n": n_buttons, "correct": n_buttons, "accuracy": 1.0}
    assert all(v["correct"] == 0 for k, v in r["by_role"].items() if k != "button")
    assert r["point_in_box"] == pytest.approx(n_buttons / 80)
    assert r["by_language"]["en"]["n"] == r["by_language"]["zh"]["n"] == 40
    assert sum(v["n"] for v in r["by_size_bucket"].values()) == 80
    assert r["by_kind"]["function"]["correct"] == 2  # both acted-on targets are buttons
    bad = offline_grounding_accuracy(Scripted(lambda k: "somewhere"), gset, "test", max_samples=3)
    assert (bad["samples"], bad["parse_rate"], bad["point_in_box"]) == (3, 0.0, 0.0)
    assert predicted_point('{"bbox_2d": [10, 20, 30, 40]}') == [20, 30]


def test_tiny_model_through_the_generation_path(gset):
    from tests.vlm.helpers import tiny_model_path

    r = offline_grounding_accuracy(
        tiny_model_path(),
        gset,
        "test",
        max_samples=3,
        max_new_tokens=8,
        device="cpu",
        dtype="float32",
        image_max_pixels=28 * 28 * 16,
    )
    assert r["samples"] == 3 and r["checkpoint_id"]
    assert sum(v["n"] for v in r["by_role"].values()) == 3 and 0.0 <= r["point_in_box"] <= 1.0
