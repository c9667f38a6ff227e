"""The `trajforge` command: export shards, count them, check them.

Bad input (a missing folder, a broken manifest or shard) ends with a one-line
error on stderr and exit code 2, never a traceback.
"""
from __future__ import annotations

import json
import sys
import tarfile
from pathlib import Path
from typing import List, Optional

import typer

from schemas.errors import SchemaError

from .config import data_root

app = typer.Typer(help="trajforge: GUI-agent trajectories to training data.",
                  no_args_is_help=True, add_completion=False,
                  pretty_exceptions_show_locals=False)

EXIT_BAD_INPUT = 2


def _fail(message: str) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(EXIT_BAD_INPUT)


@app.command()
def stats(shard_dir: Path = typer.Argument(..., help="a shard folder (with manifest.json)"),
          as_json: bool = typer.Option(False, "--json", help="print one JSON object")) -> None:
    """Count trajectories, steps, languages, actions... in exported shards."""
    from .stats import format_table, shard_stats
    try:
        result = shard_stats(shard_dir)
    except (SchemaError, tarfile.TarError, OSError) as err:
        _fail(str(err))
    typer.echo(json.dumps(result, ensure_ascii=False, sort_keys=True) if as_json
               else format_table(result))


@app.command()
def verify(shard_dir: Path = typer.Argument(..., help="a shard folder (with manifest.json)")) -> None:
    """Check every shard's size and sha256 against the manifest."""
    from .shards import verify as verify_shards
    try:
        problems = verify_shards(shard_dir)
    except (SchemaError, OSError) as err:
        _fail(str(err))
    for p in problems:
        typer.echo(p, err=True)
    if problems:
        _fail(f"{len(problems)} problem(s) in {shard_dir}")
    typer.echo(f"ok: {shard_dir}")


@app.command()
def export(
    data: Optional[Path] = typer.Option(None, help="data root; default $TRAJFORGE_DATA or ./data"),
    raw: Optional[Path] = typer.Option(None, help="raw store; default <data>/raw"),
    dataset: str = typer.Option("sandbox", help="dataset name"),
    out: Optional[Path] = typer.Option(None, help="shard folder; default <data>/shards/<dataset>"),
    collection: Optional[List[str]] = typer.Option(None, help="collections to export (repeatable); default all"),
    max_samples: int = typer.Option(1000, help="most samples per shard"),
    max_bytes: int = typer.Option(500_000_000, help="most bytes per shard"),
    split_seed: str = typer.Option("v1", help="seed of the train/val/test assignment"),
    progress: bool = typer.Option(True, help="show a progress bar on stderr"),
) -> None:
    """Export the raw store to WebDataset shards split by trajectory."""
    from .export import export_shards
    from .store import RawStore
    root = (data or data_root()).resolve()
    raw = (raw or root / "raw").resolve()
    out = (out or root / "shards" / dataset).resolve()
    if not raw.is_dir():
        _fail(f"no raw store at {raw}")
    store = RawStore(raw)
    bar = None
    if progress:
        from tqdm import tqdm
        total = sum(t.num_steps for t in store.iter_trajectories(collection or None))
        bar = tqdm(total=total, unit="step", desc=f"export {dataset}", file=sys.stderr)
    try:
        result = export_shards(store, out, dataset=dataset, collections=collection or None,
                               max_samples_per_shard=max_samples, max_bytes_per_shard=max_bytes,
                               split_seed=split_seed, progress=None if bar is None else bar.update)
    except (SchemaError, ValueError, OSError) as err:
        _fail(str(err))
    finally:
        if bar is not None:
            bar.close()
    rate = result.samples / result.seconds if result.seconds else 0.0
    typer.echo(f"exported {result.samples} steps of {result.trajectories} trajectories to "
               f"{result.shards} shards ({result.bytes / 1e6:.1f} MB) in {out} "
               f"[{result.seconds:.1f} s, {rate:.0f} steps/s, version {result.manifest['version']}]")
    if result.skipped:
        typer.echo(f"quarantined: {result.skipped} (see {out / 'quarantine.jsonl'})", err=True)


if __name__ == "__main__":
    app()
