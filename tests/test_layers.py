"""The layers of DESIGN.md, read from the import statements of the source (ast).

The graph's nodes are the top-level packages, with `trajforge` counted as its stage
subpackages (`trajforge.store`, `trajforge.publish`, ...): they sit at different
layers. Every import counts, at module level or inside a function.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = (
    "schemas",
    "crawlers",
    "sandbox",
    "filters",
    "synthesis",
    "training",
    "trajforge",
    "dagster_project",
)

# Lowest first: a unit imports only from a lower layer (never its own layer's other units).
LAYERS = [
    {"schemas"},
    {"trajforge.config", "trajforge.store", "trajforge.vlm"},
    {"trajforge.tasks", "trajforge.publish"},
    {"crawlers", "trajforge.importers"},
    {"sandbox"},
    {"filters"},
    {"synthesis"},
    # The Gym API: plays environments (crawlers, sandbox), shapes rewards (synthesis).
    {"trajforge.envs"},
    {"trajforge.read", "trajforge.report"},
    {"trajforge.convert", "training"},
    {"trajforge.cli", "dagster_project"},
]
# DESIGN.md's rules beyond the order: curation and synthesis work on recorded data, never
# a live browser; training plays environments only through the Gym API.
FORBIDDEN = {
    ("filters", "crawlers"),
    ("filters", "sandbox"),
    ("synthesis", "crawlers"),
    ("synthesis", "sandbox"),
    ("training", "crawlers"),
    ("training", "sandbox"),
}
# Edges that break a rule today, each with the work that removes it. This list may only
# shrink: an entry whose edge is gone fails test_every_exception_is_still_needed.
ALLOWED_EXCEPTIONS: dict[tuple[str, str], str] = {}


def unit_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] not in PACKAGES:
        return None
    if parts[0] == "trajforge" and len(parts) > 1:
        return f"trajforge.{parts[1]}"
    return parts[0]


def _module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported_modules(path: Path, root: Path = ROOT) -> set[str]:
    """Absolute names of everything the file imports (relative imports resolved)."""
    here = _module_name(path, root).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            out.add(module)
            out.update(f"{module}.{alias.name}" for alias in node.names)
    return out


def package_graph() -> dict[tuple[str, str], set[str]]:
    """(unit, unit it imports) -> the files that make the edge."""
    edges: dict[tuple[str, str], set[str]] = defaultdict(set)
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            source = unit_of(_module_name(path))
            for module in _imported_modules(path):
                target = unit_of(module)
                if target and target not in (source, "trajforge"):
                    edges[(source, target)].add(str(path.relative_to(ROOT)))
    return edges


def cycles(edges) -> list[list[str]]:
    """Strongly connected components of more than one unit (Tarjan)."""
    graph = defaultdict(set)
    for a, b in edges:
        graph[a].add(b)
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def layer_of(unit: str) -> int:
    for i, layer in enumerate(LAYERS):
        if unit in layer:
            return i
    raise AssertionError(f"{unit} is in no layer of tests/test_layers.py: place it")


def broken_rules(edges) -> dict[tuple[str, str], list[str]]:
    return {
        (a, b): sorted(files)
        for (a, b), files in edges.items()
        if (layer_of(b) >= layer_of(a) or (a, b) in FORBIDDEN)
    }


def test_every_unit_has_a_layer():
    units = {u for edge in package_graph() for u in edge}
    for path in (ROOT / "trajforge").iterdir():
        if path.is_dir() and (path / "__init__.py").exists() or path.suffix == ".py":
            if path.stem != "__init__":
                units.add(f"trajforge.{path.stem}")
    for unit in units:
        layer_of(unit)


def test_no_cycle_between_packages():
    assert cycles(package_graph()) == []


def test_no_edge_the_layers_forbid():
    broken = {
        edge: files for edge, files in broken_rules(package_graph()).items() if edge not in ALLOWED_EXCEPTIONS
    }
    assert not broken, f"imports that break DESIGN.md's layers: {broken}"


def test_every_exception_is_still_needed():
    broken = broken_rules(package_graph())
    stale = sorted(edge for edge in ALLOWED_EXCEPTIONS if edge not in broken)
    assert not stale, f"remove these from ALLOWED_EXCEPTIONS, the edge is gone: {stale}"


def test_the_check_sees_a_cycle_and_a_forbidden_edge():
    made_up = {
        ("trajforge.store", "crawlers"): {"a.py"},
        ("crawlers", "trajforge.store"): {"b.py"},
        ("filters", "sandbox"): {"c.py"},
    }
    assert cycles(made_up) == [["crawlers", "trajforge.store"]]
    assert set(broken_rules(made_up)) == {("trajforge.store", "crawlers"), ("filters", "sandbox")}


def test_imports_inside_functions_and_relative_ones_are_counted(tmp_path):
    """A lazy import is an edge like any other (they hid cycles before)."""
    package = tmp_path / "trajforge" / "store"
    package.mkdir(parents=True)
    (package / "late.py").write_text(
        "def f():\n    from crawlers.guard import SafetyGuard\n    from ..publish import shards\n"
    )
    found = _imported_modules(package / "late.py", tmp_path)
    assert {"crawlers.guard", "trajforge.publish.shards"} <= found
    assert {unit_of(m) for m in found} >= {"crawlers", "trajforge.publish"}
