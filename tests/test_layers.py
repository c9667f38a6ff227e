"""The layers of DESIGN.md, read from the import statements of each package."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def imported_packages(package: str) -> dict[str, set[str]]:
    """file -> the top-level packages it imports (at any depth, lazy imports included)."""
    out = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        tops = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                tops.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                tops.add(node.module.split(".")[0])
        out[str(path.relative_to(ROOT))] = tops
    return out


# Still to move (issue "Collect from any app", item 2): what plays live in a browser
# (reflection episodes, rollouts, reverse tasks) goes to collection; the agent's
# prompt renderer goes below crawlers. The list may only shrink.
STILL_TO_MOVE = {
    "synthesis/reflection.py": ["crawlers", "sandbox"],
    "synthesis/rollouts.py": ["crawlers", "sandbox"],
    "synthesis/reverse.py": ["crawlers", "sandbox"],
    "synthesis/backward.py": ["crawlers", "sandbox"],
    "synthesis/reflection_text.py": ["sandbox"],
    "crawlers/agent.py": ["synthesis"],
    "filters/calibration.py": ["sandbox"],
    "filters/pii_audit.py": ["sandbox"],
}


@pytest.mark.parametrize("package, forbidden", [
    ("schemas", {"crawlers", "sandbox", "filters", "synthesis", "trajforge", "training",
                 "dagster", "dagster_project"}),
    ("crawlers", {"sandbox", "filters", "synthesis", "training", "dagster", "dagster_project"}),
    ("filters", {"crawlers", "sandbox", "synthesis", "training", "dagster", "dagster_project"}),
    ("synthesis", {"crawlers", "sandbox", "training", "dagster", "dagster_project"}),
    ("sandbox", {"dagster", "dagster_project", "filters", "synthesis", "training"}),
    ("training", {"dagster", "dagster_project"}),
])
def test_a_layer_imports_only_from_below(package, forbidden):
    offenders = {f: sorted(tops & forbidden) for f, tops in imported_packages(package).items()
                 if tops & forbidden}
    unexpected = {f: bad for f, bad in offenders.items()
                  if not set(bad) <= set(STILL_TO_MOVE.get(f, []))}
    assert not unexpected, f"{package} imports what it must not: {unexpected}"


def test_the_still_to_move_list_only_shrinks():
    offenders = {}
    for package in ("crawlers", "filters", "synthesis"):
        offenders.update(imported_packages(package))
    moved = [f for f, bad in STILL_TO_MOVE.items() if not set(bad) & offenders.get(f, set())]
    assert not moved, f"these no longer import what they did: take them off STILL_TO_MOVE: {moved}"


def test_crawlers_know_no_sandbox():
    assert not [f for f, tops in imported_packages("crawlers").items() if "sandbox" in tops]
