"""Per-session app state. Each browser context (or device) is one session.

State lives on the server, so success is decided from state, never from
pixels, and the same check works for a browser, an emulated phone or a real
device that loads these pages.
"""

from __future__ import annotations

import copy
import random
import threading
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Session:
    sid: str
    app: str
    lang: str  # "en" | "zh"
    seed: int
    theme: str = "light"  # "light" | "dark"
    font_scale: float = 1.0
    distraction_rate: float = 0.0  # chance of a distraction on each page load
    state: dict[str, Any] = field(default_factory=dict)
    distractions: list[str] = field(default_factory=list)  # shown so far, in order
    page_loads: int = 0
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False)

    def rng(self, salt: str) -> random.Random:
        """A generator fixed by the session's seed, so runs are reproducible."""
        return random.Random(f"{self.seed}:{self.sid}:{salt}")

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {
                "sid": self.sid,
                "app": self.app,
                "lang": self.lang,
                "seed": self.seed,
                "theme": self.theme,
                "font_scale": self.font_scale,
                "distractions": list(self.distractions),
                "page_loads": self.page_loads,
                "state": copy.deepcopy(self.state),
            }


class SessionRegistry:
    def __init__(self):
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()

    def put(self, session: Session) -> None:
        with self._lock:
            self._sessions[session.sid] = session

    def get(self, sid: str | None) -> Session | None:
        if sid is None:
            return None
        with self._lock:
            return self._sessions.get(sid)

    def drop(self, sid: str) -> None:
        with self._lock:
            self._sessions.pop(sid, None)

    def __len__(self) -> int:
        return len(self._sessions)
