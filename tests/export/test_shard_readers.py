"""The shards read back with the libraries a training job uses: webdataset and datasets."""

from __future__ import annotations

import io
import json

import pytest
from PIL import Image

from trajforge.publish.export import export_shards
from trajforge.publish.shards import hf_data_files, hf_features, read_manifest, shard_paths

SPLITS = (("train", 0.6), ("val", 0.2), ("test", 0.2))


@pytest.fixture(scope="module")
def out(built, tmp_path_factory):
    out = tmp_path_factory.mktemp("shards") / "demo"
    export_shards(built.store, out, dataset="demo", splits=SPLITS, max_samples_per_shard=10)
    manifest = read_manifest(out)
    assert all(manifest["splits"][s]["samples"] > 0 for s, _ in SPLITS)  # each split is tried
    return out


def expected(built):
    """{key: (image ext, image bytes, trajectory id, index, action type)} from the store."""
    from trajforge.publish.shards import sample_key

    rows = {}
    for tid, steps in built.steps.items():
        for s in steps:
            ext = "jpg" if s.image_format == "jpeg" else "png"
            rows[sample_key(tid, s.index)] = (ext, built.images[(tid, s.index)], s)
    return rows


def test_webdataset_reads_every_sample(built, out):
    import webdataset as wds

    want = expected(built)
    got = {}
    for split in read_manifest(out)["splits"]:
        urls = [str(p) for p in shard_paths(out, split)]
        for sample in wds.WebDataset(urls, shardshuffle=False):
            key = sample["__key__"]
            assert "." not in key and key not in got
            got[key] = sample
    assert got.keys() == want.keys()
    for key, sample in got.items():
        ext, image, step = want[key]
        assert {k for k in sample if not k.startswith("__")} == {ext, "json"}
        assert sample[ext] == image
        j = json.loads(sample["json"])
        assert (j["trajectory_id"], j["index"]) == (step.trajectory_id, step.index)
        assert j["action"] == step.action.model_dump(mode="json")
        assert j["screenshot"] == step.screenshot
        assert j["task"]["instruction"] == built.trajectories[step.trajectory_id].task.instruction


def test_datasets_loads_every_split_with_the_declared_features(built, out, tmp_path):
    import datasets

    manifest = read_manifest(out)
    features = hf_features(manifest["sample"]["image_exts"])
    data_files = hf_data_files(out)
    assert data_files == {split: [str(p) for p in shard_paths(out, split)] for split in manifest["splits"]}
    want = expected(built)
    got = {}
    for split, info in manifest["splits"].items():
        ds = datasets.load_dataset(
            "webdataset",
            data_files=data_files,
            split=split,
            features=features,
            cache_dir=str(tmp_path / "hf"),
        )
        assert len(ds) == info["samples"]
        for row in ds:
            got[row["__key__"]] = (split, row)
    assert got.keys() == want.keys()
    for key, (_split, row) in got.items():
        ext, image, step = want[key]
        other = "png" if ext == "jpg" else "jpg"
        assert row[other] is None
        decoded = row[ext]
        assert decoded.size == (step.width, step.height)
        with Image.open(io.BytesIO(image)) as original:
            assert decoded.convert("RGB").tobytes() == original.convert("RGB").tobytes()
        j = row["json"]
        assert (j["trajectory_id"], j["index"], j["action"]["type"]) == (
            step.trajectory_id,
            step.index,
            step.action.type.value,
        )
        assert j["action"]["x2"] == step.action.x2
        assert j["target"] == (
            None
            if step.target is None
            else {
                "role": step.target.role,
                "name": step.target.name,
                "bbox": list(step.target.bbox),
                "visibility": (step.target.visibility.model_dump() if step.target.visibility else None),
            }
        )
        assert [e["role"] for e in j["elements"]] == [e.role for e in step.elements]
        traj = built.trajectories[step.trajectory_id]
        assert j["task"]["language"] == traj.task.language
        assert json.loads(j["task"]["params_json"]) == traj.task.params
        assert j["outcome"] == traj.outcome and j["num_steps"] == traj.num_steps
    # No trajectory in two splits, read through datasets as well.
    splits_of = {}
    for split, row in got.values():
        splits_of.setdefault(row["json"]["trajectory_id"], set()).add(split)
    assert all(len(s) == 1 for s in splits_of.values())
