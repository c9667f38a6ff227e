"""Provenance: the pipeline version and the git commit a record or a set was made with.

- `pipeline_version()`: the installed `trajforge` distribution's version
  (importlib.metadata), else the `version` line of the checkout's pyproject.toml,
  else "unknown";
- `git_commit()`: `git rev-parse HEAD` of the checkout this package runs from,
  else $TRAJFORGE_GIT_COMMIT (an image built without .git sets it), else
  "unknown". Never raises: a missing git or a copied tree is "unknown", not an error;
- `build_id()`: both in one PEP 440 string, "0.1.0+g<first 12 hex of the commit>"
  ("0.1.0" when the commit is unknown): what a trajectory's `pipeline_version` holds,
  so a record names its commit without a column of its own.

Looked up once per process (a run's records all name the same code).
"""

from __future__ import annotations

import os
import re
import subprocess
from functools import lru_cache
from importlib import metadata
from pathlib import Path

COMMIT_ENV = "TRAJFORGE_GIT_COMMIT"
UNKNOWN = "unknown"
_ROOT = Path(__file__).resolve().parents[1]
_SHA = re.compile(r"^[0-9a-f]{40}$")


@lru_cache(maxsize=1)
def pipeline_version() -> str:
    try:
        return metadata.version("trajforge")
    except metadata.PackageNotFoundError:
        pass
    try:
        text = (_ROOT / "pyproject.toml").read_text(encoding="utf-8")
    except OSError:
        return UNKNOWN
    m = re.search(r'^version\s*=\s*"([^"]+)"', text, re.MULTILINE)
    return m.group(1) if m else UNKNOWN


@lru_cache(maxsize=1)
def git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(_ROOT), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
        sha = out.stdout.strip()
        if out.returncode == 0 and _SHA.match(sha):
            return sha
    except (OSError, subprocess.SubprocessError):
        pass
    env = os.environ.get(COMMIT_ENV, "").strip().lower()
    return env if re.fullmatch(r"[0-9a-f]{7,40}", env) else UNKNOWN


def build_id() -> str:
    version, commit = pipeline_version(), git_commit()
    return version if commit == UNKNOWN else f"{version}+g{commit[:12]}"


def provenance(**extra) -> dict:
    """{"pipeline_version", "git_commit", **extra}: what a manifest and a sample record."""
    return {"pipeline_version": pipeline_version(), "git_commit": git_commit(), **extra}
