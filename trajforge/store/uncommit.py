"""Take committed trajectories out of a local collection, so that they can be recorded again.

A crawl stores an episode that ran out of retries as an `error` under its
stable id, and a re-run skips every id already committed. To play such a task
again (`trajforge crawl --retry-errors`, once the environment file is fixed),
its error record is *uncommitted* first, then the crawl records the new episode
under the same id. Readers (every reader of the store, and anything that reads
its Parquet files) then see the latest episode only, and never two records of
one id: no reader needs to know that a record was replaced.

How a part loses some of its trajectories, each file replaced by an atomic rename:

- every trajectory of the part goes: its trajectories file (the commit) is
  removed first, then its steps file (a steps file without its trajectories file
  is an interrupted write, which the next writer removes anyway);
- some go: the steps file without their steps is written first (skipped when they
  had none, as an episode out of retries has), then the trajectories file
  without their rows. A crash between the two leaves the part's other
  trajectories whole and an uncommitted one listed without its steps; it is
  still an `error`, so the next `--retry-errors` takes it out again.

A crash after the error records are out and before the new episodes are
committed leaves those tasks unstored: the next crawl plays them, as it resumes
any crawl. Object storage is not covered (its parts are claimed per id by their
writer and committed by a marker that is never rewritten).
"""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa
import pyarrow.compute as pc

from trajforge.store.raw import RawStore, atomic_write_table, writers_lock


def errored_ids(store: RawStore, collection: str) -> set[str]:
    """The ids of the trajectories committed in `collection` whose outcome is `error`."""
    out: set[str] = set()
    for path in store.trajectory_files(collection):
        table = store.read_table(path, columns=["trajectory_id", "outcome"])
        errored = table.filter(pc.equal(table.column("outcome"), "error"))
        out.update(errored.column("trajectory_id").to_pylist())
    return out


def uncommit(store: RawStore, collection: str, ids: Iterable[str]) -> int:
    """Remove the trajectories `ids` (and their steps) from `collection`; how many went.

    A writer opened afterwards records them again under the same ids.
    """
    drop = pa.array(sorted(set(ids)), pa.string())
    if len(drop) == 0:
        return 0
    with writers_lock(store.root / collection):  # no writer commits a part while it is rewritten
        return _uncommit(store, collection, drop)


def _uncommit(store: RawStore, collection: str, drop: pa.Array) -> int:
    removed = 0
    for steps_path, trajs_path in store._parts(collection):
        trajs = store.read_table(trajs_path)
        gone = pc.is_in(trajs.column("trajectory_id"), value_set=drop)
        n = pc.sum(gone).as_py() or 0
        if n == 0:
            continue
        removed += n
        if n == trajs.num_rows:
            trajs_path.unlink()  # the part is uncommitted at once
            steps_path.unlink(missing_ok=True)
            continue
        steps = store.read_table(steps_path)
        kept_steps = steps.filter(pc.invert(pc.is_in(steps.column("trajectory_id"), value_set=drop)))
        if kept_steps.num_rows != steps.num_rows:
            atomic_write_table(steps_path, kept_steps)
        atomic_write_table(trajs_path, trajs.filter(pc.invert(gone)))
    return removed
