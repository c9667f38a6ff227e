"""The processes desktop sessions started (X servers, buses, apps), by whose sessions.

Each carries its session's token, "<owner pid>.<random>" (crawlers.desktop_session):
the sessions of the owners named (default: this test process) are counted, another
test run's are not.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

TOKEN = b"TRAJFORGE_DESKTOP_SESSION="


def session_pids(owners: set[int] | None = None) -> set[int]:
    """Every live process of a desktop session that one of `owners` opened."""
    owners = {os.getpid()} if owners is None else owners
    prefixes = tuple(TOKEN + f"{pid}.".encode() for pid in owners)
    out = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if any(v.startswith(prefixes) for v in f.read().split(b"\0")):
                    out.add(int(entry))
        except OSError:
            continue
    return out


def assert_nothing_left(before: set[int], owners: set[int] | None = None) -> None:
    deadline = time.monotonic() + 3
    while session_pids(owners) - before and time.monotonic() < deadline:
        time.sleep(0.1)
    left = session_pids(owners) - before
    names = {p: Path(f"/proc/{p}/comm").read_text().strip() for p in left if Path(f"/proc/{p}").exists()}
    assert not names, f"processes left behind: {names}"
