"""The guard's audit log: every executed or blocked action of a crawl, one JSON line each.

The guard (crawlers/guard.py) decides; this file only records its decisions, so the
store, curation and the sets can read an audit without importing the live-browser layer.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from schemas.actions import Action
from schemas.records import Element


class AuditLog:
    """Every executed or blocked action, one JSON object a line.

    Appends go through one open handle in append mode and are flushed per
    line, so concurrent readers only ever see whole lines.
    """

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._file = None

    def record(
        self,
        *,
        trajectory_id: str,
        step_index: int,
        action: Action,
        target: Element | None,
        decision: Any,
        attempt: int = 0,
    ) -> None:
        entry = {
            "time": round(time.time(), 3),
            "trajectory_id": trajectory_id,
            "step_index": step_index,
            "attempt": attempt,
            "action": action.model_dump(mode="json", exclude_none=True),
            "target": None if target is None else target.model_dump(mode="json"),
            "decision": "allowed" if decision.allowed else "blocked",
            "category": decision.category,
            "reason": decision.reason,
        }
        line = json.dumps(entry, ensure_ascii=False, sort_keys=True) + "\n"
        with self._lock:
            if self._file is None:
                self._file = open(self.path, "a", encoding="utf-8")
            self._file.write(line)
            self._file.flush()

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def __enter__(self) -> AuditLog:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def read_audit(path: Path) -> list[dict]:
    path = Path(path)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
