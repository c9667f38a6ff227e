"""Where a training run reports: Dagster Pipes when Dagster launched it, else stdout.

The training code talks to a `Reporter` (log, per-step metric, final metrics) and
never imports Dagster. `pipes_reporter()` picks the channel: under Dagster Pipes
(PipesSubprocessClient locally, PipesK8sClient on a GPU pod) the final metrics
become the asset materialisation's metadata; otherwise lines go to stdout, the
final metrics as one `TRAJFORGE_METRICS {json}` line that a caller can parse.
Only `dagster_pipes` (small, dependency-free) is imported, and lazily.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol, TextIO

METRICS_PREFIX = "TRAJFORGE_METRICS "
_PIPES_ENV = ("DAGSTER_PIPES_CONTEXT", "DAGSTER_PIPES_MESSAGES")
_MAX_TEXT = 2000  # metadata text values are cut here (a loss curve as JSON stays readable)


class Reporter(Protocol):
    """Progress and results of a run. `final` is called once, by the entry point's main()."""

    extras: dict[str, Any]  # what the launcher passed (Pipes extras; {} on stdout)

    def log(self, msg: str) -> None: ...

    def metric(self, step: int, **values: float) -> None: ...

    def final(self, metrics: dict[str, Any]) -> None: ...


def _fmt(values: dict[str, Any]) -> str:
    return " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in values.items())


class StdoutReporter:
    """Plain lines on a stream (stdout by default); collects what it was told."""

    def __init__(self, stream: TextIO | None = None):
        self.stream = stream
        self.metrics: list[dict[str, Any]] = []
        self.final_metrics: dict[str, Any] | None = None
        self.extras: dict[str, Any] = {}

    def _write(self, line: str) -> None:
        stream = self.stream or sys.stdout
        stream.write(line + "\n")
        stream.flush()

    def log(self, msg: str) -> None:
        self._write(msg)

    def metric(self, step: int, **values: float) -> None:
        self.metrics.append({"step": step, **values})
        self._write(f"step {step}: {_fmt(values)}")

    def final(self, metrics: dict[str, Any]) -> None:
        self.final_metrics = dict(metrics)
        self._write(METRICS_PREFIX + json.dumps(metrics, sort_keys=True, default=str))


def parse_metrics_line(output: str) -> dict[str, Any] | None:
    """The final metrics from a StdoutReporter's output (the last such line), or None."""
    found = None
    for line in output.splitlines():
        if line.startswith(METRICS_PREFIX):
            found = json.loads(line[len(METRICS_PREFIX) :])
    return found


def flat_metadata(metrics: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Numbers, text and booleans only, nested dicts flattened with dots; a list becomes
    JSON text (cut at 2000 characters); NaN/inf become text (metadata must be JSON)."""
    out: dict[str, Any] = {}
    for key, value in metrics.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flat_metadata(value, name + "."))
        elif isinstance(value, bool) or value is None:
            out[name] = value if value is not None else "null"
        elif isinstance(value, (int, float)):
            out[name] = value if math.isfinite(value) else str(value)
        elif isinstance(value, (list, tuple)):
            out[name] = json.dumps(list(value), default=str)[:_MAX_TEXT]
        else:
            out[name] = str(value)[:_MAX_TEXT]
    return out


def is_pipes_process() -> bool:
    """True when Dagster Pipes launched this process (its env vars are set)."""
    try:
        from dagster_pipes import PipesEnvVarParamsLoader

        return PipesEnvVarParamsLoader().is_dagster_pipes_process()
    except ImportError:
        return all(os.environ.get(v) for v in _PIPES_ENV)


class PipesReporter:
    """Reports through an open Dagster Pipes context; also echoes to stdout."""

    def __init__(self, context):
        self.context = context
        self.echo = StdoutReporter(sys.stderr)
        self.extras = dict(context.extras or {})

    def log(self, msg: str) -> None:
        self.context.log.info(msg)

    def metric(self, step: int, **values: float) -> None:
        self.echo.metric(step, **values)
        self.context.log.info(f"step {step}: {_fmt(values)}")

    def final(self, metrics: dict[str, Any]) -> None:
        from dagster_pipes import DagsterPipesError

        self.echo.final(metrics)
        metadata = flat_metadata(metrics)
        version = metrics.get("checkpoint_id")
        try:
            self.context.report_asset_materialization(
                metadata=metadata, data_version=str(version) if version else None
            )
        except DagsterPipesError:  # launched from an op (no asset in scope): a custom message
            self.context.report_custom_message(metadata)


@contextmanager
def pipes_reporter() -> Iterator[Reporter]:
    """`with pipes_reporter() as report:` in every training entry point's main()."""
    if not is_pipes_process():
        yield StdoutReporter()
        return
    from dagster_pipes import open_dagster_pipes

    with open_dagster_pipes() as context:
        yield PipesReporter(context)
