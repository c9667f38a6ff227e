"""The task catalog: every task the crawl will attempt, as a Parquet table."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from schemas.arrow import TASK_SCHEMA, row_to_task, task_to_row
from schemas.records import Task
from trajforge.store.raw import atomic_write_table


def write_catalog(tasks: list[Task], path: Path) -> None:
    ids = [t.task_id for t in tasks]
    dup = [k for k, n in Counter(ids).items() if n > 1]
    if dup:
        raise ValueError(f"task catalog has duplicate task ids: {dup[:5]}")
    table = pa.Table.from_pylist([task_to_row(t) for t in tasks], schema=TASK_SCHEMA)
    atomic_write_table(Path(path), table)


def read_catalog(path: Path, apps: list[str] | None = None) -> list[Task]:
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"task catalog {path} does not exist: materialise task_catalog first")
    rows = pq.read_table(path).to_pylist()
    tasks = [row_to_task(r) for r in rows]
    if apps is not None:
        tasks = [t for t in tasks if t.app in apps]
    return tasks


def catalog_summary(tasks: list[Task]) -> dict:
    return {
        "tasks": len(tasks),
        "by_app": dict(sorted(Counter(t.app for t in tasks).items())),
        "by_language": dict(sorted(Counter(t.language for t in tasks).items())),
        "templates": len({t.template_id for t in tasks}),
    }
