"""Writing one shard set: the one writer every set goes through (the export, the
reasoning and Chinese sets, the grounding set).

A set is written in one run: a staging folder inside out_dir, named by the
fingerprint of the inputs and options (`trajforge.publish.resume`); one pass
over the input (`SetPass`: the hold-out picks each trajectory's split, the
split writers roll shards and journal each finished one); then `commit`
renames the shards into place, writes the quarantine, the manifest last (the
commit) and removes shards of an earlier run that this one did not rewrite.

A run killed part-way is resumed by the next one with the same fingerprint:
the journaled shards are kept and their samples skipped, so the shards come
out byte-identical to an uninterrupted run's. If the kept shards do not line
up with the input, the pass starts over from an empty staging folder. An
exception raised inside the pass removes the staging folder, so a failed run
leaves out_dir as it was.

What goes into the samples, the quarantine lines and the manifest's own fields
is the set's business; this module owns the staging, the splits, the
hold-out, the resume and the order of the commit.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from trajforge.publish.holdout import HoldOut
from trajforge.publish.manifest import publish, remove_leftovers, remove_stale_shards
from trajforge.publish.quarantine import QUARANTINE
from trajforge.publish.resume import STAGING_PREFIX, ResumeMismatch, resume_staging, skip_resumed
from trajforge.publish.samples import ShardSample
from trajforge.publish.shards import MANIFEST
from trajforge.publish.writer import ShardJournal, SplitWriter, fsync_dir

R = TypeVar("R")


@dataclass(frozen=True)
class SetLayout:
    """How a set is cut: its splits (checked), the hold-out's seed, the shard limits."""

    splits: list[tuple[str, float]]
    split_seed: str
    max_samples: int
    max_bytes: int

    def __post_init__(self):
        if self.max_samples < 1 or self.max_bytes < 1:
            raise ValueError("max_samples_per_shard and max_bytes_per_shard must be positive")

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.splits]


@dataclass
class SetWrite(Generic[R]):
    """What a finished pass wrote into staging, not yet committed."""

    staging: Path
    layout: SetLayout
    result: R  # what the set's own fill function returned
    shards: list[dict]  # manifest entries, split by split
    image_exts: set[str]
    per_split: dict[str, int]  # trajectories per split
    held_out: dict  # the manifest's `held_out`
    resumed_shards: int  # kept from a killed run


class SetPass:
    """One pass over a set's input: each trajectory's samples go to its split's shards,
    after the samples a killed run already wrote (skipped)."""

    def __init__(self, staging: Path, layout: SetLayout, holdout: HoldOut, resumed: dict[str, list[dict]]):
        self.staging, self.holdout, self.resumed = staging, holdout, resumed
        journal = ShardJournal(staging)
        self.writers = {
            name: SplitWriter(staging, name, layout.max_samples, layout.max_bytes, journal, resumed[name])
            for name in layout.names
        }
        # Samples of each split already in kept shards: the first ones in stream order.
        self._to_skip = {name: sum(e["samples"] for e in resumed[name]) for name in layout.names}
        self.per_split = {name: 0 for name in layout.names}
        self._resizer = ThreadPoolExecutor(
            max_workers=min(8, os.cpu_count() or 1), thread_name_prefix="set-resize"
        )

    def add(self, task: Any, samples: list[ShardSample]) -> str:
        """Write one trajectory of `task`; returns its split. Raises Unusable (from
        resizing, before anything is written or counted) for an image that does not decode."""
        split = self.holdout.split(task)
        todo = skip_resumed(samples, split, self._to_skip, self.resumed)
        if any(t.resize_to for t in todo):
            # Pillow lets go of the GIL to decode, resize and encode.
            list(self._resizer.map(ShardSample.prepare, todo))
        if todo:
            self.writers[split].add_trajectory(todo)
        self.per_split[split] += 1
        self.holdout.add(task, split)
        return split

    def finish(self) -> list[dict]:
        if any(self._to_skip.values()):
            raise ResumeMismatch(f"the journal holds more samples than the input: {self._to_skip}")
        return [s for w in self.writers.values() for s in w.finish()]

    def abort(self, *, quiet: bool) -> None:
        for w in self.writers.values():
            try:
                w.abort()
            except OSError:  # on a full disk the tar's closing blocks may fail too
                if not quiet:
                    raise

    def close(self) -> None:
        self._resizer.shutdown(cancel_futures=True)

    @property
    def image_exts(self) -> set[str]:
        return set().union(*(w.image_exts for w in self.writers.values()))


def write_set(
    out_dir: Path, fingerprint: str, layout: SetLayout, tasks: Iterable[Any], fill: Callable[[SetPass], R]
) -> SetWrite[R]:
    """Runs `fill` over a staging folder named by `fingerprint` (resuming a killed run's);
    see the module doc. `fill` writes every trajectory through `SetPass.add` and keeps
    its own state: it may be called twice (the second time from scratch)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    # The name is fixed by the inputs and options, so a killed run's finished shards
    # are found again; any other staging folder can never be resumed.
    staging = out_dir / f"{STAGING_PREFIX}{fingerprint[:24]}"
    remove_leftovers(out_dir, keep=staging.name)
    staging.mkdir(exist_ok=True)
    fsync_dir(out_dir)
    holdout = HoldOut(layout.splits, layout.split_seed).plan(tasks)
    resumed = resume_staging(staging, layout.splits)
    try:
        return _one_pass(staging, layout, holdout, resumed, fill)
    except ResumeMismatch:
        # The kept shards do not line up with the input (a screenshot that failed to
        # decode before the kill is counted differently): start over rather than risk
        # a duplicate or a gap.
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        return _one_pass(staging, layout, holdout, {name: [] for name in layout.names}, fill)


def _one_pass(
    staging: Path,
    layout: SetLayout,
    holdout: HoldOut,
    resumed: dict[str, list[dict]],
    fill: Callable[[SetPass], R],
) -> SetWrite[R]:
    holdout.reset()
    run = SetPass(staging, layout, holdout, resumed)
    try:
        result = fill(run)
        shards = run.finish()
    except ResumeMismatch:
        run.abort(quiet=False)
        raise
    except BaseException:
        run.abort(quiet=True)
        shutil.rmtree(staging, ignore_errors=True)
        raise
    finally:
        run.close()
    return SetWrite(
        staging=staging,
        layout=layout,
        result=result,
        shards=shards,
        image_exts=run.image_exts,
        per_split=run.per_split,
        held_out=holdout.manifest(),
        resumed_shards=sum(len(v) for v in resumed.values()),
    )


def commit(out_dir: Path, written: SetWrite, quarantine: bytes, manifest: dict) -> None:
    """Shards into place, the quarantine, the manifest last (the commit), then the
    shards of an earlier run that this one did not rewrite."""
    for shard in written.shards:
        path = written.staging / shard["name"]
        os.chmod(path, 0o644)
        os.replace(path, out_dir / shard["name"])
    shutil.rmtree(written.staging, ignore_errors=True)
    publish(out_dir / QUARANTINE, quarantine)
    publish(
        out_dir / MANIFEST,
        (json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode(),
    )
    remove_stale_shards(out_dir, {s["name"] for s in written.shards})
