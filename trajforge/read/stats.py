"""Counts over an exported shard folder, read from the shards themselves.

Trajectory-level figures (languages, platforms, apps, outcomes, policies,
verified_by, verified_success) count each trajectory once; `action_types`
counts steps. `verified_success` counts successes that a verifier of any kind
(state, js, http, python, judge) decided, `verified_success_by` splits them by
kind; a dataset's own label (`verified_by: dataset`) is shown in `verified_by`
but is not a verifier's verdict. Images are skipped unread, so the cost is the
JSON alone.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from schemas.records import is_verified_success
from synthesis.grounding_checks import format_grounding_table, grounding_set_stats
from synthesis.set_stats import format_reasoning_table, reasoning_set_stats
from trajforge.publish.shards import ShardError, iter_tar_samples, read_manifest

_PER_TRAJECTORY = {
    "languages": lambda j: j["task"]["language"],
    "platforms": lambda j: j["platform"],
    "apps": lambda j: j["app"],
    "outcomes": lambda j: j["outcome"],
    "policies": lambda j: j["policy"],
    "verified_by": lambda j: j["verified_by"],
}


def shard_stats(shard_dir: Path | str) -> dict[str, Any]:
    shard_dir = Path(shard_dir)
    manifest = read_manifest(shard_dir)
    if manifest.get("kind") == "reasoning_set":
        # Samples of another shape (one per step and mode): modes, languages,
        # action types per step, thought lengths (synthesis/set_stats.py).
        return reasoning_set_stats(shard_dir)
    if manifest.get("kind") == "grounding":  # one record per screen, its samples inside
        return grounding_set_stats(shard_dir)
    counts = {name: Counter() for name in _PER_TRAJECTORY}
    actions: Counter = Counter()
    splits: dict[str, dict[str, int]] = {
        name: {"trajectories": 0, "steps": 0, "shards": 0} for name in manifest["splits"]
    }
    seen: set[str] = set()
    verified_success = steps = 0
    verified_success_by: Counter = Counter()
    # The same figures per platform (web vs phones), so a mixed dataset can be
    # read without a query: trajectories, languages, verified and actions.
    by_platform: dict[str, dict[str, Any]] = {}
    for shard in manifest["shards"]:
        split = splits.setdefault(shard["split"], {"trajectories": 0, "steps": 0, "shards": 0})
        split["shards"] += 1
        path = shard_dir / shard["name"]
        for key, sample in iter_tar_samples(path, images=False):
            try:
                j = sample["json"]
                action = j["action"]["type"]
                tid = j["trajectory_id"]
                per_traj = {name: get(j) for name, get in _PER_TRAJECTORY.items()}
                verified = is_verified_success(j["outcome"], j["verified_by"])
            except (KeyError, TypeError) as exc:
                raise ShardError(f"sample lacks {exc}", source=str(path), record=key, field="json") from None
            steps += 1
            split["steps"] += 1
            actions[action] += 1
            plat = by_platform.setdefault(
                per_traj["platforms"],
                {
                    "trajectories": 0,
                    "steps": 0,
                    "verified_success": 0,
                    "languages": Counter(),
                    "action_types": Counter(),
                },
            )
            plat["steps"] += 1
            plat["action_types"][action] += 1
            if tid in seen:  # a trajectory lives in one split
                continue
            seen.add(tid)
            split["trajectories"] += 1
            for name, value in per_traj.items():
                counts[name][value] += 1
            verified_success += verified
            if verified:
                verified_success_by[per_traj["verified_by"]] += 1
            plat["trajectories"] += 1
            plat["verified_success"] += verified
            plat["languages"][per_traj["languages"]] += 1
    return {
        "dataset": manifest["dataset"],
        "version": manifest["version"],
        "trajectories": len(seen),
        "steps": steps,
        "verified_success": verified_success,
        "verified_success_by": dict(sorted(verified_success_by.items())),
        **{name: dict(sorted(c.items())) for name, c in counts.items()},
        "action_types": dict(sorted(actions.items())),
        "shards": len(manifest["shards"]),
        "bytes": sum(s["bytes"] for s in manifest["shards"]),
        "splits": splits,
        "by_platform": {
            name: {
                **p,
                "languages": dict(sorted(p["languages"].items())),
                "action_types": dict(sorted(p["action_types"].items())),
            }
            for name, p in sorted(by_platform.items())
        },
    }


def format_table(stats: dict[str, Any]) -> str:
    """A plain-text rendering for people (the CLI without --json)."""
    if stats.get("kind") == "reasoning_set":
        return format_reasoning_table(stats)
    if stats.get("kind") == "grounding":
        return format_grounding_table(stats)
    lines = [
        f"dataset {stats['dataset']}  version {stats['version']}",
        f"  trajectories      {stats['trajectories']}",
        f"  steps             {stats['steps']}",
        f"  verified_success  {stats['verified_success']}{_by_kind(stats.get('verified_success_by'))}",
        f"  shards            {stats['shards']}  ({stats['bytes'] / 1e6:.1f} MB)",
    ]
    lines.append("  splits")
    for name, s in stats["splits"].items():
        lines.append(
            f"    {name:<16}{s['trajectories']:>8} traj {s['steps']:>9} steps {s['shards']:>5} shards"
        )
    for name, p in stats.get("by_platform", {}).items():
        langs = ", ".join(f"{k} {v}" for k, v in p["languages"].items())
        acts = ", ".join(
            f"{k} {v}" for k, v in sorted(p["action_types"].items(), key=lambda kv: (-kv[1], kv[0]))
        )
        lines.append(
            f"  platform {name}: {p['trajectories']} traj, {p['steps']} steps, "
            f"{p['verified_success']} verified; {langs}; actions: {acts}"
        )
    for name in (*_PER_TRAJECTORY, "action_types"):
        lines.append(f"  {name}" + ("" if name == "action_types" else " (trajectories)"))
        for k, v in sorted(stats[name].items(), key=lambda kv: (-kv[1], kv[0])):
            lines.append(f"    {k:<16}{v:>8}")
    return "\n".join(lines)


def _by_kind(counts: dict[str, int] | None) -> str:
    return f"  ({', '.join(f'{k} {v}' for k, v in counts.items())})" if counts else ""
