"""`trajforge stats / export / verify`: in process (CliRunner) and as the installed script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trajforge.cli import app
from trajforge.publish.export import export_shards

SCRIPT = Path(sys.executable).parent / "trajforge"
runner = CliRunner()


@pytest.fixture(scope="module")
def out(built, tmp_path_factory):
    out = tmp_path_factory.mktemp("shards") / "demo"
    export_shards(
        built.store,
        out,
        dataset="demo",
        max_samples_per_shard=10,
        splits=(("train", 0.6), ("val", 0.2), ("test", 0.2)),
    )
    return out


def expected_stats(built) -> dict:
    trajs = built.trajectories.values()
    steps = [s for ss in built.steps.values() for s in ss]
    return {
        "trajectories": len(trajs),
        "steps": len(steps),
        "languages": dict(Counter(t.task.language for t in trajs)),
        "platforms": dict(Counter(t.platform for t in trajs)),
        "apps": dict(Counter(t.app for t in trajs)),
        "outcomes": dict(Counter(t.outcome for t in trajs)),
        "policies": dict(Counter(t.policy for t in trajs)),
        "action_types": dict(Counter(s.action.type.value for s in steps)),
        "verified_success": sum(t.outcome == "success" and t.verified_by == "state" for t in trajs),
    }


def check(stats: dict, built, out: Path) -> None:
    want = expected_stats(built)
    assert {k: stats[k] for k in want} == want
    assert want["languages"] == {"en": 8, "zh": 4}  # the fixture has both languages
    manifest = json.loads((out / "manifest.json").read_text())
    assert stats["shards"] == len(manifest["shards"])
    assert sum(s["trajectories"] for s in stats["splits"].values()) == want["trajectories"]
    assert {k: v["steps"] for k, v in stats["splits"].items()} == {
        k: v["samples"] for k, v in manifest["splits"].items()
    }
    # Per-platform figures add up to the totals and match the trajectories.
    trajs, steps = built.trajectories.values(), [s for ss in built.steps.values() for s in ss]
    for name, p in stats["by_platform"].items():
        mine = [t for t in trajs if t.platform == name]
        assert p["trajectories"] == len(mine)
        assert p["languages"] == dict(Counter(t.task.language for t in mine))
        ids = {t.trajectory_id for t in mine}
        assert p["action_types"] == dict(
            Counter(s.action.type.value for s in steps if s.trajectory_id in ids)
        )
    assert sum(p["steps"] for p in stats["by_platform"].values()) == stats["steps"]


def test_stats_json_in_process(built, out):
    result = runner.invoke(app, ["stats", str(out), "--json"])
    assert result.exit_code == 0, result.output
    check(json.loads(result.stdout), built, out)


def test_stats_json_from_the_installed_script(built, out):
    assert SCRIPT.exists(), f"{SCRIPT} missing: run `pip install -e .`"
    proc = subprocess.run(
        [str(SCRIPT), "stats", str(out), "--json"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stdout.strip().splitlines()) == 1  # one JSON object
    check(json.loads(proc.stdout), built, out)


def test_stats_table_is_readable(out):
    result = runner.invoke(app, ["stats", str(out)])
    assert result.exit_code == 0
    assert "trajectories      12" in result.stdout and "zh" in result.stdout


@pytest.mark.parametrize("problem", ["missing", "no_manifest", "bad_json", "bad_field", "bad_shard"])
def test_bad_input_is_one_line_and_exit_2(tmp_path, problem):
    target = tmp_path / "d"
    if problem != "missing":
        target.mkdir()
    if problem == "bad_json":
        (target / "manifest.json").write_text("{not json")
    if problem == "bad_field":
        (target / "manifest.json").write_text('{"dataset": "x", "version": "1", "splits": [], "shards": []}')
    if problem == "bad_shard":
        shard = {
            "name": "train-000000.tar",
            "split": "train",
            "samples": 1,
            "trajectories": 1,
            "bytes": 9,
            "sha256": "0" * 64,
        }
        (target / "manifest.json").write_text(
            json.dumps({"dataset": "x", "version": "1", "splits": {"train": {}}, "shards": [shard]})
        )
        (target / "train-000000.tar").write_bytes(b"not a tar")
    proc = subprocess.run(
        [str(SCRIPT), "stats", str(target), "--json"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and str(target) in lines[0]
    assert "Traceback" not in proc.stderr


def test_export_command_uses_the_data_root(built, tmp_path):
    data = tmp_path / "data"
    (data).mkdir()
    os.symlink(built.root, data / "raw")
    result = runner.invoke(
        app, ["export", "--data", str(data), "--dataset", "cli", "--no-progress", "--max-samples", "5"]
    )
    assert result.exit_code == 0, result.output
    out = data / "shards" / "cli"
    stats = json.loads(runner.invoke(app, ["stats", str(out), "--json"]).stdout)
    assert stats["steps"] == built.num_steps and stats["dataset"] == "cli"
    assert runner.invoke(app, ["verify", str(out)]).exit_code == 0
    # $TRAJFORGE_DATA is the default root; a missing raw store is a one-line error.
    missing = runner.invoke(app, ["export", "--no-progress"], env={"TRAJFORGE_DATA": str(tmp_path / "none")})
    assert missing.exit_code == 2 and "no raw store at" in missing.output
