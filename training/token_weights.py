"""The weight of an answer token from the characters it covers (the rule of training.loss).

A token overlapping a coordinates span weighs alpha_coord, else one overlapping an
action span alpha_action, else 1. Dependency-free on purpose: training.data applies
it here, and the ms-swift loss-scale plugin (training/engines/swift_plugin.py)
applies it inside ms-swift's own venv, so both trainers weigh a token the same.
"""

from __future__ import annotations

ALPHA_ACTION = 2.0
ALPHA_COORD = 4.0


def token_weights(
    offsets: list[tuple[int, int]],
    spans: dict[str, list[tuple[int, int]]],
    alpha_action: float,
    alpha_coord: float,
) -> list[float]:
    """One weight per token from its character range: coords beat action beat 1."""

    def hits(s: int, e: int, kind: str) -> bool:
        return any(s < b and e > a for a, b in spans[kind])

    return [
        alpha_coord if hits(s, e, "coords") else alpha_action if hits(s, e, "action") else 1.0
        for s, e in offsets
    ]
