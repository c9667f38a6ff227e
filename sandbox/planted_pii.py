"""The personal data the sandbox plants in a session: what the PII audits look for.

A crawled trajectory's session was started with `task.params.get("seed",
trajectory.seed)` (sandbox/crawl.py), so the values planted in it are
`planted_for(app, task.language, that seed)`. The audits (filters/audit.py)
take this look-up as an argument: filters read recorded data, never the sandbox.
"""

from __future__ import annotations

from sandbox.apps import APPS


def planted_for(app: str, lang: str, seed: int) -> list[dict]:
    """The sandbox app's planted values for a session ({kind, value, where}); none for
    an app the sandbox does not serve (a lab's own app, crawled through its
    environment file, plants nothing the sandbox knows of)."""
    if app not in APPS:
        return []
    return list(APPS[app].initial_state(lang, int(seed))["_planted_pii"])
