"""No silent template training: the set states each thought backend's share, and a full
training run (any model but the tiny random-weights one) on reason-then-act samples
refuses template-written thoughts unless the config says allow_template_thoughts."""

from __future__ import annotations

import io
import json
import shutil

import pytest

from tests.training.conftest import TINY_IMAGE_PIXELS
from training.checkpoint import is_tiny_random_model
from training.config import SFTConfig
from training.data import TemplateThoughtsError, thought_backend_share
from training.pipes_report import StdoutReporter
from training.sft import run_sft, thought_gate


@pytest.fixture(scope="module")
def full_model(tiny_model, tmp_path_factory):
    """The tiny model's files without its random-weights marker: to the gate, a real model."""
    out = tmp_path_factory.mktemp("full") / "model"
    shutil.copytree(tiny_model, out, ignore=shutil.ignore_patterns("tiny_vlm.json"))
    return out


def _cfg(model, shards, tmp_path, **kw) -> SFTConfig:
    base = dict(
        model_path=str(model),
        shards=str(shards),
        out_dir=str(tmp_path / "ckpt"),
        device="cpu",
        dtype="float32",
        max_steps=1,
        batch_size=1,
        lr=1e-3,
        max_length=1024,
        image_max_pixels=TINY_IMAGE_PIXELS,
        max_samples=2,
        mode_filter="reason",
        skip_bad_samples=True,
    )
    return SFTConfig(**{**base, **kw})


def test_the_manifest_states_each_thought_backends_share(small_reasoning_set):
    manifest = json.loads((small_reasoning_set / "manifest.json").read_text())
    assert manifest["summary"]["thought_backend_share"] == {"template": 1.0}
    assert thought_backend_share(small_reasoning_set) == {"template": 1.0}


def test_share_of_a_set_written_before_it_was_stated(small_reasoning_set, tmp_path):
    old = tmp_path / "old"
    shutil.copytree(small_reasoning_set, old)
    manifest = json.loads((old / "manifest.json").read_text())
    del manifest["summary"]["thought_backend_share"]  # counts only: from the counts
    (old / "manifest.json").write_text(json.dumps(manifest))
    assert thought_backend_share(old) == {"template": 1.0}
    del manifest["summary"]  # no summary: from the samples
    (old / "manifest.json").write_text(json.dumps(manifest))
    assert thought_backend_share(old) == {"template": 1.0}


def test_full_run_refuses_template_thoughts(full_model, small_reasoning_set, tmp_path):
    assert not is_tiny_random_model(full_model)
    with pytest.raises(TemplateThoughtsError, match=r"100% of the set's thoughts .* template"):
        run_sft(_cfg(full_model, small_reasoning_set, tmp_path), StdoutReporter(io.StringIO()))
    with pytest.raises(TemplateThoughtsError, match="allow_template_thoughts"):
        run_sft(
            _cfg(full_model, small_reasoning_set, tmp_path, mode_filter=None), StdoutReporter(io.StringIO())
        )
    assert not (tmp_path / "ckpt").exists()  # refused before anything was trained or written
    # direct-act samples carry no thought: nothing template-written is learnt
    gate = thought_gate(_cfg(full_model, small_reasoning_set, tmp_path, mode_filter="direct"))
    assert gate["template_thoughts"] == "not trained" and gate["template_share"] == 1.0


def test_full_run_trains_template_thoughts_when_the_config_allows(full_model, small_reasoning_set, tmp_path):
    cfg = _cfg(full_model, small_reasoning_set, tmp_path, allow_template_thoughts=True)
    report = StdoutReporter(io.StringIO())
    m = run_sft(cfg, report)
    assert m["steps"] == 1 and m["reused"] is False
    assert m["template_thoughts"] == "allowed" and m["thought_backend_share"] == {"template": 1.0}
    assert "warning: training on template-written thoughts (100%" in report.stream.getvalue()
    # the flag gates the run, it is not part of what was trained: same checkpoint id
    assert cfg.identity() == _cfg(full_model, small_reasoning_set, tmp_path).identity()


def test_tiny_model_is_not_a_full_run(tiny_model, small_reasoning_set, tmp_path):
    """The tiny random-weights model (make demo, the tests, Dagster's tiny mode) proves the
    plumbing: it may train template thoughts, and says that it does; so may its checkpoints."""
    assert is_tiny_random_model(tiny_model)
    gate = thought_gate(_cfg(tiny_model, small_reasoning_set, tmp_path))
    assert gate == {
        "thought_backend_share": {"template": 1.0},
        "template_share": 1.0,
        "template_thoughts": "tiny model",
    }
    ckpt = tmp_path / "sft-000000000000"  # a checkpoint trained from it (its metrics name the base)
    ckpt.mkdir()
    (ckpt / "metrics.json").write_text(json.dumps({"base_model": str(tiny_model)}))
    assert is_tiny_random_model(ckpt)
    (ckpt / "metrics.json").write_text(json.dumps({"base_model": str(tmp_path / "elsewhere")}))
    assert not is_tiny_random_model(ckpt)
