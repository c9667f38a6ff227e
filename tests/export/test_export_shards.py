"""export_shards: content, splits, shard limits, reproducibility, atomicity, quarantine."""

from __future__ import annotations

import hashlib
import json
import tarfile
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from schemas.arrow import step_to_row, trajectory_to_row
from schemas.records import SCHEMA_VERSION
from tests.export.shard_fixtures import build_store
from trajforge.publish.export import export_shards
from trajforge.publish.holdout import HoldOut
from trajforge.publish.plan import check_splits, split_of
from trajforge.publish.shards import (
    ShardError,
    iter_samples,
    iter_tar_samples,
    key_stem,
    read_manifest,
    sample_key,
    shard_paths,
    verify,
)

SPLITS = (("train", 0.5), ("val", 0.25), ("test", 0.25))


@pytest.fixture(scope="module")
def exported(built, tmp_path_factory):
    out = tmp_path_factory.mktemp("shards") / "demo"
    result = export_shards(built.store, out, dataset="demo", splits=SPLITS, max_samples_per_shard=8)
    return out, result


def expected_json(built, tid: str, index: int) -> dict:
    traj = built.trajectories[tid]
    obj = step_to_row(built.steps[tid][index])
    for k, v in trajectory_to_row(traj).items():
        if k != "trajectory_id":
            obj["trajectory_error" if k == "error" else k] = v
    obj["schema_version"] = SCHEMA_VERSION
    return json.loads(json.dumps(obj))  # tuples -> lists, as JSON has them


def test_every_step_is_one_sample_equal_to_the_store(built, exported):
    out, result = exported
    samples = list(iter_samples(out))
    assert result.samples == len(samples) == built.num_steps == 42
    assert result.trajectories == len(built.trajectories) == 12
    assert result.skipped == {}
    seen = set()
    for key, sample in samples:
        j = sample["json"]
        tid, index = j["trajectory_id"], j["index"]
        assert key == sample_key(tid, index) and "." not in key
        assert j == expected_json(built, tid, index)
        fmt = built.steps[tid][index].image_format
        image_ext = "jpg" if fmt == "jpeg" else "png"
        assert set(sample) == {image_ext, "json"}
        assert sample[image_ext] == built.images[(tid, index)]
        seen.add((tid, index))
    assert len(seen) == built.num_steps
    # The fields a trainer reads, spot-checked in plain terms.
    zh = next(s["json"] for _, s in samples if s["json"]["task"]["language"] == "zh")
    assert zh["task"]["instruction"].startswith("把红鞋加入购物车（")
    assert zh["device"]["locale"] == "zh-CN"
    assert json.loads(zh["task"]["params_json"]) in (
        {"to": "bob"},
        {"item": "red shoes", "qty": 3},
        {"item": "red shoes", "qty": 9},
    )


def test_samples_are_sorted_and_trajectories_kept_whole(built, exported):
    out, _ = exported
    for split in read_manifest(out)["splits"]:
        order = [(s["json"]["trajectory_id"], s["json"]["index"]) for _, s in iter_samples(out, split)]
        assert order == sorted(order)
    home = {}
    for path in shard_paths(out):
        for tid, n in Counter(s["json"]["trajectory_id"] for _, s in iter_tar_samples(path)).items():
            # each trajectory (at most 5 steps < 8 a shard) sits whole in one shard
            assert n == built.trajectories[tid].num_steps and tid not in home
            home[tid] = path.name
    assert home.keys() == built.trajectories.keys()


def test_splits_are_by_trajectory_and_match_the_manifest(built, exported):
    out, _ = exported
    manifest = read_manifest(out)
    by_split = {
        split: {s["json"]["trajectory_id"] for _, s in iter_samples(out, split)}
        for split in manifest["splits"]
    }
    names = list(by_split)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            assert not by_split[a] & by_split[b], f"{a} and {b} share a trajectory"
    assert set().union(*by_split.values()) == set(built.trajectories)
    plan = HoldOut(list(SPLITS), "v1").plan(t.task for t in built.trajectories.values())
    for split, tids in by_split.items():
        assert manifest["splits"][split]["trajectories"] == len(tids)
        assert all(
            plan.split(built.trajectories[t].task) == split for t in tids
        )  # by task template (and instruction)
        assert all(n.startswith(f"{split}-") for n in manifest["splits"][split]["shards"])


def test_manifest_sizes_and_hashes_match_the_files(exported):
    out, result = exported
    manifest = read_manifest(out)
    assert manifest == result.manifest
    assert manifest["dataset"] == "demo" and manifest["schema_version"] == SCHEMA_VERSION
    assert sorted(p.name for p in out.glob("*.tar")) == sorted(s["name"] for s in manifest["shards"])
    for shard in manifest["shards"]:
        data = (out / shard["name"]).read_bytes()
        assert shard["bytes"] == len(data)
        assert shard["sha256"] == hashlib.sha256(data).hexdigest()
        assert shard["samples"] <= 8
        with tarfile.open(out / shard["name"]) as tar:
            members = tar.getmembers()
        assert len(members) == 2 * shard["samples"]
        assert {(m.mtime, m.uid, m.gid, m.uname, m.gname, m.mode) for m in members} == {
            (0, 0, 0, "trajforge", "trajforge", 0o644)
        }
    totals = manifest["totals"]
    assert totals["samples"] == sum(s["samples"] for s in manifest["shards"]) == 42
    assert totals["bytes"] == sum(s["bytes"] for s in manifest["shards"])
    assert sorted(manifest["sample"]["image_exts"]) == ["jpg", "png"]
    assert verify(out) == []
    # A damaged shard is caught.
    victim = out / manifest["shards"][0]["name"]
    original = victim.read_bytes()
    try:
        victim.write_bytes(original[:-1] + b"x")
        assert any("sha256" in p for p in verify(out))
    finally:
        victim.write_bytes(original)


def test_same_input_gives_byte_identical_shards_whatever_the_batching(built, exported, tmp_path):
    out, first = exported
    again = export_shards(
        built.store, tmp_path / "again", dataset="demo", splits=SPLITS, max_samples_per_shard=8
    )
    # The same trajectories committed in other batches (other part files).
    rebatched = build_store(tmp_path / "raw2", batch_size=2, reverse=True)
    assert rebatched.trajectories.keys() == built.trajectories.keys()
    assert len(rebatched.store.step_files()) != len(built.store.step_files())
    third = export_shards(
        rebatched.store, tmp_path / "third", dataset="demo", splits=SPLITS, max_samples_per_shard=8
    )
    names = sorted(p.name for p in out.iterdir())
    for other in (tmp_path / "again", tmp_path / "third"):
        assert sorted(p.name for p in other.iterdir()) == names
        for name in names:
            assert (other / name).read_bytes() == (out / name).read_bytes(), name
    assert first.manifest["version"] == again.manifest["version"] == third.manifest["version"]


def test_byte_limit_rolls_shards(built, tmp_path):
    limit = 12 * 1024
    result = export_shards(
        built.store, tmp_path / "small", dataset="demo", splits=SPLITS, max_bytes_per_shard=limit
    )
    shards = result.manifest["shards"]
    assert result.samples == 42 and len(shards) > 3
    # Samples here are ~2.5 KiB in tar, so every shard respects the limit.
    assert all(s["bytes"] <= limit for s in shards), [s["bytes"] for s in shards]
    assert len(shards) < 21  # and fills them: mostly 3+ samples a shard
    # A trajectory over the limit alone is split at step boundaries, nothing lost.
    one = export_shards(
        built.store, tmp_path / "tiny", dataset="demo", splits=SPLITS, max_samples_per_shard=1
    )
    assert len(one.manifest["shards"]) == 42
    keys = [sorted(k for k, _ in iter_samples(tmp_path / d)) for d in ("tiny", "small")]
    assert keys[0] == keys[1] and len(keys[0]) == 42


def test_re_export_replaces_stale_shards_and_leftovers(built, tmp_path):
    out = tmp_path / "d"
    export_shards(built.store, out, dataset="demo", splits=SPLITS, max_samples_per_shard=1)
    (out / ".train-000000.tar.abc.tmp").write_bytes(b"half a shard")
    export_shards(built.store, out, dataset="demo", splits=SPLITS, max_samples_per_shard=1000)
    manifest = read_manifest(out)
    assert sorted(p.name for p in out.glob("*.tar")) == sorted(s["name"] for s in manifest["shards"])
    assert not list(out.glob(".*"))
    assert verify(out) == []


def test_a_failed_export_leaves_the_previous_one_whole(built, tmp_path):
    out = tmp_path / "d"
    first = export_shards(built.store, out, dataset="demo", splits=SPLITS, max_samples_per_shard=4)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    written = []

    def crash(n):
        written.append(n)
        if len(written) == 6:  # mid-way, after some shards were finished
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        export_shards(
            built.store, out, dataset="demo", splits=SPLITS, max_samples_per_shard=2, progress=crash
        )
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert verify(out) == [] and read_manifest(out) == first.manifest


def _rewrite(path: Path, change) -> None:
    """Corrupt one committed Parquet file in place, as a bad import might."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    rows = table.to_pylist()
    change(rows)
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), path)


def test_bad_trajectories_are_quarantined_and_counted(tmp_path):
    b = build_store(tmp_path / "raw", n_traj=8, collections=("web",), batch_size=100)
    ids = sorted(b.trajectories)
    no_blob, bad_step, bad_traj = ids[:3]
    step = b.steps[no_blob][1]
    b.store.blobs.path(step.screenshot, step.image_format).unlink()
    steps_file, traj_file = b.store.step_files()[0], b.store.trajectory_files()[0]

    def break_step(rows):
        row = next(r for r in rows if r["trajectory_id"] == bad_step and r["index"] == 1)
        row["action"] = dict(row["action"], type="tap", x=1.5, y=0.5)

    def break_trajectory(rows):
        next(r for r in rows if r["trajectory_id"] == bad_traj)["outcome"] = "maybe"

    _rewrite(steps_file, break_step)
    _rewrite(traj_file, break_trajectory)
    # Indices with a gap, and one trajectory committed twice (in two collections).
    gap, dup = sorted(b.trajectories)[3], sorted(b.trajectories)[4]
    with b.store.writer("again") as w:
        t = b.trajectories[gap]
        w.add(
            t.model_copy(update={"trajectory_id": "gap.id/1"}),
            [s.model_copy(update={"trajectory_id": "gap.id/1", "index": 2 * s.index}) for s in b.steps[gap]],
        )
        w.add(b.trajectories[dup], b.steps[dup])

    result = export_shards(b.store, tmp_path / "out", dataset="demo", splits=SPLITS)
    assert result.skipped == {
        "missing_screenshot": 1,
        "invalid_step": 1,
        "invalid_trajectory": 1,
        "step_count_mismatch": 1,
        "duplicate_id": 1,
    }
    assert result.manifest["totals"]["skipped"] == result.skipped
    good = [t for t in ids if t not in (no_blob, bad_step, bad_traj)]
    assert result.trajectories == len(good) == 5
    assert result.samples == sum(b.trajectories[t].num_steps for t in good)
    lines = [json.loads(line) for line in (tmp_path / "out" / "quarantine.jsonl").read_text().splitlines()]
    reasons = {q["reason"]: q for q in lines}
    assert reasons["missing_screenshot"]["trajectory_id"] == no_blob
    assert "screenshot" in reasons["missing_screenshot"]["detail"]
    assert reasons["invalid_step"]["trajectory_id"] == bad_step
    assert f"record {bad_step}#1, field 'action" in reasons["invalid_step"]["detail"]
    assert reasons["invalid_trajectory"]["trajectory_id"] == bad_traj
    assert "field 'outcome'" in reasons["invalid_trajectory"]["detail"]
    assert reasons["step_count_mismatch"]["trajectory_id"] == "gap.id/1"
    assert reasons["duplicate_id"]["trajectory_id"] == dup
    exported = {s["json"]["trajectory_id"] for _, s in iter_samples(tmp_path / "out")}
    assert exported == set(good)
    # The duplicate's steps went out once.
    assert (
        sum(1 for _, s in iter_samples(tmp_path / "out") if s["json"]["trajectory_id"] == dup)
        == b.trajectories[dup].num_steps
    )


def test_split_assignment_is_stable_and_near_the_fractions():
    splits = check_splits((("train", 0.8), ("val", 0.1), ("test", 0.1)))
    ids = [f"traj-{i}" for i in range(4000)]
    got = [split_of(t, splits, "v1") for t in ids]
    assert got == [split_of(t, splits, "v1") for t in ids]
    share = got.count("train") / len(ids)
    assert 0.77 < share < 0.83
    assert got != [split_of(t, splits, "v2") for t in ids]  # the seed reshuffles
    for bad in (
        (("train", 0.9),),
        (("train", 0.5), ("train", 0.5)),
        (("Tr.ain", 1.0),),
        (("train", 1.2), ("val", -0.2)),
    ):
        with pytest.raises(ValueError, match="splits"):
            check_splits(bad)


@given(st.lists(st.text(min_size=1, max_size=120), min_size=2, max_size=6, unique=True))
def test_key_stems_are_safe_and_distinct(ids):
    stems = [key_stem(t) for t in ids]
    assert len(set(stems)) == len(ids)
    for s in stems:
        assert s and "." not in s and "/" not in s and len(s) <= 73
        assert all(c.isascii() and (c.isalnum() or c in "_-") for c in s)


def test_read_manifest_names_what_is_wrong(tmp_path):
    with pytest.raises(ShardError, match="no such shard folder"):
        read_manifest(tmp_path / "missing")
    with pytest.raises(ShardError, match="no manifest.json"):
        read_manifest(tmp_path)
    (tmp_path / "manifest.json").write_text(
        '{"dataset": "x", "version": "1", "splits": {}, "shards": [{"name": "train-000000.tar"}]}'
    )
    with pytest.raises(ShardError, match=r"record 0, field 'shards.split'"):
        read_manifest(tmp_path)
