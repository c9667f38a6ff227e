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
    assert not offenders, f"{package} imports what it must not: {offenders}"


def test_crawlers_know_no_sandbox():
    assert not [f for f, tops in imported_packages("crawlers").items() if "sandbox" in tops]
