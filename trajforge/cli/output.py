"""What every command prints when it fails, and its lines on stderr.

Bad input (a missing folder, a broken manifest or shard) ends with a one-line
error on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import sys

import typer

EXIT_BAD_INPUT = 2
EXIT_ALL_ERRORED = 3  # crawl: every episode played errored
EXIT_NONE_KEPT = 4  # tasks validate: no task kept


def fail(message: str) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(EXIT_BAD_INPUT)


def to_stderr(line: str | None) -> None:
    """A line on stderr above the progress bar (tqdm's, on a terminal)."""
    if line is not None:
        from tqdm import tqdm

        tqdm.write(line, file=sys.stderr)
