"""Importers for public GUI-agent datasets, into the raw store.

    import_path("aitz", Path("episodes/"), RawStore(root))

reads every record under the path, writes the trajectories to the
collection `import/<format>` (android_world and OS-Genesis instruction lists:
a tasks table `import/<format>/tasks.parquet`), and appends each record it
cannot read to a quarantine JSONL with the file, record, field and reason.
Trajectory ids are `trajectory_id_for(format, episode id)`, so importing the
same data again adds nothing. Each module's docstring lists the format's
quirks and what it does not read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from schemas.errors import SchemaError
from schemas.records import trajectory_id_for
from trajforge.importers.agentnet import AgentNetImporter
from trajforge.importers.aitz import AitzImporter
from trajforge.importers.android_control import AndroidControlImporter
from trajforge.importers.android_world import AndroidWorldImporter
from trajforge.importers.autoglm import AutoGLMImporter
from trajforge.importers.base import (
    RECORD_ERRORS,
    Context,
    Episode,
    Importer,
    as_schema_error,
    build,
    located,
)
from trajforge.importers.gui_odyssey import GuiOdysseyImporter
from trajforge.importers.guiact import GuiActImporter
from trajforge.importers.mind2web import Mind2WebImporter
from trajforge.importers.os_genesis import OsGenesisImporter
from trajforge.importers.tasks_table import TaskRow, write_tasks
from trajforge.store.raw import RawStore

IMPORTERS: dict[str, Importer] = {
    i.name: i
    for i in (
        AitzImporter(),
        AndroidControlImporter(),
        GuiOdysseyImporter(),
        Mind2WebImporter(),
        GuiActImporter(),
        AgentNetImporter(),
        OsGenesisImporter(),
        AutoGLMImporter(),
        AndroidWorldImporter(),
    )
}

_RAW_LIMIT = 20_000  # characters of a bad record kept in the quarantine file
# Episodes a committed part: each commit is two Parquet files and two fsyncs, so
# the store's default of 16 made an import commit-bound (128: ~5x the steps/s of
# 16 on a 2-core machine); a killed import redoes at most this many episodes.
_IMPORT_BATCH = 128


@dataclass
class ImportResult:
    imported: int  # trajectories and task rows newly written
    steps: int  # their steps
    quarantined: int  # records that could not be read
    collection: str
    skipped: int = 0  # already in the store (a re-import)
    quarantine_path: Path | None = None
    tasks_path: Path | None = None


def import_path(
    format: str,
    path: Path,
    store: RawStore,
    *,
    quarantine_path: Path | None = None,
    screen_size: tuple[int, int] | None = None,
) -> ImportResult:
    """Import a file or folder of `format` records into `store` (see the module docstring)."""
    if format not in IMPORTERS:
        raise SchemaError(
            f"unknown format {format!r}; known: {', '.join(sorted(IMPORTERS))}", source=str(path)
        )
    imp = IMPORTERS[format]
    collection = f"import/{format}"
    quarantine_path = Path(quarantine_path or store.root / collection / "quarantine.jsonl")
    ctx = Context(screen_size=screen_size)
    files, unreadable = imp.files(Path(path))
    bad = 0

    def quarantine(err: SchemaError, raw=None) -> None:
        nonlocal bad
        bad += 1
        quarantine_path.parent.mkdir(parents=True, exist_ok=True)
        entry = {
            "format": format,
            "source": err.source,
            "record": err.record,
            "field": err.field,
            "reason": err.reason,
            "error": str(err),
        }
        if raw is not None:
            text = raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False, default=str)
            entry["raw"] = text[:_RAW_LIMIT]
        with open(quarantine_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry, ensure_ascii=False) + "\n")

    for err in unreadable:
        quarantine(err)

    imported = steps = skipped = 0
    task_rows: list[TaskRow] = []
    with store.writer(collection, batch_size=_IMPORT_BATCH) as writer:
        for file in files:
            for item in imp.episodes(file, ctx):
                if isinstance(item, SchemaError):
                    quarantine(item, getattr(item, "raw", None))
                    continue
                if isinstance(item, TaskRow):
                    task_rows.append(item)
                    continue
                record = f"episode {item.episode_id}"
                if writer.has(trajectory_id_for(format, item.episode_id)):
                    skipped += 1  # imported before: skip the image work too
                    continue
                try:
                    traj, st = build(format, item, ctx, store.blobs)
                except RECORD_ERRORS as err:
                    quarantine(located(as_schema_error(err), file, record))
                    continue
                if writer.add(traj, st):
                    imported += 1
                    steps += len(st)
                else:
                    skipped += 1
    tasks_path = None
    if task_rows:
        tasks_path = store.root / collection / "tasks.parquet"
        added, known = write_tasks(tasks_path, task_rows)
        imported, skipped = imported + added, skipped + known
    return ImportResult(
        imported, steps, bad, collection, skipped, quarantine_path if bad else None, tasks_path
    )


__all__ = ["IMPORTERS", "ImportResult", "Importer", "Episode", "import_path"]
