"""`trajforge serve` as a subprocess for the tests that play over HTTP, and small environment
files over the tiny app of tests/envs/conftest.py."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def tiny_env_file(
    folder: Path,
    tiny_url: str,
    *,
    name: str = "tiny",
    task: str | None = None,
    verdict: str | None = None,
    max_steps: int = 3,
) -> Path:
    """An environment file over the tiny counter app without tasks. `verdict`: the explore
    verifier's JS (default: done once Add was pressed, a success when pressed exactly
    once); `task`: a fixed instruction (default the page's, through instruction_js)."""
    verdict = verdict or (
        "(() => { const n = +(document.body.dataset.n || 0); "
        "return {done: n >= 1, success: n === 1, reason: 'pressed ' + n}; })()"
    )
    instruction = f"'{task}'" if task else "document.querySelector('h1').dataset.task"
    path = folder / f"{name}.yaml"
    path.write_text(
        f"""name: {name}
platform: web
start_url: {tiny_url}/
viewport: {{width: 800, height: 600}}
instruction_js: "{instruction}"
explore:
  max_steps: {max_steps}
  verifier:
    kind: js
    expression: "{verdict}"
""",
        encoding="utf-8",
    )
    return path


@dataclass
class Served:
    url: str
    proc: subprocess.Popen


@contextmanager
def serve(
    *sources: Path | str,
    record_to: Path,
    max_sessions: int = 2,
    idle_timeout: float = 60.0,
    extra: tuple[str, ...] = (),
    stop_timeout_s: float = 60.0,
) -> Iterator[Served]:
    """The server over `sources` on a free port (`extra`: more of its options, such as
    --ray-address). Stopped with SIGINT at the exit."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    args = [
        sys.executable, "-m", "trajforge.cli", "serve", *map(str, sources), "--port", "0",
        "--max-sessions", str(max_sessions), "--idle-timeout", str(idle_timeout), "--record-to", str(record_to),
        *extra,
    ]  # fmt: skip
    proc = subprocess.Popen(args, env=env, stderr=subprocess.PIPE, text=True, start_new_session=True)
    url = None
    deadline = time.monotonic() + 90
    while url is None and time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line and proc.poll() is not None:
            raise AssertionError(f"trajforge serve exited {proc.returncode}")
        found = re.search(r"on (http://\S+)", line)
        url = found.group(1) if found else None
    # The rest of stderr is drained (a full pipe would stop the server) and kept for a failure.
    log: list[str] = []
    threading.Thread(target=lambda: log.extend(proc.stderr), daemon=True).start()
    try:
        assert url, "trajforge serve never said where it listens"
        yield Served(url, proc)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=stop_timeout_s)
