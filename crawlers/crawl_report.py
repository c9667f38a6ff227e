"""What a crawl tells the person who runs it: a line per episode, and why episodes errored.

`progress_line` turns a crawl's ProgressEvent into one line (episodes done of
the total, verified so far, errors, and what just happened); `error_lines`
groups the errored episodes by cause ("3 episodes errored: ..."). The CLI
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
    return (
        f"crawl {name}: {done}{total} episodes{stored}, {s.verified} verified "
        f"({s.success} success, {s.failure} failure), {s.error} error(s), {s.unknown} unknown; {what}"
    )


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
