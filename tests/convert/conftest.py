"""Small sets to convert (session scope): a reasoning set and a grounding set, built the way
tests/synthesis builds them (template CoT over the export fixture store)."""

import json
import shutil

import pytest

from synthesis.cot import generate_cot
from synthesis.grounding_writer import write_grounding_set
from synthesis.set_options import ReasoningSetOptions, SetOptions
from synthesis.set_writer import write_reasoning_set
from tests.export.shard_fixtures import build_store
from tests.synthesis.grounding_fixtures import build_grounding_store

SPLITS = (("train", 0.6), ("val", 0.2), ("test", 0.2))


@pytest.fixture(scope="session")
def reasoning_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("convert-reasoning")
    built = build_store(root / "curated")
    rows = [
        c.to_row()
        for c in generate_cot([(built.trajectories[t], built.steps[t]) for t in sorted(built.trajectories)])
    ]
    options = ReasoningSetOptions(splits=SPLITS, max_samples_per_shard=10)
    write_reasoning_set(built.store, rows, root / "set", dataset="reasoning", options=options)
    return root / "set"


@pytest.fixture(scope="session")
def grounding_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("convert-grounding")
    b = build_grounding_store(root / "curated")
    write_grounding_set(b.store, root / "set", options=SetOptions(splits=(("train", 0.5), ("test", 0.5))))
    return root / "set"


@pytest.fixture(scope="session")
def full_checkpoint(tmp_path_factory):
    """The tiny Qwen2-VL as a checkpoint directory the trainers' venvs load (LLaMA-Factory's
    load_tokenizer, ms-swift's get_processor, verl's AutoProcessor): it is
    saved where torchvision is missing (no video-processor config), and AutoProcessor with
    torchvision (.venv-llamafactory) then needs one; a real Qwen2-VL checkpoint carries
    preprocessor_config.json, the image processor's settings, which serve for video too."""
    from tests.vlm.helpers import tiny_model_path

    path = tmp_path_factory.mktemp("lf-model") / "tiny-qwen2vl"
    shutil.copytree(tiny_model_path(), path)
    image = json.loads((path / "processor_config.json").read_text())["image_processor"]
    (path / "preprocessor_config.json").write_text(json.dumps(image, indent=2))
    return path
