"""`trajforge train`: a set trained with one of the engines (training/engines), and the
builtin loop's online RL and evaluation (training/online.py, training/evaluate.py).

`train online` and `train eval` run the entry points `python -m training.online` and
`python -m training.evaluate` run, with the same options (`--config`, `--set FIELD=VALUE`).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import typer

from trajforge.cli.output import fail, to_stderr

app = typer.Typer(
    name="train",
    help="Train on a set with one of the engines (sft, rl); online RL and evaluation (online, eval).",
    no_args_is_help=True,
)


def _engine_command(kind: str):
    """The `trajforge train <kind>` command: one request to an engine (sft and rl take the same options)."""

    def command(
        engine: str = typer.Option("builtin", help="builtin, trl, swift, llamafactory, verl or easyr1"),
        set_dir: Path = typer.Option(..., "--set", help="a reasoning or grounding set (a shard folder)"),
        model: str = typer.Option(
            ..., help="a local model directory, or `tiny` (the offline random-weight model)"
        ),
        out: Path = typer.Option(..., help="where the configs, the converted data and the checkpoint go"),
        gpus: int = typer.Option(1, help="GPUs per node (0: CPU)"),
        nodes: int = typer.Option(1, help="nodes"),
        max_steps: int | None = typer.Option(None, help="optimiser steps; default the engine's"),
        option: list[str] = typer.Option(
            [], "--option", help="an engine field, KEY=VALUE (JSON value; repeatable)"
        ),
        dry_run: bool = typer.Option(
            False, "--dry-run", help="print the exact command and configuration; run nothing"
        ),
    ) -> None:
        _train_with_engine(kind, engine, set_dir, model, out, gpus, nodes, max_steps, option, dry_run)

    return command


for _kind, _what in (("sft", "Supervised fine-tuning"), ("rl", "RL")):
    app.command(
        _kind,
        help=f"{_what} on a set with one of the engines labs use (docs/training.md).\n\n"
        "Exit code: the engine's own when it fails (its output is on the terminal).",
    )(_engine_command(_kind))


def _train_with_engine(kind, engine, set_dir, model, out, gpus, nodes, max_steps, option, dry_run) -> None:
    """The engine's plan for the request: printed (--dry-run), or the set converted and the engine run."""
    import subprocess

    from training.engines import EngineError, TrainRequest, plan

    options = {}
    for item in option:
        key, sep, value = item.partition("=")
        if not sep or not key:
            fail(f"--option {item!r}: expected KEY=VALUE")
        try:
            options[key] = json.loads(value)
        except json.JSONDecodeError:
            options[key] = value
    try:
        if not (set_dir / "manifest.json").is_file():
            raise EngineError(f"--set {set_dir}: no manifest.json (not a shard set)")
        request = TrainRequest(kind, set_dir.resolve(), model, out.resolve(), gpus, nodes, max_steps, options)
        launch = plan(engine, request)
    except EngineError as err:
        fail(str(err))
    from trajforge.convert import ConvertError, converted, ensure_converted

    if dry_run:
        typer.echo(launch.describe(request.out), nl=False)
        for c in launch.conversions:
            done = converted(c.set_dir, c.format, c.out)
            typer.echo(f"# {c.out}: {'holds this version of the set' if done else 'would be converted'}")
        return
    launch.write(request.out)
    try:
        for c in launch.conversions:
            if ensure_converted(c.set_dir, c.format, c.out) is not None:
                to_stderr(f"converted {c.set_dir} to {c.format} under {c.out}")
        launch.prepare()
    except ConvertError as err:
        fail(str(err))
    except (OSError, ValueError) as err:
        fail(f"engine {engine}: preparing the run: {err}")
    import os

    code = subprocess.call(launch.argv, cwd=launch.cwd, env={**os.environ, **launch.env})
    if code != 0:
        to_stderr(f"error: engine {engine} exited with {code}")
        raise typer.Exit(code)


def _builtin_entry(main, config: Path | None, overrides: list[str]) -> None:
    """Run a builtin loop's entry point (`main(argv)` of `python -m training.X`) on these options."""
    from training.config import ConfigError

    logging.basicConfig(level=logging.INFO)  # the per-iteration lines, as under `python -m`
    argv = ([] if config is None else ["--config", str(config)]) + [
        a for o in overrides for a in ("--set", o)
    ]
    try:
        main(argv)
    except ConfigError as err:
        fail(str(err))


CONFIG = typer.Option(None, "--config", help="the YAML/JSON config (under Dagster Pipes: extras['config'])")
OVERRIDES = typer.Option([], "--set", metavar="FIELD=VALUE", help="override a config field (repeatable)")


@app.command()
def online(config: Path | None = CONFIG, overrides: list[str] = OVERRIDES) -> None:
    """Online GRPO: the policy plays environments (OnlineRLConfig, `python -m training.online`)."""
    from training.online import main

    _builtin_entry(main, config, overrides)


@app.command("eval")
def evaluate(config: Path | None = CONFIG, overrides: list[str] = OVERRIDES) -> None:
    """Offline step accuracy and online task success (EvalConfig, `python -m training.evaluate`)."""
    from training.evaluate import main

    _builtin_entry(main, config, overrides)
