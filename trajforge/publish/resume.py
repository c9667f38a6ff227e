"""Resuming an export killed part-way (SIGKILL, OOM, lost node).

The staging folder's name is a fingerprint of the inputs (ids, their
committed part files) and the options, and its journal records each finished
shard. The next run with the same fingerprint verifies the journaled shards
(size, sha256) and keeps them, skipping their samples, so the final shards are
byte-identical to an uninterrupted run's. Any other staging folder is stale.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from schemas.records import Trajectory
from trajforge.publish.samples import ShardSample
from trajforge.publish.writer import JOURNAL, ShardJournal
from trajforge.store.raw import RawStore

STAGING_PREFIX = ".export-"


class ResumeMismatch(Exception):
    """The journaled shards do not end where the input says they should."""


def _file_sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def resume_staging(staging: Path, splits: list[tuple[str, float]]) -> dict[str, list[dict]]:
    """{split: journaled shards still whole}, in order; everything else in staging goes.

    A split keeps the longest run of its shards, from 000000 on, whose files
    match their journal line; the first one that does not (and all after it)
    is written again.
    """
    journal = ShardJournal(staging)
    entries = journal.load()
    kept: dict[str, list[dict]] = {name: [] for name, _ in splits}
    broken: set[str] = set()
    survivors = []
    for e in entries:
        split = e.get("split")
        if split not in kept or split in broken:
            continue
        path = staging / str(e.get("name"))
        ok = (
            e.get("name") == f"{split}-{len(kept[split]):06d}.tar"
            and path.is_file()
            and path.stat().st_size == e.get("bytes")
            and _file_sha256(path) == e.get("sha256")
        )
        if ok:
            kept[split].append(e)
            survivors.append(e)
        else:
            broken.add(split)
    keep = {e["name"] for e in survivors} | {JOURNAL}
    for p in staging.iterdir():
        if p.name not in keep:
            shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
    if survivors != entries or not journal.path.exists():
        journal.rewrite(survivors)
    return kept


def fingerprint(store: RawStore, chosen: dict[str, tuple[Trajectory, str]], options: dict) -> str:
    """Names the inputs and options: a resumed run must see exactly the same ones.

    Part files are named relative to the store (a moved store still resumes)
    with their size and mtime: a committed part is rewritten only when records
    leave it (RawStore.uncommit: a new file, renamed into place), so a change
    there means the input changed.
    """
    h = hashlib.sha256()
    root = Path(store.root)

    def rel(f) -> str:
        try:
            return Path(f).relative_to(root).as_posix()
        except ValueError:
            return str(f)

    for tid in sorted(chosen):
        h.update(f"{tid}\x1f{rel(chosen[tid][1])}\n".encode())
    parts = {Path(f) for _, f in chosen.values()}
    parts |= {Path(str(f).replace(".steps.parquet", ".trajectories.parquet")) for f in parts}
    for f in sorted(parts):
        st = f.stat()
        h.update(f"{rel(f)}\x1f{st.st_size}\x1f{st.st_mtime_ns}\n".encode())
    h.update(json.dumps(options, sort_keys=True).encode())
    return h.hexdigest()


def skip_resumed(
    samples: list[ShardSample], split: str, to_skip: dict[str, int], resumed: dict[str, list[dict]]
) -> list[ShardSample]:
    """The samples not yet in a kept shard (a trajectory may straddle the last one)."""
    n = min(to_skip[split], len(samples))
    if not n:
        return samples
    to_skip[split] -= n
    if not to_skip[split] and samples[n - 1].key != resumed[split][-1]["last_key"]:
        raise ResumeMismatch(
            f"the last kept {split} shard ends at "
            f"{resumed[split][-1]['last_key']!r}, the input at {samples[n - 1].key!r}"
        )
    return samples[n:]
