"""The command line every trainer shares: `python -m training.X --config FILE [--set F=V ...]`.

Under Dagster Pipes the config path and overrides may also come as extras
(`config`, `overrides`); the final metrics go back as the materialisation.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from .config import load_config
from .pipes_report import Reporter, pipes_reporter


def entry_point(
    argv: list[str] | None,
    *,
    prog: str,
    doc: str | None,
    config_cls: type,
    run: Callable[[Any, Reporter], dict],
    final: Callable[[dict], dict] = lambda metrics: metrics,
    reports_final: Callable[[], bool] = lambda: True,
) -> dict:
    """Parse, load the config, run it under a reporter and report `final(metrics)`
    (once: `reports_final` says whether this process is the one to, e.g. rank 0)."""
    parser = argparse.ArgumentParser(prog=prog, description=(doc or "").split("\n")[0])
    parser.add_argument(
        "--config", help=f"YAML/JSON {config_cls.__name__} (under Dagster Pipes: extras['config'])"
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="override a config field (repeatable)",
    )
    args = parser.parse_args(argv)
    with pipes_reporter() as report:
        config_path = args.config or report.extras.get("config")
        if not config_path:
            parser.error("--config is required")
        cfg = load_config(
            config_path,
            config_cls,
            list(args.overrides)
            + [f"{k}={json.dumps(v)}" for k, v in (report.extras.get("overrides") or {}).items()],
        )
        metrics = run(cfg, report)
        if reports_final():
            report.final(final(metrics))
    return metrics
