"""Small sets to convert (session scope): a reasoning set and a grounding set, built the way
tests/synthesis builds them (template CoT over the export fixture store)."""
import pytest

from synthesis.cot import generate_cot
from synthesis.grounding_writer import write_grounding_set
from synthesis.set_writer import write_reasoning_set
from tests.export.shard_fixtures import build_store
from tests.synthesis.grounding_fixtures import build_grounding_store

SPLITS = (("train", 0.6), ("val", 0.2), ("test", 0.2))


@pytest.fixture(scope="session")
def reasoning_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("convert-reasoning")
    built = build_store(root / "curated")
    rows = [c.to_row() for c in generate_cot(
        [(built.trajectories[t], built.steps[t]) for t in sorted(built.trajectories)])]
    write_reasoning_set(built.store, rows, root / "set", dataset="reasoning", splits=SPLITS,
                        max_samples_per_shard=10)
    return root / "set"


@pytest.fixture(scope="session")
def grounding_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("convert-grounding")
    b = build_grounding_store(root / "curated")
    write_grounding_set(b.store, root / "set", splits=(("train", 0.5), ("test", 0.5)))
    return root / "set"
