"""The processes desktop sessions of this test process started (X servers, buses, apps).

Each carries its session's token, which starts with the id of the process that made
the session (crawlers.desktop_session): another test run's sessions are not counted.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

TOKEN = f"TRAJFORGE_DESKTOP_SESSION={os.getpid()}-".encode()


def session_pids(token: bytes = TOKEN) -> set[int]:
    """Every live process started by a desktop session of this process (`token`: another's)."""
    out = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if any(v.startswith(token) for v in f.read().split(b"\0")):
                    out.add(int(entry))
        except OSError:
            continue
    return out


def assert_nothing_left(before: set[int], token: bytes = TOKEN) -> None:
    deadline = time.monotonic() + 3
    while session_pids(token) - before and time.monotonic() < deadline:
        time.sleep(0.1)
    left = session_pids(token) - before
    names = {p: Path(f"/proc/{p}/comm").read_text().strip() for p in left if Path(f"/proc/{p}").exists()}
    assert not names, f"processes left behind: {names}"
