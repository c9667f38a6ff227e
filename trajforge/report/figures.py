"""Per-asset summaries (figures) and their markdown pictures for Dagster.

The figures are pure functions over the data an asset wrote: `raw_summary`
reads the raw_steps Parquet through DuckDB, `shard_summary` reads the JSON of
an exported shard folder (images skipped unread). Both return the same shape,
built by one `_Tally`, so the raw and shipped views of a dataset compare
field by field. `summary_markdown` renders them; the Dagster assets only wrap
the result in `MetadataValue`s (trajforge never imports dagster).

Trajectory-level figures count each trajectory once; `action_types` counts
steps. `verified_success` counts successes any verifier kind decided (state,
js, http, python, judge), not a dataset's own label. `difficulty` appears only when the data carries a `difficulty` field.
"""

from __future__ import annotations

import io
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from PIL import Image

from schemas.errors import SchemaError
from schemas.records import is_verified_success
from trajforge.publish.shards import ShardError, iter_tar_samples, read_manifest
from trajforge.report import plots

_DIFFICULTY_BINS = 10


class _Tally:
    """Counts over trajectory records {language, platform, app, outcome, verified_by,
    steps, difficulty}."""

    def __init__(self) -> None:
        self.trajectories = 0
        self.verified_success = 0
        self.languages: Counter = Counter()
        self.platforms: Counter = Counter()
        self.apps: Counter = Counter()
        self.outcomes: Counter = Counter()
        self.steps_per_trajectory: Counter = Counter()
        self.app_outcome: dict[str, Counter] = {}
        self.difficulty_scores: list[float] = []
        self.difficulty_levels: Counter = Counter()

    def add(self, t: Mapping[str, Any]) -> None:
        self.trajectories += 1
        self.languages[t["language"]] += 1
        self.platforms[t["platform"]] += 1
        self.apps[t["app"]] += 1
        self.outcomes[t["outcome"]] += 1
        self.verified_success += is_verified_success(t["outcome"], t["verified_by"])
        self.steps_per_trajectory[int(t["steps"])] += 1
        self.app_outcome.setdefault(t["app"], Counter())[t["outcome"]] += 1
        d = t.get("difficulty")
        if isinstance(d, Mapping):  # a struct of features and a score
            d = d.get("score", d.get("level"))
        if isinstance(d, bool) or d is None:
            return
        if isinstance(d, (int, float)):
            self.difficulty_scores.append(float(d))
        else:
            self.difficulty_levels[str(d)] += 1

    def result(self, action_types: Mapping[str, int]) -> dict[str, Any]:
        spt = self.steps_per_trajectory
        out = {
            "trajectories": self.trajectories,
            "steps": sum(action_types.values()),
            "verified_success": self.verified_success,
            "action_types": _by_count(action_types),
            # String keys: the summary goes into JSON metadata as it is.
            "steps_per_trajectory": {str(k): spt[k] for k in sorted(spt)},
            "steps_per_trajectory_stats": _describe(spt),
            "languages": _by_count(self.languages),
            "platforms": _by_count(self.platforms),
            "apps": _by_count(self.apps),
            "outcomes": _by_count(self.outcomes),
            "app_outcome": {a: dict(sorted(c.items())) for a, c in sorted(self.app_outcome.items())},
        }
        difficulty = _difficulty(self.difficulty_scores, self.difficulty_levels)
        if difficulty:
            out["difficulty"] = difficulty
        return out


def _by_count(counts: Mapping[str, int]) -> dict[str, int]:
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], str(kv[0]))))


def _describe(hist: Counter) -> dict[str, float]:
    if not hist:
        return {}
    values = list(hist.elements())
    return {
        "min": min(values),
        "median": statistics.median(values),
        "mean": round(statistics.fmean(values), 3),
        "max": max(values),
    }


def _difficulty(scores: list[float], levels: Counter) -> dict[str, Any]:
    """Scores binned into equal-width bins over [0, 1] (or their own range); levels counted."""
    out: dict[str, Any] = {}
    if scores:
        lo, hi = (0.0, 1.0) if 0.0 <= min(scores) and max(scores) <= 1.0 else (min(scores), max(scores))
        width = (hi - lo) / _DIFFICULTY_BINS or 1.0
        bins = Counter(min(int((s - lo) / width), _DIFFICULTY_BINS - 1) for s in scores)
        out["scores"] = {
            "count": len(scores),
            "mean": round(statistics.fmean(scores), 4),
            "min": min(scores),
            "max": max(scores),
            "histogram": {
                f"{lo + i * width:.2f}-{lo + (i + 1) * width:.2f}": bins[i] for i in range(_DIFFICULTY_BINS)
            },
        }
    if levels:
        out["levels"] = _by_count(levels)
    return out


def _sql_path(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def raw_summary(raw_steps_dir: Path | str) -> dict[str, Any]:
    """Figures over `raw_steps/{trajectories,steps}.parquet` (what `consolidate` wrote).

    Steps per trajectory are the steps actually stored, not `num_steps`.
    """
    import duckdb

    raw_steps_dir = Path(raw_steps_dir)
    traj, steps = raw_steps_dir / "trajectories.parquet", raw_steps_dir / "steps.parquet"
    for path in (traj, steps):
        if not path.is_file():
            raise SchemaError("missing (materialise raw_steps first)", source=str(path))
    con = duckdb.connect()
    try:
        cols = {
            r[0] for r in con.execute(f"DESCRIBE SELECT * FROM read_parquet({_sql_path(traj)})").fetchall()
        }
        for field in ("trajectory_id", "task", "platform", "app", "outcome", "verified_by"):
            if field not in cols:
                raise SchemaError("column missing", source=str(traj), field=field)
        difficulty = "t.difficulty" if "difficulty" in cols else "NULL"
        cur = con.execute(f"""
            SELECT t.task.language, t.platform, t.app, t.outcome, t.verified_by, coalesce(s.n, 0),
                   {difficulty}
            FROM read_parquet({_sql_path(traj)}) t
            LEFT JOIN (SELECT trajectory_id, count(*) AS n FROM read_parquet({_sql_path(steps)})
                       GROUP BY trajectory_id) s USING (trajectory_id)""")
        tally = _Tally()
        while rows := cur.fetchmany(10_000):  # streamed: memory stays flat
            for lang, platform, app, outcome, verified_by, n, diff in rows:
                tally.add(
                    {
                        "language": lang,
                        "platform": platform,
                        "app": app,
                        "outcome": outcome,
                        "verified_by": verified_by,
                        "steps": n,
                        "difficulty": diff,
                    }
                )
        actions = dict(
            con.execute(f"""SELECT action.type, count(*) FROM read_parquet({_sql_path(steps)})
                                       GROUP BY 1""").fetchall()
        )
    finally:
        con.close()
    return tally.result(actions)


def shard_summary(shard_dir: Path | str) -> dict[str, Any]:
    """Figures over an exported shard folder, plus `splits` (sizes per split)."""
    shard_dir = Path(shard_dir)
    manifest = read_manifest(shard_dir)
    splits = {name: {"trajectories": 0, "steps": 0, "shards": 0, "bytes": 0} for name in manifest["splits"]}
    actions: Counter = Counter()
    trajs: dict[str, dict[str, Any]] = {}  # a trajectory may span shards
    for shard in manifest["shards"]:
        split = splits.setdefault(shard["split"], {"trajectories": 0, "steps": 0, "shards": 0, "bytes": 0})
        split["shards"] += 1
        split["bytes"] += shard["bytes"]
        path = shard_dir / shard["name"]
        for key, sample in iter_tar_samples(path, images=False):
            try:
                j = sample["json"]
                action, tid = j["action"]["type"], j["trajectory_id"]
                if tid not in trajs:
                    trajs[tid] = {
                        "language": j["task"]["language"],
                        "platform": j["platform"],
                        "app": j["app"],
                        "outcome": j["outcome"],
                        "verified_by": j["verified_by"],
                        "steps": 0,
                        "difficulty": j.get("difficulty"),
                    }
                    split["trajectories"] += 1
            except (KeyError, TypeError) as exc:
                raise ShardError(f"sample lacks {exc}", source=str(path), record=key, field="json") from None
            trajs[tid]["steps"] += 1
            split["steps"] += 1
            actions[action] += 1
    tally = _Tally()
    for t in trajs.values():
        tally.add(t)
    return {
        "dataset": manifest["dataset"],
        "version": manifest["version"],
        **tally.result(actions),
        "splits": splits,
    }


def _md_table(header: list[str], rows: Iterable[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def outcome_columns(summary: Mapping[str, Any]) -> list[str]:
    return sorted({o for c in summary["app_outcome"].values() for o in c})


def app_outcome_rows(summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per app: its trajectories per outcome and in total."""
    cols = outcome_columns(summary)
    return [
        {"app": app, **{o: c.get(o, 0) for o in cols}, "total": sum(c.values())}
        for app, c in summary["app_outcome"].items()
    ]


def summary_markdown(summary: Mapping[str, Any]) -> dict[str, str]:
    """Named markdown sections, each a small PNG (and a table where one reads better)."""
    s = summary
    stats = s["steps_per_trajectory_stats"]
    md = {
        "action_histogram": plots.image_md(
            plots.bar_png(s["action_types"], f"actions ({s['steps']} steps)"), "actions"
        ),
        "steps_per_trajectory": plots.image_md(
            plots.histogram_png(plots.int_bins(s["steps_per_trajectory"]), "steps per trajectory", "steps"),
            "steps per trajectory",
        )
        + ("\n\n" + ", ".join(f"{k} {v}" for k, v in stats.items()) if stats else ""),
        "language_share": plots.image_md(
            plots.bar_png(s["languages"], "language share (trajectories)", share=True), "languages"
        ),
        "platform_share": plots.image_md(
            plots.bar_png(s["platforms"], "platform share (trajectories)", share=True), "platforms"
        ),
    }
    cols = outcome_columns(s)
    rows = app_outcome_rows(s)
    md["app_outcome"] = (
        plots.image_md(plots.stacked_png(s["app_outcome"], cols, "app x outcome"), "app x outcome")
        + "\n\n"
        + _md_table(["app", *cols, "total"], [list(r.values()) for r in rows])
    )
    if "splits" in s:
        md["split_sizes"] = (
            plots.image_md(
                plots.bar_png(
                    {k: v["steps"] for k, v in s["splits"].items()}, "split sizes (steps)", share=True
                ),
                "split sizes",
            )
            + "\n\n"
            + _md_table(
                ["split", "trajectories", "steps", "shards", "MB"],
                [
                    [k, v["trajectories"], v["steps"], v["shards"], f"{v['bytes'] / 1e6:.2f}"]
                    for k, v in s["splits"].items()
                ],
            )
        )
    d = s.get("difficulty")
    if d:
        parts = []
        if "scores" in d:
            sc = d["scores"]
            parts.append(
                plots.image_md(
                    plots.histogram_png(sc["histogram"], f"difficulty (mean {sc['mean']:.2f})", "score"),
                    "difficulty",
                )
            )
        if "levels" in d:
            parts.append(
                plots.image_md(
                    plots.bar_png(d["levels"], "difficulty levels", share=True), "difficulty levels"
                )
            )
        md["difficulty"] = "\n\n".join(parts)
    return md


def bar_chart_markdown(counts: Mapping[str, int], title: str) -> str:
    return plots.image_md(plots.bar_png(counts, title), title)


def thumbnails_markdown(images: list[tuple[str, bytes]], width: int = 320) -> str:
    """Captioned JPEG thumbnails of a few screenshots."""
    parts = []
    for caption, data in images:
        with Image.open(io.BytesIO(data)) as im:
            im = im.convert("RGB")
            im.thumbnail((width, width * 4))
            buf = io.BytesIO()
            im.save(buf, format="JPEG", quality=70)
        parts.append(f"**{caption}**\n\n![{caption}]({plots.data_uri(buf.getvalue(), 'image/jpeg')})")
    return "\n\n".join(parts)
