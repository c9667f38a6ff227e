"""The DuckDB catalog: one database file over the Parquet tables and the shards.

`build_catalog(data)` writes `<data>/catalog.duckdb` with:

- `trajectories`, `steps`: views over the consolidated Parquet tables
  (`<data>/raw_steps/{trajectories,steps}.parquet`), or, where those do not
  exist yet, over the raw store's committed parts (`<data>/raw/**`). Views
  read the Parquet at query time: the data is not copied, so the catalog stays
  small and always shows the current tables. Convenience columns are added
  (`language`, `instruction`, `template_id` of the task; `action_type`).
- `shards`: one row per shard of every `<data>/shards/*/manifest.json`.
- `shard_trajectories`: which shard holds which trajectory (and how many of
  its steps), read from the JSON members of the tars (images are skipped).
- `catalog_info`: what was built from what, to tell when it is stale.

The file is written under a temporary name and renamed: a reader never sees a
half-built catalog. docs/catalog.md documents the columns and example queries.
"""

from __future__ import annotations

import json
import os
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from schemas.arrow import STEP_SCHEMA, TRAJECTORY_SCHEMA
from trajforge.publish.shards import MANIFEST, ShardError, read_manifest
from trajforge.store.raw import RawStore

CATALOG = "catalog.duckdb"

_SHARDS_SCHEMA = pa.schema(
    [
        ("dataset", pa.string()),
        ("version", pa.string()),
        ("shard", pa.string()),
        ("split", pa.string()),
        ("samples", pa.int64()),
        ("trajectories", pa.int64()),
        ("bytes", pa.int64()),
        ("sha256", pa.string()),
        ("path", pa.string()),
    ]
)
_SHARD_TRAJ_SCHEMA = pa.schema(
    [
        ("dataset", pa.string()),
        ("shard", pa.string()),
        ("split", pa.string()),
        ("trajectory_id", pa.string()),
        ("steps", pa.int64()),
        ("first_index", pa.int64()),
        ("last_index", pa.int64()),
    ]
)


@dataclass
class CatalogResult:
    path: Path
    source: str  # "raw_steps", "raw" or "none": where trajectories/steps come from
    datasets: list[str]
    shards: int
    seconds: float
    problems: list[str] = field(default_factory=list)  # shard folders left out, and why


def catalog_path(data: Path | str) -> Path:
    return Path(data) / CATALOG


def build_catalog(data: Path | str, db_path: Path | str | None = None) -> CatalogResult:
    """(Re)build the catalog of a data root; see the module doc."""
    import duckdb

    started = time.perf_counter()
    data = Path(data).resolve()
    db_path = Path(db_path) if db_path else catalog_path(data)
    db_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = db_path.with_name(f".{db_path.name}.tmp")
    for p in (tmp, tmp.with_name(tmp.name + ".wal")):
        p.unlink(missing_ok=True)

    shard_rows, member_rows, problems, datasets = _read_shard_folders(data / "shards")
    con = duckdb.connect(str(tmp))
    try:
        source = _steps_views(con, data)
        con.register("_shards", pa.Table.from_pylist(shard_rows, schema=_SHARDS_SCHEMA))
        con.register("_members", pa.Table.from_pylist(member_rows, schema=_SHARD_TRAJ_SCHEMA))
        con.execute("CREATE TABLE shards AS SELECT * FROM _shards ORDER BY dataset, shard")
        con.execute(
            "CREATE TABLE shard_trajectories AS SELECT * FROM _members ORDER BY dataset, shard, trajectory_id"
        )
        info = pa.table(
            {
                "key": ["data", "source", "built_at", "manifests"],
                "value": [
                    str(data),
                    source,
                    str(time.time()),
                    json.dumps(_manifest_versions(data / "shards"), sort_keys=True),
                ],
            }
        )
        con.register("_info", info)
        con.execute("CREATE TABLE catalog_info AS SELECT * FROM _info")
        con.execute("CHECKPOINT")
    finally:
        con.close()
    os.replace(tmp, db_path)
    return CatalogResult(
        path=db_path,
        source=source,
        datasets=datasets,
        shards=len(shard_rows),
        seconds=time.perf_counter() - started,
        problems=problems,
    )


def is_stale(data: Path | str, db_path: Path | str | None = None) -> bool:
    """True when the catalog is missing or a manifest changed since it was built.

    The Parquet views need no rebuild; the shard tables do when an export
    rewrote a manifest (its version names the content).
    """
    import duckdb

    data = Path(data).resolve()
    db_path = Path(db_path) if db_path else catalog_path(data)
    if not db_path.is_file():
        return True
    con = duckdb.connect(str(db_path), read_only=True)
    try:
        row = con.execute("SELECT value FROM catalog_info WHERE key = 'manifests'").fetchone()
    except duckdb.Error:
        return True
    finally:
        con.close()
    return row is None or json.loads(row[0]) != _manifest_versions(data / "shards")


def query(db_path: Path | str, sql: str) -> tuple[list[str], list[tuple]]:
    """(column names, rows) of one SQL statement run read-only on the catalog."""
    import duckdb

    con = duckdb.connect(str(db_path), read_only=True)
    try:
        cur = con.execute(sql)
        return [d[0] for d in cur.description or []], cur.fetchall()
    finally:
        con.close()


# -- trajectories and steps -------------------------------------------------------

_TRAJ_EXTRA = "task.language AS language, task.instruction AS instruction, task.template_id AS template_id"
_STEP_EXTRA = "action.type AS action_type"


def _steps_views(con, data: Path) -> str:
    """Create the trajectories and steps views; say which tables they read."""
    consolidated = data / "raw_steps"
    tfile, sfile = consolidated / "trajectories.parquet", consolidated / "steps.parquet"
    if tfile.is_file() and sfile.is_file():
        _view(con, "trajectories", [tfile], _TRAJ_EXTRA)
        _view(con, "steps", [sfile], _STEP_EXTRA)
        return "raw_steps"
    store = RawStore(data / "raw")
    tfiles, sfiles = store.trajectory_files(), store.step_files()
    if tfiles:
        # Only committed parts (their trajectories file exists), listed now:
        # a rebuild picks up parts written later.
        _view(con, "trajectories", tfiles, _TRAJ_EXTRA)
        _view(con, "steps", sfiles, _STEP_EXTRA)
        return "raw"
    # Nothing consolidated or crawled yet: empty tables of the right shape, so
    # the documented queries still run.
    for name, schema, extra in (
        ("trajectories", TRAJECTORY_SCHEMA, _TRAJ_EXTRA),
        ("steps", STEP_SCHEMA, _STEP_EXTRA),
    ):
        con.register(f"_empty_{name}", schema.empty_table())
        con.execute(f"CREATE TABLE {name} AS SELECT *, {extra} FROM _empty_{name}")
    return "none"


def _view(con, name: str, files: list[Path], extra: str) -> None:
    listed = ", ".join("'" + str(f).replace("'", "''") + "'" for f in files)
    con.execute(
        f"CREATE VIEW {name} AS SELECT *, {extra} FROM read_parquet([{listed}], union_by_name = true)"
    )


# -- shards ---------------------------------------------------------------------------


def _manifest_paths(shards_root: Path) -> list[Path]:
    return sorted(shards_root.glob(f"*/{MANIFEST}")) if shards_root.is_dir() else []


def _manifest_versions(shards_root: Path) -> dict[str, str | None]:
    out = {}
    for m in _manifest_paths(shards_root):
        try:
            out[m.parent.name] = json.loads(m.read_text(encoding="utf-8")).get("version")
        except (OSError, ValueError, AttributeError):
            out[m.parent.name] = None
    return out


def _read_shard_folders(shards_root: Path):
    """Rows of `shards` and `shard_trajectories` for every readable shard folder.

    A folder whose manifest or tars cannot be read is left out whole and
    reported, so one broken export does not hide the others.
    """
    shard_rows, member_rows, problems, datasets = [], [], [], []
    for mpath in _manifest_paths(shards_root):
        folder = mpath.parent
        try:
            manifest = read_manifest(folder)
            rows, members = [], []
            for s in manifest["shards"]:
                path = folder / s["name"]
                rows.append(
                    {
                        "dataset": manifest["dataset"],
                        "version": manifest["version"],
                        "shard": s["name"],
                        "split": s["split"],
                        "samples": s["samples"],
                        "trajectories": s["trajectories"],
                        "bytes": s["bytes"],
                        "sha256": s["sha256"],
                        "path": str(path),
                    }
                )
                members.extend(_shard_members(path, manifest["dataset"], s))
        except (ShardError, tarfile.TarError, OSError) as err:
            problems.append(f"{folder}: left out of the catalog: {err}")
            continue
        shard_rows.extend(rows)
        member_rows.extend(members)
        datasets.append(manifest["dataset"])
    return shard_rows, member_rows, problems, datasets


def _shard_members(path: Path, dataset: str, shard: dict) -> list[dict]:
    """One row per trajectory in a shard, from its samples' JSON members."""
    per: dict[str, list[int]] = {}
    with tarfile.open(path, "r:") as tar:
        for member in tar:
            if not (member.isfile() and member.name.endswith(".json")):
                continue  # images are skipped unread
            try:
                obj = json.loads(tar.extractfile(member).read())
                tid, index = obj["trajectory_id"], int(obj["index"])
            except (ValueError, KeyError, TypeError) as exc:
                raise ShardError(
                    f"cannot read trajectory_id/index: {exc}",
                    source=str(path),
                    record=member.name.partition(".")[0],
                    field="json",
                ) from None
            per.setdefault(tid, []).append(index)
    return [
        {
            "dataset": dataset,
            "shard": shard["name"],
            "split": shard["split"],
            "trajectory_id": tid,
            "steps": len(ix),
            "first_index": min(ix),
            "last_index": max(ix),
        }
        for tid, ix in per.items()
    ]
