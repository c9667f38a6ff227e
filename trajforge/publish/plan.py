"""Export planning: which trajectories are committed, which split each goes to,
and their step rows in a stable order (see `trajforge.publish.export`).

- Splits are by trajectory: a stable hash of (split_seed, trajectory_id) picks
  the split, so a trajectory never straddles train and evaluation, and adding
  data never moves an existing trajectory to another split.
- Streamed: DuckDB sorts the step rows out of core and hands them back in
  batches; only one trajectory's rows are held at a time.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

import pyarrow as pa

from schemas.errors import SchemaError
from schemas.records import Trajectory
from trajforge.publish.quarantine import Unusable
from trajforge.store.raw import RawStore

DEFAULT_SPLITS = (("train", 0.9), ("val", 0.05), ("test", 0.05))
DUCKDB_MEMORY = "512MB"  # past this the sort spills to disk
_SPLIT_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


# -- splits -------------------------------------------------------------------


def check_splits(splits: Iterable[tuple[str, float]]) -> list[tuple[str, float]]:
    splits = [(str(n), float(f)) for n, f in splits]
    names = [n for n, _ in splits]
    if not splits:
        raise ValueError("splits: none given")
    for name, frac in splits:
        if not _SPLIT_NAME.match(name):
            raise ValueError(f"splits: name {name!r} must match {_SPLIT_NAME.pattern}")
        if not 0.0 <= frac <= 1.0:
            raise ValueError(f"splits: fraction of {name!r} is {frac}, not in [0, 1]")
    if len(set(names)) != len(names):
        raise ValueError(f"splits: duplicate names in {names}")
    if abs(sum(f for _, f in splits) - 1.0) > 1e-6:
        raise ValueError(f"splits: fractions sum to {sum(f for _, f in splits)}, not 1")
    return splits


def split_of(trajectory_id: str, splits: list[tuple[str, float]], seed: str) -> str:
    """The split of a trajectory: a stable hash of seed and id, never random state."""
    digest = hashlib.sha256(f"{seed}\x1f{trajectory_id}".encode()).digest()
    u = int.from_bytes(digest[:8], "big") / 2**64
    edge = 0.0
    for name, frac in splits:
        edge += frac
        if u < edge:
            return name
    return [n for n, f in splits if f > 0][-1]  # u just under 1 with rounding


# -- reading the store ------------------------------------------------------------


def committed_trajectories(
    store: RawStore, collections
) -> tuple[dict[str, tuple[Trajectory, str]], list[dict]]:
    """{id: (trajectory, its steps file)} and the quarantined rows.

    An invalid row is quarantined; a repeated id keeps its first copy.
    """
    import pyarrow.parquet as pq

    from schemas.arrow import TRAJECTORY_SCHEMA, row_to_trajectory

    chosen: dict[str, tuple[Trajectory, str]] = {}
    quarantine = []
    for tfile in store.trajectory_files(collections):
        steps_file = str(tfile).replace(".trajectories.parquet", ".steps.parquet")
        for row in pq.read_table(tfile, schema=TRAJECTORY_SCHEMA).to_pylist():
            tid = row["trajectory_id"]
            try:
                traj = row_to_trajectory(row, source=str(tfile))
            except SchemaError as err:
                quarantine.append(Unusable("invalid_trajectory", str(err)).record(tid))
                continue
            if tid in chosen:
                quarantine.append(
                    Unusable(
                        "duplicate_id", f"also in {chosen[tid][1]}; kept that one, skipped {steps_file}"
                    ).record(tid)
                )
                continue
            chosen[tid] = (traj, steps_file)
    return chosen, quarantine


def sorted_step_rows(
    chosen: dict[str, tuple[Trajectory, str]], tmp_dir: Path, batch_size: int = 256
) -> Iterator[dict]:
    """Step rows of the chosen trajectories sorted by (trajectory_id, index).

    DuckDB sorts out of core (spilling to tmp_dir past its memory limit), so
    the order is global whatever the store's batching, and memory stays flat.
    """
    import duckdb

    files = sorted({f for _, f in chosen.values()})
    if not files:
        return
    keys = pa.table({"trajectory_id": list(chosen), "filename": [chosen[t][1] for t in chosen]})
    con = duckdb.connect(config={"memory_limit": DUCKDB_MEMORY, "temp_directory": str(tmp_dir)})
    try:
        con.register("chosen", keys)
        rel = con.sql(
            """SELECT s.* EXCLUDE (filename) FROM read_parquet(?, filename = true, union_by_name = true) s
               JOIN chosen c ON s.trajectory_id = c.trajectory_id AND s.filename = c.filename
               ORDER BY s.trajectory_id, s."index" """,
            params=[files],
        )
        # duckdb 2 renamed fetch_arrow_reader to to_arrow_reader.
        reader = getattr(rel, "to_arrow_reader", None) or rel.fetch_arrow_reader
        for batch in reader(batch_size):
            yield from batch.to_pylist()
    finally:
        con.close()


def group_by_trajectory(rows: Iterator[dict]) -> Iterator[tuple[str, list[dict]]]:
    """(trajectory_id, rows) runs of rows sorted by trajectory."""
    tid, group = None, []
    for row in rows:
        if row["trajectory_id"] != tid:
            if group:
                yield tid, group
            tid, group = row["trajectory_id"], []
        group.append(row)
    if group:
        yield tid, group
