"""Where data lives. Everything goes under $TRAJFORGE_DATA (default ./data)."""

from __future__ import annotations

import os
from pathlib import Path


def data_root() -> Path:
    return Path(os.environ.get("TRAJFORGE_DATA", "data")).resolve()
