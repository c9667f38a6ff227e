"""`trajforge validate` on a reasoning set: answers, spans, keys and the 1:1 mix, per sample."""

from __future__ import annotations

import io
import json
import shutil
import tarfile

import pytest
from typer.testing import CliRunner

from synthesis.cot import generate_cot
from synthesis.set_options import ReasoningSetOptions
from synthesis.set_writer import write_reasoning_set
from tests.export.shard_fixtures import build_store
from trajforge.cli import app
from trajforge.read.validate import validate


@pytest.fixture(scope="module")
def reasoning_set(tmp_path_factory):
    built = build_store(tmp_path_factory.mktemp("curated"))
    rows = [
        c.to_row()
        for c in generate_cot([(built.trajectories[t], built.steps[t]) for t in sorted(built.trajectories)])
    ]
    out = tmp_path_factory.mktemp("sets") / "reasoning"
    write_reasoning_set(
        built.store, rows, out, dataset="reasoning", options=ReasoningSetOptions(max_samples_per_shard=10)
    )
    return out


def rewrite_first_shard(src_dir, dst_dir, edit):
    """Copy the set, then rebuild its first shard with `edit(name, bytes) -> bytes | None`
    (None drops the member); returns (shard path, the keys whose json was edited)."""
    shutil.copytree(src_dir, dst_dir)
    manifest = json.loads((dst_dir / "manifest.json").read_text())
    path = dst_dir / manifest["shards"][0]["name"]
    with tarfile.open(path) as tar:
        members = [(m, tar.extractfile(m).read()) for m in tar.getmembers() if m.isfile()]
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as out:
        for m, data in members:
            data = edit(m.name, data)
            if data is None:
                continue
            m.size = len(data)
            out.addfile(m, io.BytesIO(data))
    path.write_bytes(buf.getvalue())
    return path


def test_a_written_set_validates_with_its_own_checks(reasoning_set):
    report = validate(reasoning_set)
    assert report.ok, [str(p) for p in report.problems]
    manifest = json.loads((reasoning_set / "manifest.json").read_text())
    assert report.samples == manifest["totals"]["samples"] > 0
    result = CliRunner().invoke(app, ["validate", str(reasoning_set)])
    assert result.exit_code == 0, result.output


def test_an_answer_that_no_longer_matches_its_recording_is_named(reasoning_set, tmp_path):
    edited = []

    def edit(name, data):
        if name.endswith(".json") and not edited:
            obj = json.loads(data)
            gpt = obj["conversations"][-1]
            # Another point: the answer no longer says what was recorded, the spans still
            # slice numbers, but not the answer's.
            x, y = obj["answer"]["point_2d"]
            if x == -100 or len(str(x + 37)) != len(str(x)):  # same length: spans still slice
                return data
            gpt["value"] = gpt["value"].replace(f"[{x}, {y}]", f"[{x + 37}, {y}]")
            edited.append(name.split(".")[0])
            return json.dumps(obj).encode()
        return data

    shard = rewrite_first_shard(reasoning_set, tmp_path / "set", edit)
    report = validate(tmp_path / "set")
    assert edited and not report.ok
    mine = [p for p in report.problems if p.record == edited[0]]
    assert any(
        "answer_differs" in p.reason and p.field == "conversations.gpt" and p.source == str(shard)
        for p in mine
    ), [str(p) for p in mine]


def test_a_step_missing_one_mode_breaks_the_mix(reasoning_set, tmp_path):
    dropped = []

    def edit(name, data):
        stem = name.split(".")[0]
        if stem.endswith("_direct") and (not dropped or dropped[0] == stem):
            dropped.append(stem)
            return None
        return data

    rewrite_first_shard(reasoning_set, tmp_path / "set", edit)
    report = validate(tmp_path / "set")
    mix = [p for p in report.problems if p.field == "mode"]
    assert len(mix) == 1 and mix[0].record == dropped[0].replace("_direct", "_reason")
    assert "['reason']" in mix[0].reason
