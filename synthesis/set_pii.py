"""A set's personal-data figures, for its manifest and the dataset card.

The curation writes one audit line per value it found (filters/stages/write.py,
`pii_audit.jsonl` beside the curated store): trajectory, step (None for the task
text), kind, field, whether it was replaced by a surrogate or kept as a source's
synthetic value, and the box where it was drawn (blurred). A set counts the lines
of exactly the steps it holds, so its card says what happened to its own samples,
not to the whole curated store. Values are never in the audit, so never here.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

from filters.stages.write import PII_AUDIT

_INDEX = re.compile(r"\[\d+\]")


def audit_beside(store_root) -> Path | None:
    """Where the curation put the audit of a local curated store (`<curated>/store`);
    None for a store in object storage (its root is a bucket path, not a Path)."""
    return Path(store_root).parent / PII_AUDIT if isinstance(store_root, Path) else None


class PersonalData:
    """Collects the (trajectory, step) pairs a set writes; `figures` reads the audit once."""

    def __init__(self):
        self.steps: set[tuple[str, int]] = set()
        self.trajectories: set[str] = set()

    def add(self, trajectory_id: str, index: int) -> None:
        self.steps.add((trajectory_id, int(index)))
        self.trajectories.add(trajectory_id)

    def figures(self, audit: Path | str | None) -> dict:
        if audit is None or not Path(audit).is_file():
            return {
                "audit": None,
                "steps": len(self.steps),
                "note": "no curation audit (pii_audit.jsonl) beside the curated store: "
                "personal data not counted",
            }
        replaced, kept, fields = Counter(), Counter(), Counter()
        steps_with, blurred = set(), 0
        with open(audit, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                try:
                    r = json.loads(line)
                    tid, index = r["trajectory_id"], r["index"]
                    mine = tid in self.trajectories if index is None else (tid, index) in self.steps
                    if not mine:
                        continue
                    (kept if r["action"] == "kept_synthetic" else replaced)[r["kind"]] += 1
                    fields[_INDEX.sub("[]", r["field"])] += 1  # "elements[52].name" -> "elements[].name"
                except (ValueError, KeyError) as err:
                    raise ValueError(f"{audit}: line {n}: not an audit record ({err!r})") from None
                if index is not None:
                    steps_with.add((tid, index))
                if r.get("box") is not None and r["action"] != "kept_synthetic":
                    blurred += 1
        return {
            "audit": PII_AUDIT,
            "steps": len(self.steps),
            "steps_with_personal_data": len(steps_with),
            "replaced_by_surrogates": dict(sorted(replaced.items())),
            "kept_synthetic": dict(sorted(kept.items())),
            "fields": dict(sorted(fields.items())),
            "blurred_in_screenshots": blurred,
        }
