"""Which trajectories hold synthetic personal data: a registry of source names.

A trajectory records `source` ("crawl", "rollout" or "import") and `source_name` (for a
crawl, its environment's name: "sandbox" for the sandbox; derived runs add a
suffix: "sandbox:reflection", "sandbox:agent:<checkpoint>"). An environment
file declares `synthetic_data: true` when every personal value its app shows
is made up by the app itself (the sandbox plants its own users, cards and
addresses). Curation is handed the names of such sources
(`CurateConfig.synthetic_sources`; the Dagster assets build it from the
environment files with `synthetic_source_names`) and treats a trajectory as
synthetic when it was played live (a crawl or a rollout; never an import: imports
are real data, whatever their name) in one of them or a run derived from one. Nothing is recorded on
the trajectory itself: the registry is the one place that says it, and the
curated summary names the registry it was run with.
"""

from __future__ import annotations

from collections.abc import Iterable

from schemas.records import LIVE_SOURCES

DEFAULT_SYNTHETIC_SOURCES: tuple[str, ...] = ("sandbox",)


def is_synthetic_source(
    source: str | None, source_name: str | None, synthetic_sources: Iterable[str] = DEFAULT_SYNTHETIC_SOURCES
) -> bool:
    """Crawled from a source that declares its data synthetic (or a run derived from one)."""
    if source not in LIVE_SOURCES or not source_name:
        return False
    return any(source_name == s or source_name.startswith(s + ":") for s in synthetic_sources)


def is_synthetic(traj, synthetic_sources: Iterable[str] = DEFAULT_SYNTHETIC_SOURCES) -> bool:
    return is_synthetic_source(traj.source, traj.source_name, synthetic_sources)


def synthetic_source_names(
    environments: Iterable, base: Iterable[str] = DEFAULT_SYNTHETIC_SOURCES
) -> tuple[str, ...]:
    """`base` plus the sources of environments with synthetic_data: true, less those of
    environments that do not say so (a user's file named like a default source wins)."""
    names = set(base)
    for env in environments:
        if env.synthetic_data:
            names.add(env.source)
        else:
            names.discard(env.source)
    return tuple(sorted(names))
