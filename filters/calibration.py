"""Labelled screenshot pairs, to calibrate the near-duplicate radius: their keys and scores.

The pairs are drawn live by the sandbox (sandbox/calibration_pages.py
`draw_pairs`: real Chromium over real pages, EN and ZH, desktop and phone),
each two screenshots with their keys and a label: positives are the same
state drawn twice (a small scroll, a toast, a clock change), negatives other
pages of one template and hard negatives at the same URL.

Keys: the URL key (path + query, without the flash-message parameter) and, as a
variant, the a11y key (schemas.screen_signature of the page's aria snapshot).
This module reads the drawn pairs as recorded data: pHash, precision and recall.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from filters.phash import hamming, phash_bytes


@dataclass
class LabelledPair:
    name: str  # app/lang/kind/detail, for reports
    kind: str  # scroll | toast | clock | other_page | same_url
    label: bool  # True: near-duplicates (same state)
    image_a: bytes
    image_b: bytes
    key_a: str
    key_b: str
    a11y_a: str = ""
    a11y_b: str = ""
    hash_a: int = field(init=False)
    hash_b: int = field(init=False)

    def __post_init__(self):
        self.hash_a = phash_bytes(self.image_a)
        self.hash_b = phash_bytes(self.image_b)

    @property
    def distance(self) -> int:
        return hamming(self.hash_a, self.hash_b)

    def same_key(self, key: str = "url") -> bool:
        if key == "url":
            return self.key_a == self.key_b
        if key == "a11y":
            return self.a11y_a == self.a11y_b
        raise ValueError(f"unknown key {key!r} (url or a11y)")


def labelled_pairs(drawn: Iterable[dict]) -> list[LabelledPair]:
    """The drawn pairs (dicts of name, kind, label, image_a/b, key_a/b, a11y_a/b) with their hashes."""
    return [LabelledPair(**d) for d in drawn]


def evaluate(
    pairs: Iterable[LabelledPair], max_distance: int, use_key: bool = True, key: str = "url"
) -> dict:
    """Precision/recall of "near-duplicate" = distance <= max_distance (and same key)."""
    tp = fp = fn = tn = 0
    for p in pairs:
        predicted = p.distance <= max_distance and (not use_key or p.same_key(key))
        if predicted and p.label:
            tp += 1
        elif predicted:
            fp += 1
        elif p.label:
            fn += 1
        else:
            tn += 1
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    return {"precision": precision, "recall": recall, "tp": tp, "fp": fp, "fn": fn, "tn": tn}


def pr_table(pairs: list[LabelledPair], distances: Iterable[int] = range(33)) -> str:
    """Precision/recall per threshold for pHash alone, pHash + URL key, pHash + a11y key."""
    lines = ["  d | pHash P  R    | +URL P  R     | +a11y P  R"]
    for d in distances:
        cells = []
        for use_key, key in ((False, "url"), (True, "url"), (True, "a11y")):
            r = evaluate(pairs, d, use_key, key)
            cells.append(f"{r['precision']:.2f} {r['recall']:.2f}")
        lines.append(f"{d:3d} | " + " | ".join(f"{c:12s}" for c in cells))
    return "\n".join(lines)
