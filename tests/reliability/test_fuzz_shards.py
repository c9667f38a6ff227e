"""Fuzz: the shard reader (trajforge.publish.shards) on truncated, garbled and odd shards.

A real export of a small store is damaged: a shard truncated, overwritten or
spliced with garbage at a random place, or its manifest mutated. Reading
must give samples or a ShardError naming the file, never another exception;
`verify` must report every shard whose bytes changed.
"""

from __future__ import annotations

import io
import itertools
import json
import shutil
import tarfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.export.shard_fixtures import build_store
from trajforge.publish import shards
from trajforge.publish.export import export_shards
from trajforge.publish.shards import ShardError

from .test_fuzz_records import mutated

FUZZ = settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
_runs = itertools.count()
TRIED = {"tar": 0, "manifest": 0, "rejected": 0}


@pytest.fixture(scope="module", autouse=True)
def report_tried():
    yield
    print(f"\n[fuzz shards] {TRIED}")


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz_shards")
    built = build_store(root / "store", n_traj=4, batch_size=4)
    out = root / "shards"
    export_shards(built.store, out, dataset="fuzz", max_samples_per_shard=8)
    assert shards.verify(out) == []
    return out


def copy_of(export: Path, tmp_path: Path) -> Path:
    d = tmp_path / f"copy{next(_runs)}"
    shutil.copytree(export, d)
    return d


def read_all(shard_dir: Path) -> int:
    """Reads every sample (images too); the count, or the ShardError's file checked."""
    try:
        return sum(1 for _ in shards.iter_samples(shard_dir))
    except ShardError as err:
        assert err.source and str(shard_dir) in err.source, str(err)
        TRIED["rejected"] += 1
        return -1


@FUZZ
@given(data=st.data())
def test_a_damaged_shard_reads_or_raises_a_shard_error_and_fails_verify(export, tmp_path, data):
    d = copy_of(export, tmp_path)
    path = data.draw(st.sampled_from(shards.shard_paths(d)))
    raw = path.read_bytes()
    at = data.draw(st.integers(0, len(raw) - 1))
    how = data.draw(st.sampled_from(["truncate", "overwrite", "splice", "zero_block"]))
    if how == "truncate":
        damaged = raw[:at]
    elif how == "overwrite":
        junk = data.draw(st.binary(min_size=1, max_size=64))
        damaged = raw[:at] + junk + raw[at + len(junk) :]
    elif how == "splice":
        damaged = raw[:at] + data.draw(st.binary(min_size=1, max_size=600)) + raw[at:]
    else:  # a block of zeros: tar's end-of-archive marker in the middle
        damaged = raw[:at] + b"\0" * 1024 + raw[at + 1024 :]
    path.write_bytes(damaged)
    read_all(d)
    if damaged != raw:
        assert any(str(path) in p for p in shards.verify(d)), "verify missed a damaged shard"
    TRIED["tar"] += 1


@FUZZ
@given(data=st.data())
def test_a_mutated_manifest_reads_or_raises_a_shard_error(export, tmp_path, data):
    d = copy_of(export, tmp_path)
    manifest = json.loads((d / shards.MANIFEST).read_text())
    if data.draw(st.booleans()):
        text = json.dumps(data.draw(mutated([manifest])), default=repr).encode("utf-8", "surrogatepass")
    else:
        raw = (d / shards.MANIFEST).read_bytes()
        at = data.draw(st.integers(0, len(raw)))
        text = raw[:at] + data.draw(st.binary(max_size=8))
    (d / shards.MANIFEST).write_bytes(text)
    read_all(d)
    try:
        shards.verify(d)
    except ShardError as err:
        assert str(d) in err.source
    TRIED["manifest"] += 1


def _tar_with(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, body in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    return buf.getvalue()


@pytest.mark.parametrize(
    "body, reason",
    [
        (b'{"index": 0', "bad JSON"),  # truncated JSON
        (b'{"url": "\xff\xfe"}', "bad JSON"),  # invalid UTF-8
        (b"[1, 2, 3]", "not a JSON object"),  # JSON, but not a sample
        (b"", "bad JSON"),
    ],
)
def test_a_bad_sample_json_names_the_shard_and_the_key(tmp_path, body, reason):
    path = tmp_path / "train-000000.tar"
    path.write_bytes(_tar_with({"k_s0000.png": b"\x89PNG", "k_s0000.json": body}))
    with pytest.raises(ShardError, match=reason) as info:
        list(shards.iter_tar_samples(path))
    assert info.value.source == str(path) and info.value.record == "k_s0000"
    assert info.value.field == "json"
