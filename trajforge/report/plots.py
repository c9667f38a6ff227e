"""Small PNG charts as markdown images (data URIs), for Dagster metadata.

Rendered with matplotlib's Agg backend (no display needed). Each image is
kept under MAX_PNG_BYTES: the Dagster UI stores metadata in its event log
and inlines it on every asset page, so a chart must stay small.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Mapping, Sequence

MAX_PNG_BYTES = 60_000
MAX_BARS = 20  # beyond this the long tail is folded into "other"
_COLOURS = ["#3b82f6", "#ef4444", "#10b981", "#f59e0b", "#8b5cf6", "#6b7280", "#ec4899", "#14b8a6"]
# Outcomes keep their colour across charts (a failure is always red).
_OUTCOME_COLOURS = {"success": "#10b981", "failure": "#ef4444", "error": "#f59e0b", "timeout": "#8b5cf6"}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # before pyplot: no display on workers
    import matplotlib.pyplot as plt

    return plt


def data_uri(png: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64,{base64.b64encode(png).decode()}"


def image_md(png: bytes, alt: str) -> str:
    return f"![{alt}]({data_uri(png)})"


def _save(fig, dpi: int = 80) -> bytes:
    """The figure as PNG, lowering the dpi until it fits MAX_PNG_BYTES."""
    plt = _pyplot()
    try:
        while True:
            buf = io.BytesIO()
            fig.savefig(buf, format="png", dpi=dpi, pil_kwargs={"optimize": True})
            if buf.tell() <= MAX_PNG_BYTES or dpi <= 30:
                return buf.getvalue()
            dpi = int(dpi * 0.75)
    finally:
        plt.close(fig)


def fold_tail(counts: Mapping[str, int], limit: int = MAX_BARS) -> list[tuple[str, int]]:
    """Largest first; beyond `limit` bars the rest is summed into 'other'."""
    items = sorted(counts.items(), key=lambda kv: (-kv[1], str(kv[0])))
    if len(items) <= limit:
        return items
    head, tail = items[: limit - 1], items[limit - 1 :]
    return head + [(f"other ({len(tail)})", sum(v for _, v in tail))]


def _no_data(ax) -> None:
    """An empty dataset still gets a chart (an asset must not fail on its report)."""
    ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes, color="#6b7280")


def bar_png(counts: Mapping[str, int], title: str, *, share: bool = False) -> bytes:
    """Horizontal bars, largest on top; with share=True labelled in percent."""
    plt = _pyplot()
    items = fold_tail(counts)[::-1]
    total = sum(v for _, v in items) or 1
    fig, ax = plt.subplots(figsize=(6, 0.3 * max(len(items), 3) + 0.9))
    ax.barh([str(k) for k, _ in items], [v for _, v in items], color=_COLOURS[0])
    for i, (_, v) in enumerate(items):
        ax.text(v, i, f" {v}" + (f" ({100 * v / total:.1f}%)" if share else ""), va="center", fontsize=8)
    if not items:
        _no_data(ax)
    ax.set_title(title)
    ax.margins(x=0.25)
    fig.tight_layout()
    return _save(fig)


def int_bins(counts: Mapping[int | str, int], max_bars: int = 40) -> dict[str, int]:
    """Integer-valued counts on a gap-free axis: every value from min to max
    (zeros included, so gaps show), or equal-width ranges when that is too many bars."""
    if not counts:
        return {}
    values = {int(k): v for k, v in counts.items()}
    lo, hi = min(values), max(values)
    width = -(-(hi - lo + 1) // max_bars)  # ceil: at most max_bars bins
    out: dict[str, int] = {}
    for start in range(lo, hi + 1, width):
        end = min(start + width - 1, hi)
        label = str(start) if start == end else f"{start}-{end}"
        out[label] = sum(values.get(k, 0) for k in range(start, end + 1))
    return out


def histogram_png(
    counts: Mapping[int | str, int], title: str, xlabel: str, ylabel: str = "trajectories"
) -> bytes:
    """Vertical bars over ordered numeric bins (e.g. steps per trajectory)."""
    plt = _pyplot()
    items = list(counts.items())
    fig, ax = plt.subplots(figsize=(6, 2.8))
    ax.bar([str(k) for k, _ in items], [v for _, v in items], color=_COLOURS[0])
    if not items:
        _no_data(ax)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if len(items) > 16:  # keep the tick labels legible
        ax.tick_params(axis="x", labelrotation=90, labelsize=7)
    fig.tight_layout()
    return _save(fig)


def line_png(series: Mapping[str, Sequence[float]], title: str, xlabel: str = "step") -> bytes:
    """One line per named series over steps 1..n (e.g. a loss curve)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 2.6))
    for i, (name, ys) in enumerate(series.items()):
        ax.plot(
            range(1, len(ys) + 1), ys, marker="o", markersize=3, label=name, color=_COLOURS[i % len(_COLOURS)]
        )
    if not any(series.values()):
        _no_data(ax)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.grid(alpha=0.3)
    if len(series) > 1:
        ax.legend(fontsize=8)
    fig.tight_layout()
    return _save(fig)


def stacked_png(table: Mapping[str, Mapping[str, int]], columns: Sequence[str], title: str) -> bytes:
    """One horizontal bar per row, stacked by column (e.g. app x outcome)."""
    plt = _pyplot()
    rows = sorted(table, key=lambda r: (-sum(table[r].values()), r))[:MAX_BARS][::-1]
    fig, ax = plt.subplots(figsize=(6, 0.3 * max(len(rows), 3) + 1.2))
    left = [0] * len(rows)
    for c, col in enumerate(columns):
        vals = [table[r].get(col, 0) for r in rows]
        ax.barh(
            rows, vals, left=left, label=col, color=_OUTCOME_COLOURS.get(col, _COLOURS[c % len(_COLOURS)])
        )
        left = [a + b for a, b in zip(left, vals)]
    ax.set_title(title if len(table) <= MAX_BARS else f"{title} (largest {MAX_BARS} of {len(table)})")
    if not rows or not columns:
        _no_data(ax)
    else:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    return _save(fig)
