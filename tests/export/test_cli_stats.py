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

from schemas.records import is_verified_success
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
        "verified_success": sum(is_verified_success(t.outcome, t.verified_by) for t in trajs),
        "verified_by": dict(Counter(t.verified_by for t in trajs)),
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


def test_successes_of_every_verifier_kind_count_as_verified(tmp_path):
    """js, http and python verdicts are verified like state ones; a dataset's label and
    an unverified success are not. The CLI shows the split by kind."""
    from schemas.actions import Action
    from schemas.records import DeviceProfile, Step, Task, Trajectory
    from tests.export.shard_fixtures import H, W, screenshot
    from trajforge.store.raw import RawStore

    store = RawStore(tmp_path / "raw")
    kinds = [("js", "success"), ("js", "success"), ("http", "success"), ("http", "failure")]
    kinds += [("python", "success"), ("state", "success"), ("dataset", "success"), ("none", "unknown")]
    with store.writer("env/notes") as w:
        for i, (kind, outcome) in enumerate(kinds):
            tid = f"traj-{i}"
            task = Task(task_id=f"t{i}", instruction="Save the note", language="en", app="notes")
            traj = Trajectory(
                trajectory_id=tid,
                task=task,
                platform="web",
                app="notes",
                policy="oracle",
                device=DeviceProfile(viewport_width=W, viewport_height=H),
                outcome=outcome,
                verified_by=kind,
                verifier=None if kind in ("none", "dataset") else kind,
                reward=None if kind in ("none", "dataset") else float(outcome == "success"),
                num_steps=1,
                seed=i,
            )
            sha = store.blobs.put(screenshot(i), "png")
            step = Step(
                trajectory_id=tid,
                index=0,
                screenshot=sha,
                image_format="png",
                width=W,
                height=H,
                url="http://127.0.0.1/notes",
                action=Action.tap(0.5, 0.5),
                started_at=1000.0 + i,
            )
            w.add(traj, [step])
    out = tmp_path / "shards"
    export_shards(store, out, dataset="notes")
    proc = subprocess.run(
        [str(SCRIPT), "stats", str(out), "--json"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    stats = json.loads(proc.stdout)
    assert stats["verified_success"] == 5
    assert stats["verified_success_by"] == {"http": 1, "js": 2, "python": 1, "state": 1}
    assert stats["verified_by"] == {"dataset": 1, "http": 2, "js": 2, "none": 1, "python": 1, "state": 1}
    assert stats["by_platform"]["web"]["verified_success"] == 5
    table = subprocess.run([str(SCRIPT), "stats", str(out)], capture_output=True, text=True, timeout=120)
    assert "verified_success  5  (http 1, js 2, python 1, state 1)" in table.stdout, table.stdout
