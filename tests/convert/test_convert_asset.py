"""converted_sets in a real in-process Dagster run, and its round-trip check failing on a
tampered output."""

from __future__ import annotations

import json
import shutil

import dagster as dg
import pytest

from dagster_project.assets.convert import converted_sets, converted_sets_round_trip
from dagster_project.resources import StorageResource


@pytest.mark.slow
def test_asset_converts_every_set_and_the_check_can_fail(reasoning_dir, grounding_dir, tmp_path):
    shutil.copytree(reasoning_dir, tmp_path / "shards" / "reasoning_set")
    shutil.copytree(grounding_dir, tmp_path / "shards" / "grounding_set")
    storage = StorageResource(root=str(tmp_path))
    run_config = {"ops": {"converted_sets": {"config": {"formats": ["llamafactory", "verl"]}}}}
    result = dg.materialize(
        [converted_sets, converted_sets_round_trip], resources={"storage": storage}, run_config=run_config
    )
    assert result.success
    outputs = result.asset_materializations_for_node("converted_sets")[0].metadata["outputs"].value
    assert sorted(outputs) == [
        "grounding_set/llamafactory",
        "grounding_set/verl",
        "reasoning_set/llamafactory",
        "reasoning_set/verl",
    ]
    assert outputs["reasoning_set/verl"]["inexpressible"] == 0  # swipes too are expressed
    [check] = result.get_asset_check_evaluations()
    assert check.passed and check.metadata["outputs"].value == 4

    # A changed prompt in one output: the check fails and names it.
    path = tmp_path / "converted" / "reasoning_set" / "llamafactory" / "train.jsonl"
    lines = path.read_text().splitlines()
    row = json.loads(lines[0])
    row["messages"][1]["content"] += " (edited)"
    path.write_text("\n".join([json.dumps(row, ensure_ascii=False)] + lines[1:]) + "\n")
    result = dg.materialize(
        [converted_sets_round_trip],
        resources={"storage": storage},
        selection=dg.AssetSelection.checks(converted_sets_round_trip),
        raise_on_error=False,
    )
    [check] = result.get_asset_check_evaluations()
    assert not check.passed and check.metadata["problems"].value == 1
    assert f"reasoning_set/llamafactory: {row['id']}: prompt" in check.metadata["detail"].value
