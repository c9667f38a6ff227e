"""`trajforge validate`: a clean export passes; each kind of damage is named precisely."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trajforge.cli import app
from trajforge.publish.export import export_shards
from trajforge.publish.shards import read_manifest, sample_key
from trajforge.read.validate import validate

REPO = Path(__file__).resolve().parents[2]
SCRIPT = Path(sys.executable).parent / "trajforge"
SPLITS = (("train", 0.6), ("val", 0.2), ("test", 0.2))
runner = CliRunner()


@pytest.fixture(scope="module")
def clean(built, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("shards") / "demo"
    export_shards(built.store, out, dataset="demo", splits=SPLITS, max_samples_per_shard=10)
    return out


@pytest.fixture
def copy(clean, tmp_path) -> Path:
    """A throw-away copy of the clean export to damage."""
    return Path(shutil.copytree(clean, tmp_path / "demo"))


def first_shard(d: Path) -> Path:
    return d / read_manifest(d)["shards"][0]["name"]


def members(shard: Path) -> list[tuple[tarfile.TarInfo, bytes]]:
    with tarfile.open(shard) as tar:
        return [(m, tar.extractfile(m).read()) for m in tar]


def rewrite(d: Path, shard: Path, edit) -> str:
    """Rewrite one shard with `edit(name, data) -> data` applied to its members, and
    fix the manifest's bytes and sha256, so only the edited content is wrong.
    Returns the key of the first member edit changed."""
    changed = []
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for info, data in members(shard):
            new = edit(info.name, data)
            if new != data and not changed:
                changed.append(info.name.partition(".")[0])
            info.size = len(new)
            tar.addfile(info, io.BytesIO(new))
    shard.write_bytes(buf.getvalue())
    manifest = json.loads((d / "manifest.json").read_text())
    for s in manifest["shards"]:
        if s["name"] == shard.name:
            s["bytes"] = len(buf.getvalue())
            s["sha256"] = hashlib.sha256(buf.getvalue()).hexdigest()
    (d / "manifest.json").write_text(json.dumps(manifest))
    return changed[0]


def edit_first_json(change):
    done = []

    def edit(name, data):
        if name.endswith(".json") and not done:
            done.append(name)
            obj = json.loads(data)
            change(obj)
            return json.dumps(obj).encode()
        return data

    return edit


def cli(d: Path):
    result = runner.invoke(app, ["validate", str(d)])
    return result.exit_code, result.stdout, result.stderr


# -- a clean export ------------------------------------------------------------------


def test_clean_export_passes_with_one_line(built, clean):
    report = validate(clean)
    assert report.ok, [str(p) for p in report.problems]
    assert (report.samples, report.trajectories) == (built.num_steps, len(built.trajectories))
    manifest = read_manifest(clean)
    assert report.shards == len(manifest["shards"]) > 3
    assert report.bytes == manifest["totals"]["bytes"]
    code, out, err = cli(clean)
    assert code == 0 and err == ""
    assert out.strip() == (
        f"ok: {clean}: {report.shards} shards, {built.num_steps} samples, "
        f"{len(built.trajectories)} trajectories, {report.bytes / 1e6:.1f} MB"
    )


def test_installed_script_passes_then_fails(clean, copy):
    env = {**os.environ, "PYTHONPATH": str(REPO)}  # this checkout, not the editable install
    ok = subprocess.run(
        [str(SCRIPT), "validate", str(clean)], capture_output=True, text=True, env=env, timeout=120
    )
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith("ok: ") and len(ok.stdout.splitlines()) == 1
    first_shard(copy).unlink()
    bad = subprocess.run(
        [str(SCRIPT), "validate", str(copy)], capture_output=True, text=True, env=env, timeout=120
    )
    assert bad.returncode == 2 and bad.stdout == "" and "Traceback" not in bad.stderr
    assert f"file {first_shard(copy)}: missing" in bad.stderr


# -- shard-level damage ----------------------------------------------------------------


def test_flipped_byte_in_an_image(copy):
    shard = first_shard(copy)
    info = next(m for m, _ in members(shard) if m.name.endswith((".png", ".jpg")))
    raw = bytearray(shard.read_bytes())
    pos = info.offset_data + info.size - 5  # inside the image, past its header
    raw[pos] ^= 0x01
    shard.write_bytes(bytes(raw))
    code, out, err = cli(copy)
    assert code == 2 and out == ""
    assert f"file {shard}, field 'sha256': sha256 " in err
    assert "differs from the manifest" in err
    assert err.strip().splitlines()[-1].startswith(f"error: FAILED (1 problem(s)): {copy}")


def test_flipped_byte_in_a_json_names_the_sample(copy):
    shard = first_shard(copy)
    info = next(m for m, _ in members(shard) if m.name.endswith(".json"))
    raw = bytearray(shard.read_bytes())
    raw[info.offset_data] ^= 0x01  # '{' -> 'z'
    shard.write_bytes(bytes(raw))
    problems = [str(p) for p in validate(copy).problems]
    key = info.name.partition(".")[0]
    assert problems[0].startswith(f"file {shard}, field 'sha256'")
    assert problems[1].startswith(f"file {shard}, record {key}, field 'json': not valid JSON")
    # The sample's trajectory now misses a step: counted, with its id.
    assert any("field 'num_steps'" in p and "missing [0]" in p for p in problems)


def test_missing_shard(copy):
    shard = first_shard(copy)
    shard.unlink()
    code, out, err = cli(copy)
    assert code == 2
    assert f"file {shard}: missing: listed in manifest.json but not on disk" in err


def test_extra_shard(copy):
    extra = copy / "train-000099.tar"
    shutil.copy(first_shard(copy), extra)
    problems = [str(p) for p in validate(copy).problems]
    assert f"file {extra}: shard file not listed in manifest.json" in problems
    # Its samples are not read as the dataset's: no duplicate keys reported.
    assert len(problems) == 1


def test_sample_count_differs_from_manifest(copy):
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["shards"][0]["samples"] += 1
    (copy / "manifest.json").write_text(json.dumps(manifest))
    problems = [str(p) for p in validate(copy).problems]
    n, split = manifest["shards"][0]["samples"], manifest["shards"][0]["split"]
    in_split = manifest["splits"][split]["samples"]
    # The manifest no longer adds up, and the shard holds one sample less than it says.
    assert problems == [
        f"file {copy / 'manifest.json'}, field 'splits.{split}.samples': {in_split}, "
        f"the shards hold {in_split + 1}",
        f"file {copy / 'manifest.json'}, field 'totals.samples': "
        f"{manifest['totals']['samples']}, the shards add up to {manifest['totals']['samples'] + 1}",
        f"file {first_shard(copy)}, field 'samples': {n - 1} samples, manifest says {n}",
    ]


# -- sample-level damage -------------------------------------------------------------------


def test_broken_json_field_names_shard_key_and_field(copy):
    shard = first_shard(copy)
    key = rewrite(copy, shard, edit_first_json(lambda o: o["task"].update(language="fr")))
    code, out, err = cli(copy)
    assert code == 2
    lines = err.strip().splitlines()
    assert lines[0].startswith(f"file {shard}, record {key}, field 'task.language': ")
    assert "'en' or 'zh'" in lines[0]
    assert len(lines) == 2  # that problem and the summary


def test_bad_coordinate_names_the_action_field(copy):
    shard = first_shard(copy)

    def change(o):
        o["action"]["x"] = 1.5
        o["action"]["type"] = "tap"
        o["action"]["y"] = 0.5

    key = rewrite(copy, shard, edit_first_json(change))
    [p] = validate(copy).problems
    assert (p.source, p.record, p.field) == (str(shard), key, "action.x")


def test_json_that_does_not_match_its_key(copy):
    shard = first_shard(copy)
    key = rewrite(copy, shard, edit_first_json(lambda o: o.update(index=o["index"] + 100)))
    problems = validate(copy).problems
    assert problems[0].field == "trajectory_id/index" and problems[0].record == key
    assert "give key" in problems[0].reason


def test_unknown_field_is_named(copy):
    shard = first_shard(copy)
    key = rewrite(copy, shard, edit_first_json(lambda o: o.update(secret="x")))
    [p] = validate(copy).problems
    assert (p.record, p.field) == (key, "secret") and "unexpected field" in p.reason


def test_key_with_a_dot_and_a_missing_image(copy):
    shard = first_shard(copy)
    first_key = members(shard)[0][0].name.partition(".")[0]
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for info, data in members(shard):
            stem, _, ext = info.name.partition(".")
            if stem == first_key and ext != "json":
                continue  # drop the first sample's image
            tar.addfile(info, io.BytesIO(data))
        dotted = tarfile.TarInfo("a.b_s0000.txt")  # webdataset reads key "a", ext "b_s0000.txt"
        dotted.size = 1
        tar.addfile(dotted, io.BytesIO(b"x"))
    shard.write_bytes(buf.getvalue())
    problems = validate(copy).problems
    found = {(p.record, p.field) for p in problems}
    assert (first_key, "image") in found
    assert ("a", "__key__") in found and ("a", "json") in found
    assert any(p.field == "sha256" for p in problems)


def test_bad_manifest_is_one_line_exit_2(tmp_path):
    (tmp_path / "manifest.json").write_text("{nope")
    code, out, err = cli(tmp_path)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "not valid JSON" in err


def test_sample_key_of_the_fixture_is_safe():
    # The fixture's imported-style id has a dot, a slash and CJK: the key must still pass.
    assert validate.__module__ == "trajforge.read.validate"
    from trajforge.read.sample_checks import KEY

    assert KEY.match(sample_key("aitw/ep.7-中", 3))


# -- `trajforge view`: the command is wired to trajforge.read.viewer (tested by its author) ------


def test_view_passes_its_arguments_to_build_site(clean, tmp_path, monkeypatch):
    import types

    import trajforge.read

    calls = []

    def build_site(shard_dir, out_dir=None, *, limit=None):
        calls.append((Path(shard_dir), out_dir, limit))
        if limit == 0:  # what the real build_site says
            raise ValueError(f"limit must be positive, not {limit}")
        (tmp_path / "site").mkdir(exist_ok=True)
        return tmp_path / "site" / "index.html"

    stub = types.SimpleNamespace(build_site=build_site, serve=None)
    monkeypatch.setitem(sys.modules, "trajforge.read.viewer", stub)
    monkeypatch.setattr(trajforge.read, "viewer", stub, raising=False)
    result = runner.invoke(app, ["view", str(clean), "--out", str(tmp_path / "site"), "--limit", "3"])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == f"viewer: {tmp_path / 'site' / 'index.html'}"
    assert calls == [(clean, tmp_path / "site", 3)]
    bad = runner.invoke(app, ["view", str(clean), "--limit", "0"])
    assert bad.exit_code == 2 and bad.stderr.strip() == "error: limit must be positive, not 0"


def test_view_serve_from_the_installed_script(clean, tmp_path):
    """The real viewer, served until SIGINT; its index answers over HTTP."""
    import signal
    import urllib.request

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    site = tmp_path / "site"
    # A runner started in the background (`make test &`) passes SIGINT on as ignored;
    # the viewer must see the Ctrl-C a user would send, so restore the default.
    proc = subprocess.Popen(
        [str(SCRIPT), "view", str(clean), "--out", str(site), "--limit", "2", "--serve"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.default_int_handler),
    )
    try:
        first = proc.stdout.readline()
        assert first.strip() == f"viewer: {site / 'index.html'}", proc.stderr.read() if not first else first
        second = proc.stdout.readline()
        assert second.startswith("serving http://127.0.0.1:"), second
        url = second.split()[1]
        with urllib.request.urlopen(url, timeout=10) as resp:
            assert resp.status == 200 and b"<html" in resp.read().lower()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("where", ["header", "data"])
def test_truncated_shard_is_named_not_a_traceback(copy, where):
    shard = first_shard(copy)
    info = members(shard)[3][0]
    cut = info.offset + 100 if where == "header" else info.offset_data + info.size // 2
    shard.write_bytes(shard.read_bytes()[:cut])
    problems = validate(copy).problems
    assert [(p.source, p.field) for p in problems[:2]] == [(str(shard), "bytes"), (str(shard), "sha256")]
    if where == "data":  # the member's bytes run out
        assert any(p.reason.startswith("damaged shard after 1 samples") for p in problems)
    else:  # tarfile reads a cut header as the end: the counts say what is missing
        assert any(p.field == "samples" for p in problems), [str(p) for p in problems]
