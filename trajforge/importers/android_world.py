"""AndroidWorld's task catalog (google-research/android_world `task_metadata.json`) -> tasks table.

Entries: `{task_name, task_template, difficulty (easy|medium|hard), tags,
optimal_steps}`. They are task definitions, not trajectories: each becomes a
row of `import/android_world/tasks.parquet` (see tasks_table.py) with
task_id "android_world:<task_name>", template_id = task_name, the template
(with its `{placeholders}`) as the instruction and empty params.

Quirks handled:
- `optimal_steps` is a **string** ("10"): stored as an int; a value that is
  not a whole number is an error for that entry.
- `tags` may hold "" (7 times in the full file): empty tags are dropped.
- Params exist only at run time (`generate_random_params()` plus a `seed`),
  so no instance is invented; the goal is `template.format(**params)` then.
- The app is not a field: it is read from the task name's prefix for the
  apps in `APP_PREFIXES`, else left "" (unknown).

Not read: the information-retrieval `tasks.textproto` files (protobuf text
format that needs the `task.proto` schema); they are reported, not parsed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from schemas.errors import SchemaError
from schemas.records import Task
from trajforge.importers.base import RECORD_ERRORS, Context, Importer, bad, read_records, require
from trajforge.importers.tasks_table import TaskRow

DIFFICULTIES = ("easy", "medium", "hard")
# Task-name prefix -> the app the task runs in (AndroidWorld's app set).
APP_PREFIXES = {
    "AudioRecorder": "Audio Recorder",
    "Browser": "Chrome",
    "Camera": "Camera",
    "Clock": "Clock",
    "Contacts": "Contacts",
    "Expense": "Pro Expense",
    "Files": "Files",
    "Markor": "Markor",
    "Notes": "Joplin",
    "Osm": "OsmAnd",
    "Recipe": "Broccoli",
    "Retro": "Retro Music",
    "SimpleCalendar": "Simple Calendar Pro",
    "SimpleDraw": "Simple Draw Pro",
    "SimpleSms": "Simple SMS Messenger",
    "SportsTracker": "OpenTracks",
    "System": "Settings",
    "Tasks": "Tasks",
    "Vlc": "VLC",
}


class AndroidWorldImporter(Importer):
    name = "android_world"
    suffixes = (".json",)

    def unreadable(self, path: Path) -> SchemaError | None:
        if path.suffix == ".textproto":
            return SchemaError(
                "a protobuf text file (needs android_world's task.proto); not read",
                source=str(path),
                record="file",
                field="format",
            )
        return super().unreadable(path)

    def episodes(self, file: Path, ctx: Context) -> Iterator[TaskRow | SchemaError]:
        for label, rec in read_records(file):
            if isinstance(rec, SchemaError):
                yield bad(rec, file, label)
                continue
            name = rec.get("task_name") if isinstance(rec, dict) else None
            try:
                yield _row(rec)
            except RECORD_ERRORS as err:
                yield bad(err, file, f"{label} ({name})" if isinstance(name, str) else label, rec)


def _row(rec) -> TaskRow:
    name = require(rec, "task_name", str)
    template = require(rec, "task_template", str)
    if not template.strip():
        raise SchemaError("empty", field="task_template")
    difficulty = require(rec, "difficulty", str)
    if difficulty not in DIFFICULTIES:
        raise SchemaError(f"{difficulty!r} is not one of {DIFFICULTIES}", field="difficulty")
    raw = require(rec, "optimal_steps", (str, int))
    try:
        steps = int(raw)
    except ValueError:
        raise SchemaError(f"{raw!r} is not a whole number", field="optimal_steps") from None
    if steps <= 0:
        raise SchemaError(f"{steps} is not positive", field="optimal_steps")
    tags = require(rec, "tags", list)
    if not all(isinstance(t, str) for t in tags):
        raise SchemaError(f"{tags!r} is not a list of strings", field="tags")
    app = next((a for p, a in APP_PREFIXES.items() if name.startswith(p)), "")
    task = Task(
        task_id=f"android_world:{name}", instruction=template, language="en", app=app, template_id=name
    )
    return TaskRow(
        task=task,
        source_name="android_world",
        difficulty=difficulty,
        optimal_steps=steps,
        tags=[t for t in tags if t],
    )
