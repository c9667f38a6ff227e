"""Reading an environment file's text: its ${NAME} variables, a tasks file beside it
(JSONL or Parquet), and the error that names file, environment and field."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

_ENV_VAR = re.compile(r"\$\{([A-Z_][A-Z0-9_]*)(?::-([^}]*))?\}")


class EnvironmentFileError(ValueError):
    """A bad environment or task file; the message names file, environment and field."""

    def __init__(
        self, message: str, *, source: str, environment: str | None = None, field: str | None = None
    ):
        self.reason, self.source, self.environment, self.field = message, source, environment, field
        where = [f"file {source}"]
        if environment:
            where.append(f"environment '{environment}'")
        if field:
            where.append(f"field '{field}'")
        super().__init__(f"{', '.join(where)}: {message}")


def expand_variables(value: Any, *, source: str, environment: str | None = None, path: str = "") -> Any:
    """`value` with ${NAME} / ${NAME:-default} replaced from os.environ in every string."""
    if isinstance(value, str):

        def sub(m: re.Match) -> str:
            name, default = m.group(1), m.group(2)
            if name in os.environ:
                return os.environ[name]
            if default is not None:
                return default
            raise EnvironmentFileError(
                f"${{{name}}} is not set (give a default: ${{{name}:-value}})",
                source=source,
                environment=environment,
                field=path or None,
            )

        return _ENV_VAR.sub(sub, value)
    if isinstance(value, dict):
        return {
            k: expand_variables(
                v, source=source, environment=environment, path=f"{path}.{k}" if path else str(k)
            )
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [
            expand_variables(v, source=source, environment=environment, path=f"{path}.{i}")
            for i, v in enumerate(value)
        ]
    return value


def read_task_file(path: Path, *, environment: str | None = None) -> list[dict]:
    """Task rows from a JSONL or Parquet file (validated with the environment); a row
    that names another environment (`environment`) refuses the file."""
    rows = _task_rows(path, environment)
    for n, row in enumerate(rows, start=1):
        made_for = row.get("environment")
        if environment and made_for and made_for != environment:
            raise EnvironmentFileError(
                f"task {row.get('task_id')!r} (row {n}) was made for environment '{made_for}', "
                f"not '{environment}': give the task file of '{environment}'",
                source=str(path),
                environment=environment,
                field="tasks.environment",
            )
    return rows


def _task_rows(path: Path, environment: str | None) -> list[dict]:
    source = str(path)
    if not path.exists():
        raise EnvironmentFileError(
            "the tasks file does not exist", source=source, environment=environment, field="tasks"
        )
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        rows = pq.read_table(path).to_pylist()
        for row in rows:
            if isinstance(row.get("params"), str):  # params stored as JSON text
                row["params"] = json.loads(row["params"] or "{}")
            if isinstance(row.get("verifier"), str):
                row["verifier"] = json.loads(row["verifier"])
            for key in [k for k, v in row.items() if v is None]:
                del row[key]
        return rows
    if path.suffix not in (".jsonl", ".json"):
        raise EnvironmentFileError(
            f"tasks file {path.name}: expected .jsonl or .parquet",
            source=source,
            environment=environment,
            field="tasks",
        )
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise EnvironmentFileError(
                f"line {n} is not JSON: {e.msg}", source=source, environment=environment, field="tasks"
            ) from None
        if not isinstance(row, dict):
            raise EnvironmentFileError(
                f"line {n}: expected an object", source=source, environment=environment, field="tasks"
            )
        rows.append(row)
    return rows
