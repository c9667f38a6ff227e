"""What a crawl tells the person who runs it: a line per episode, and why episodes errored.

`progress_line` turns a crawl's ProgressEvent into one line (episodes done of
the total, verified so far, errors, the frontier walk's screen graph, and what
just happened); `error_lines` groups the errored episodes by cause ("3 episodes
errored: ..."); `summary_lines` closes a crawl (the graph explored, the episodes
a time budget left). The CLI
writes them to stderr; stdout keeps the crawl's one JSON line.
"""

from __future__ import annotations

from .crawl_driver import CrawlStats, ProgressEvent


def progress_line(event: ProgressEvent, name: str) -> str | None:
    """One line for an episode written or retried; None for events not worth a line."""
    s = event.stats
    if event.kind == "retry":
        return f"crawl {name}: {event.task_id}: retrying after {_first_line(event.message)}"
    if event.kind != "trajectory":
        return None  # steps are too many; stored tasks are counted in the next line
    done = s.trajectories + s.skipped
    total = f"/{event.total}" if event.total is not None else ""
    stored = f" ({s.skipped} already stored)" if s.skipped else ""
    what = f"{event.task_id}: {event.outcome}"
    if event.outcome == "error":
        what += f": {_first_line(event.message)}"
    graph = getattr(s, "graph", None)
    explored = f"; {graph_words(graph)}" if graph else ""
    return (
        f"crawl {name}: {done}{total} episodes{stored}, {s.verified} verified "
        f"({s.success} success, {s.failure} failure), {s.error} error(s), {s.unknown} unknown{explored}; {what}"
    )


def graph_words(graph: dict) -> str:
    """A screen graph's figures in words (ScreenGraph.summary())."""
    return (
        f"{graph['screens']} screens, {graph['edges']} edges, {graph['pairs']} (screen, element) pairs "
        f"tried, {graph['untried']} untried elements left"
    )


def summary_lines(stats: CrawlStats) -> list[str]:
    """The end of a crawl: what the frontier walk covered, what the time budget left."""
    out = []
    graph = getattr(stats, "graph", None)
    if graph:
        out.append(
            f"explored: {graph_words(graph)}, over {graph['episodes']} episodes; "
            f"the graph: {getattr(stats, 'graph_file', None)}"
        )
        if graph["episodes"] and graph["screens"] <= 1 and not graph["untried"] and graph["pairs"] <= 1:
            out.append(
                "nothing to explore: every episode stayed on one screen with no control a walk may "
                "touch (no link, button, field or clickable in its accessibility tree)"
            )
    if stats.not_started:
        out.append(f"time budget spent: {stats.not_started} episode(s) not started (a re-run plays them)")
    return out


def error_lines(stats: CrawlStats) -> list[str]:
    """'<n> episode(s) errored: <cause>' for each cause, the most frequent first."""
    ranked = sorted(stats.error_reasons.items(), key=lambda kv: (-kv[1], kv[0]))
    return [f"{n} episode{'s' if n != 1 else ''} errored: {reason}" for reason, n in ranked]


def all_errored(stats: CrawlStats) -> bool:
    """Every episode this crawl played errored (nothing was learnt about the app)."""
    return stats.trajectories > 0 and stats.error == stats.trajectories


def _first_line(text: str | None) -> str:
    lines = (text or "").strip().splitlines()
    return lines[0][:300] if lines else "no reason given"
