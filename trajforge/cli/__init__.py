"""The `trajforge` command: crawl an environment, export shards, count, validate, catalog, view.

One module per command group, joined here (typer's `add_typer`; a group added
without a name puts its commands at the top level): data.py, crawl.py, envs.py,
tasks.py, train.py; output.py holds how a command fails (exit code 2, one line on stderr,
never a traceback). `trajforge crawl` exits with 3 when every episode it played
errored (the causes are on stderr); `trajforge tasks validate` with 4 when it keeps no
task.

Each command imports its stage inside its function, on purpose: `trajforge stats`
must not pay for Playwright, Appium, DuckDB, fsspec or torch, which other commands
import. The CLI is the top of the package graph, so none of these hides a cycle.
"""

from __future__ import annotations

import signal
import sys

import typer

from trajforge.cli import crawl, data, envs, tasks, train

app = typer.Typer(
    help="trajforge: GUI-agent trajectories to training data.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
)
for group in (data, crawl, envs, tasks, train):
    app.add_typer(group.app)


@app.callback()
def _stop_cleanly_on_sigterm() -> None:
    # A SIGTERM (a scheduler's kill, `timeout`) unwinds like Ctrl-C: the browsers,
    # desktop sessions and servers a command opened are closed by their `finally`s,
    # not left running. (`trajforge serve` replaces it with uvicorn's own.)
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
