"""Streaming loaders over real shards: torch DataLoader with workers, ranks, resampling, datasets."""

from __future__ import annotations

import io
import shutil
import tarfile

import pytest
import torch
from PIL import Image
from torch.utils.data import DataLoader

from trajforge.publish.export import export_shards
from trajforge.publish.shards import ShardError, iter_samples, read_manifest, sample_key
from trajforge.read.loader import ShardDataset, collate_lists, load_hf

SPLITS = (("train", 0.6), ("val", 0.2), ("test", 0.2))


@pytest.fixture(scope="module")
def out(built, tmp_path_factory):
    out = tmp_path_factory.mktemp("loader") / "demo"
    # Small shards, so that 2 ranks x 2 workers each get several.
    export_shards(built.store, out, dataset="demo", splits=SPLITS, max_samples_per_shard=4)
    assert len(read_manifest(out)["splits"]["train"]["shards"]) >= 4
    return out


def split_keys(out, split):
    return sorted(key for key, _ in iter_samples(out, split, images=False))


def read(ds, workers=2, batch_size=4):
    """Every key the DataLoader yields, in order, and the samples by key."""
    keys, samples = [], {}
    for batch in DataLoader(ds, batch_size=batch_size, num_workers=workers, collate_fn=collate_lists):
        for i, key in enumerate(batch["key"]):
            keys.append(key)
            samples[key] = {k: v[i] for k, v in batch.items()}
    return keys, samples


def rgb(data: bytes) -> bytes:
    with Image.open(io.BytesIO(data)) as im:
        return im.convert("RGB").tobytes()


def test_dataloader_with_two_workers_reads_every_sample_once(built, out):
    everything = []
    for split, _ in SPLITS:
        keys, samples = read(ShardDataset(out, split, shuffle=8, seed=1))
        assert sorted(keys) == split_keys(out, split)  # once each: no duplicate, none missing
        everything += keys
        for key, s in samples.items():
            step = next(st for st in built.steps[s["trajectory_id"]] if st.index == s["index"])
            assert key == sample_key(step.trajectory_id, step.index)
            assert s["shard"].startswith(f"{split}-") and s["shard"].endswith(".tar")
            assert s["image"].mode == "RGB" and s["image"].size == (step.width, step.height)
            assert s["image"].tobytes() == rgb(built.images[(step.trajectory_id, step.index)])
            assert s["action"] == step.action.model_dump(mode="json")
            assert s["task"]["instruction"] == built.trajectories[step.trajectory_id].task.instruction
            assert s["outcome"] == built.trajectories[step.trajectory_id].outcome
    assert sorted(everything) == sorted(sample_key(t, s.index) for t, st in built.steps.items() for s in st)


def test_two_ranks_with_two_workers_read_disjoint_sets_covering_the_split(out):
    per_rank = []
    for rank in range(2):
        keys, _ = read(ShardDataset(out, "train", shuffle=8, seed=3, rank=rank, world_size=2))
        assert len(keys) == len(set(keys)) > 0
        per_rank.append(set(keys))
    assert not per_rank[0] & per_rank[1]
    assert sorted(per_rank[0] | per_rank[1]) == split_keys(out, "train")


def test_shuffle_differs_between_epochs_and_repeats_for_a_seed(out):
    ds = ShardDataset(out, "train", shuffle=16, seed=7)
    first, _ = read(ds)
    ds.set_epoch(1)
    second, _ = read(ds)
    again, _ = read(ShardDataset(out, "train", shuffle=16, seed=7))
    other, _ = read(ShardDataset(out, "train", shuffle=16, seed=8))
    assert sorted(first) == sorted(second) == split_keys(out, "train")
    assert first != second  # reshuffled for the new epoch
    assert first == again  # same seed, same epoch: same order (workers included)
    assert first != other
    ordered, _ = read(ShardDataset(out, "train", shuffle=0), workers=0)
    assert ordered == split_keys(out, "train")  # shuffle=0 keeps file order


def test_resampled_yields_the_bound_per_rank(out):
    total = read_manifest(out)["splits"]["train"]["samples"]
    every = set(split_keys(out, "train"))
    for rank in range(2):
        ds = ShardDataset(
            out, "train", shuffle=8, seed=5, rank=rank, world_size=2, resampled=True, epoch_samples=13
        )
        keys, _ = read(ds, batch_size=3)
        assert len(keys) == 13 and set(keys) <= every  # 7 + 6 over two workers
        ds.set_epoch(1)
        keys1, _ = read(ds, batch_size=3)
        assert len(keys1) == 13 and keys1 != keys
        default = ShardDataset(out, "train", rank=rank, world_size=2, resampled=True)
        assert len(read(default, workers=0)[0]) == total // 2
        assert len(read(default.with_epoch(5), workers=2)[0]) == 5
    with pytest.raises(ValueError, match="resampled"):
        ShardDataset(out, "train").with_epoch(5)


def test_tensor_images(built, out):
    _, samples = read(ShardDataset(out, "val", image="tensor"), workers=0, batch_size=1)
    batch = next(
        iter(
            DataLoader(
                ShardDataset(out, "val", image="tensor"),
                batch_size=3,
                num_workers=2,
                collate_fn=collate_lists,
            )
        )
    )
    assert batch["image"].shape == (
        3,
        3,
        built.steps[batch["trajectory_id"][0]][0].height,
        built.steps[batch["trajectory_id"][0]][0].width,
    )
    for s in samples.values():
        t = s["image"]
        assert t.dtype == torch.uint8 and tuple(t.shape) == (3, s["height"], s["width"])
        assert t.permute(1, 2, 0).contiguous().numpy().tobytes() == rgb(
            built.images[(s["trajectory_id"], s["index"])]
        )


def _rewrite_shard(src, dst, name, change):
    """A copy of the shard folder where `change(members)` edits one shard's members."""
    shutil.copytree(src, dst)
    with tarfile.open(src / name) as tar:
        members = [(m, tar.extractfile(m).read()) for m in tar.getmembers()]
    members = change(members)
    with tarfile.open(dst / name, "w") as tar:
        for m, data in members:
            m.size = len(data)
            tar.addfile(m, io.BytesIO(data))
    return dst


@pytest.mark.parametrize(
    "fault, field",
    [("json", "json"), ("drop_image", "image"), ("image", "png"), ("no_action", "json.action")],
)
def test_malformed_sample_names_shard_key_and_field(out, tmp_path, fault, field):
    name = read_manifest(out)["splits"]["train"]["shards"][0]

    def change(members):
        first = members[0][0].name.split(".")[0]
        edited = []
        for m, data in members:
            key, _, ext = m.name.partition(".")
            if key == first and ext == "json" and fault in ("json", "no_action"):
                data = b"{not json" if fault == "json" else data.replace(b'"action"', b'"actio_"')
            if key == first and ext in ("png", "jpg") and fault == "image":
                data = data[:40]
            if key == first and ext in ("png", "jpg") and fault == "drop_image":
                continue
            edited.append((m, data))
        return edited

    broken = _rewrite_shard(out, tmp_path / "broken", name, change)
    with pytest.raises(ShardError) as err:
        list(ShardDataset(broken, "train", shuffle=0))
    msg = str(err.value)
    first_key = next(iter_samples(out, "train", images=False))[0]
    assert name in msg and f"record {first_key}" in msg and f"field '{field}'" in msg


def test_truncated_shard_names_the_shard(out, tmp_path):
    broken = tmp_path / "cut"
    shutil.copytree(out, broken)
    name = read_manifest(out)["splits"]["val"]["shards"][0]
    data = (broken / name).read_bytes()
    (broken / name).write_bytes(data[:700])  # inside the first member's data
    with pytest.raises(ShardError, match=name):
        list(ShardDataset(broken, "val", shuffle=0))


def test_bad_arguments_are_refused(out):
    with pytest.raises(ShardError, match="no shards for split 'dev'"):
        ShardDataset(out, "dev")
    with pytest.raises(ValueError, match="some ranks would read nothing"):
        ShardDataset(out, "test", rank=0, world_size=50)
    with pytest.raises(ValueError, match="rank 2"):
        ShardDataset(out, "train", rank=2, world_size=2)
    with pytest.raises(ValueError, match="image must be"):
        ShardDataset(out, "train", image="numpy")


def test_load_hf_reads_every_sample_once_with_the_fields(built, out, tmp_path):
    manifest = read_manifest(out)
    seen = []
    for split, _ in SPLITS:
        ds = load_hf(out, split, cache_dir=str(tmp_path / "hf"))
        # One fixed key set for every split of the dataset.
        assert set(ds.column_names) == {"json", "__key__", "__url__", *manifest["sample"]["image_exts"]}
        assert len(ds) == manifest["splits"][split]["samples"]
        keys = ds["__key__"]
        assert sorted(keys) == split_keys(out, split)
        seen += keys
        for row in ds:
            j = row["json"]
            step = built.steps[j["trajectory_id"]][j["index"]]
            ext = "jpg" if step.image_format == "jpeg" else "png"
            assert row["__key__"] == sample_key(step.trajectory_id, step.index)
            assert row[ext].convert("RGB").tobytes() == rgb(built.images[(step.trajectory_id, step.index)])
            assert j["action"]["type"] == step.action.type.value
            assert j["task"]["language"] == built.trajectories[step.trajectory_id].task.language
    assert len(seen) == len(set(seen)) == built.num_steps
    streamed = [row["__key__"] for row in load_hf(out, "val", streaming=True)]
    assert sorted(streamed) == split_keys(out, "val")
    with pytest.raises(ShardError, match="no shards for split 'dev'"):
        load_hf(out, "dev")


def test_dataset_pickles_for_spawned_workers(out):
    # spawn / forkserver workers get a pickled copy: it must read the same stream.
    import pickle

    ds = ShardDataset(out, "train", shuffle=8, seed=2)
    ds.set_epoch(3)
    copy = pickle.loads(pickle.dumps(ds))
    assert [s["key"] for s in copy] == [s["key"] for s in ds]


def test_rank_comes_from_torch_distributed_when_initialised(out, tmp_path):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'pg'}", rank=0, world_size=1)
    try:
        ds = ShardDataset(out, "val")
        assert (ds.rank, ds.world_size) == (0, 1)
    finally:
        dist.destroy_process_group()
    with pytest.raises(ValueError, match="give both"):
        ShardDataset(out, "val", rank=0)
