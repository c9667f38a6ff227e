"""`trajforge train`: a set trained with one of the engines (training/engines)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from trajforge.cli.output import fail, to_stderr

app = typer.Typer()


@app.command()
def train(
    kind: str = typer.Argument(..., metavar="sft|rl", help="supervised fine-tuning or RL"),
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
    """Train on a set with one of the engines labs use (docs/training.md).

    Exit code: the engine's own when it fails (its output is on the terminal).
    """
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
