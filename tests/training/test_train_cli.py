"""`trajforge train online` and `trajforge train eval`: the builtin loop's entry points
(`python -m training.online` / `training.evaluate`) with the same options, run in process."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from training.pipes_report import parse_metrics_line
from trajforge.cli import app

from .conftest import TINY_IMAGE_PIXELS
from .sandbox_fixtures import sandbox  # noqa: F401

runner = CliRunner()


@pytest.mark.parametrize("command", ["online", "eval"])
def test_help_names_the_entry_points_options(command):
    r = runner.invoke(app, ["train", command, "--help"])
    assert r.exit_code == 0, r.output
    assert "--config" in r.output and "--set" in r.output


@pytest.mark.parametrize("command", ["online", "eval"])
def test_a_missing_config_file_is_one_line_and_exit_2(command, tmp_path):
    r = runner.invoke(app, ["train", command, "--config", str(tmp_path / "none.yaml")])
    assert r.exit_code == 2 and "no such config file" in r.output and "Traceback" not in r.output


def test_eval_runs_the_example_config_with_overrides(tiny_model, small_reasoning_set):
    args = ["train", "eval", "--config", "examples/train/eval_tiny.yaml"]
    for field, value in [
        ("model_path", tiny_model),
        ("shards", small_reasoning_set),
        ("store", "null"),  # offline only: no environment
        ("max_samples", 2),
        ("max_new_tokens", 4),
        ("device", "cpu"),
    ]:
        args += ["--set", f"{field}={value}"]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    metrics = parse_metrics_line(r.stdout)  # stderr: the progress bars
    assert metrics["kind"] == "eval" and metrics["offline_samples"] == 2
    assert not any(k.startswith("online_") for k in metrics)


def test_online_plays_one_iteration_in_the_sandbox(tiny_model, sandbox, tmp_path):  # noqa: F811
    config = tmp_path / "online.json"
    config.write_text(
        json.dumps(
            {
                "model_path": str(tiny_model),
                "out_dir": str(tmp_path / "ckpt"),
                "store": str(tmp_path / "raw"),
                "server_url": sandbox.url,
                "tasks": ["settings.wifi"],
                "devices": ["desktop"],
                "k": 2,
                "iterations": 1,
                "tasks_per_iteration": 1,
                "max_steps": 2,
                "max_new_tokens": 4,
                "device": "cpu",
                "image_max_pixels": TINY_IMAGE_PIXELS,
            }
        )
    )
    r = runner.invoke(app, ["train", "online", "--config", str(config), "--set", "lr=0.001"])
    assert r.exit_code == 0, r.output
    metrics = parse_metrics_line(r.stdout)  # stderr: the progress bars
    assert metrics["checkpoint_id"].startswith("online-") and (
        metrics["iterations"],
        metrics["rollouts"],
    ) == (1, 2)
    assert (tmp_path / "ckpt" / metrics["checkpoint_id"] / "metrics.json").is_file()
