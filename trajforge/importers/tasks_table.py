"""A Parquet table of imported tasks (no trajectories): AndroidWorld's catalog, OS-Genesis' instructions.

Columns: the Task fields (schemas.arrow TASK_TYPE) plus source_name,
difficulty, optimal_steps (int, or null), tags, episode_id and step_id (where
an instruction was written for a recorded episode). Rows are keyed by
task_id: re-importing replaces nothing and adds only new ids.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from schemas.arrow import TASK_TYPE, task_to_row, well_formed
from schemas.errors import SchemaError
from schemas.records import Task
from trajforge.store.raw import atomic_write_table

TASKS_SCHEMA = pa.schema(
    list(TASK_TYPE)
    + [
        ("source_name", pa.string()),
        ("difficulty", pa.string()),
        ("optimal_steps", pa.int32()),
        ("tags", pa.list_(pa.string())),
        ("episode_id", pa.string()),
        ("step_id", pa.int32()),
    ]
)


@dataclass
class TaskRow:
    task: Task
    source_name: str
    difficulty: str | None = None
    optimal_steps: int | None = None
    tags: list[str] = field(default_factory=list)
    episode_id: str | None = None
    step_id: int | None = None

    def __post_init__(self) -> None:
        # int32 columns: a number that does not fit is this record's error (quarantined),
        # not a failure of the whole table's write.
        for name in ("optimal_steps", "step_id"):
            v = getattr(self, name)
            if v is not None and not -(2**31) <= v < 2**31:
                raise SchemaError(f"{v} is out of range", field=name)

    def row(self) -> dict:
        return well_formed(
            {
                **task_to_row(self.task),
                "source_name": self.source_name,
                "difficulty": self.difficulty,
                "optimal_steps": self.optimal_steps,
                "tags": self.tags,
                "episode_id": self.episode_id,
                "step_id": self.step_id,
            }
        )


def write_tasks(path: Path, rows: list[TaskRow]) -> tuple[int, int]:
    """Merge rows into the table at `path` by task_id: (added, already there)."""
    old = pq.read_table(path, schema=TASKS_SCHEMA).to_pylist() if path.exists() else []
    known = {r["task_id"] for r in old}
    new, dup = [], 0
    for r in rows:
        if r.task.task_id in known:
            dup += 1
            continue
        known.add(r.task.task_id)
        new.append(r.row())
    if new or not path.exists():
        atomic_write_table(path, pa.Table.from_pylist(old + new, schema=TASKS_SCHEMA))
    return len(new), dup


def read_tasks(path: Path) -> list[dict]:
    return pq.read_table(path, schema=TASKS_SCHEMA).to_pylist()
