"""Prove no planted personal data survived: where the planted values leak.

What a session planted comes from its provider as a look-up `planted(app,
language, session seed) -> [{kind, value, where}]` (the sandbox's:
sandbox.planted_pii.planted_for); `planted_for_trajectory` asks it for the
session a crawled trajectory ran in. This module checks against the planted
list on purpose; the detectors in filters/pii.py never see it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from urllib.parse import unquote

from schemas.records import LIVE_SOURCES, Trajectory, session_seed

_DIGIT_SEPARATORS = re.compile(r"(?<=\d)[\s\-().]+(?=\d)")
_MIN_DIGITS = 7  # shorter digit strings (a ZIP code, a house number) are not evidence


# (app, language, session seed) -> the values planted in that session.
PlantedLookup = Callable[[str, str, int], list[dict]]


def planted_for_trajectory(traj: Trajectory, planted: PlantedLookup) -> list[dict]:
    """What was planted in the session a live trajectory ran in (none for imports)."""
    if traj.source not in LIVE_SOURCES:
        return []
    seed = session_seed(traj.task.params, traj.seed)
    return planted(traj.app, traj.task.language, seed)


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def find_leaks(texts: Iterable[str], planted: list[dict]) -> list[dict]:
    """Planted values found in `texts`: verbatim (case and spacing aside), URL-decoded,
    or as their digits without separators. One dict per (text, value) found:
    {kind, value, where, text_index, form}."""
    values = []
    for p in planted:
        digits = re.sub(r"\D", "", p["value"])
        values.append((p, _norm(p["value"]), digits if len(digits) >= _MIN_DIGITS else None))
    leaks = []
    for i, text in enumerate(texts):
        if not text:
            continue
        forms = {_norm(text), _norm(unquote(text))}
        joined = {_DIGIT_SEPARATORS.sub("", f) for f in forms}
        for p, norm_value, digits in values:
            if any(norm_value in f for f in forms):
                form = "exact"
            elif digits and any(digits in j for j in joined):
                form = "digits"
            else:
                continue
            leaks.append(
                {
                    "kind": p["kind"],
                    "value": p["value"],
                    "where": p.get("where"),
                    "text_index": i,
                    "form": form,
                }
            )
    return leaks
