"""OS-Genesis (github.com/OS-Copilot/OS-Genesis): training steps and synthesized instructions.

Two shapes:
A. Training / evaluation JSONL (HF `os_genesis_{ac,aw}_training_data.jsonl`;
   format as the repo's eval code reads it, no record was available):
   InternVL lines `{"image": path, "conversations": [{"from": "human",
   "value": "...<image>..."}, {"from": "gpt", "value": "...actions:\\n{json}"}]}`.
   The ground truth is `json.loads(value.split("actions:\\n")[1])`, an
   AndroidControl action (`action_type`, `x`, `y` in **absolute pixels**,
   `text`, `direction`, `app_name`; read by android_control.native_action).
   The episode is `image_name.split("_")[1]` (as the loader does) and the
   step the last number of the name (else the line order); the instruction
   is the human turn's "Goal:" / "Task:" / "Instruction:" line.
B. `collection/aw_instructions.json`: instructions written by reverse task
   synthesis for AndroidWorld random-walk steps, `{episode_id, step_id,
   app_name, task_name, instruction}`. They are tasks, not trajectories: rows
   of the tasks table (template_id = the AndroidWorld task class).

Screen size: the screenshot next to the file, else the caller's
`screen_size` (the lines state none). Outcome "success": the training steps
are demonstrations the authors kept after their reward model.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

from schemas.errors import SchemaError
from schemas.records import Task
from trajforge.importers.android_control import native_action
from trajforge.importers.base import (
    RECORD_ERRORS,
    Context,
    Draft,
    Episode,
    Importer,
    bad,
    language_of,
    locate_image,
    read_records,
    require,
)
from trajforge.importers.tasks_table import TaskRow

_GOAL = re.compile(r"(?:Goal|Task|Instruction|instruction)\s*:\s*(.+)")


class OsGenesisImporter(Importer):
    name = "os_genesis"

    def episodes(self, file: Path, ctx: Context) -> Iterator[Episode | TaskRow | SchemaError]:
        groups: dict[str, list] = defaultdict(list)
        for n, (label, rec) in enumerate(read_records(file)):
            if isinstance(rec, SchemaError):
                yield bad(rec, file, label)
                continue
            try:
                if isinstance(rec, dict) and ("conversations" in rec or "image" in rec):
                    ep, step, goal, draft = _line(file, rec, n)
                    groups[ep].append((step, goal, draft))
                else:
                    yield _instruction(rec)
            except RECORD_ERRORS as err:
                yield bad(err, file, label, rec)
        for ep, items in groups.items():
            items.sort(key=lambda t: t[0])
            yield Episode(episode_id=ep, instruction=items[0][1], drafts=[t[2] for t in items])


def _line(file: Path, rec: dict, n: int):
    image = require(rec, "image", str)
    conv = require(rec, "conversations", list)
    if len(conv) < 2 or not all(isinstance(c, dict) for c in conv):
        raise SchemaError("expected a human and a gpt turn", field="conversations")
    human, answer = str(conv[0].get("value", "")), str(conv[-1].get("value", ""))
    m = _GOAL.search(human)
    if not m:
        raise SchemaError(
            "no Goal:/Task:/Instruction: line in the human turn", field="conversations[0].value"
        )
    if "actions:\n" not in answer:
        raise SchemaError("no 'actions:' section", field="conversations[1].value")
    raw = answer.split("actions:\n", 1)[1].strip()
    try:
        obj = json.loads(raw)
    except ValueError:
        raise SchemaError(f"not JSON: {raw[:60]!r}", field="conversations[1].value") from None
    native_action(obj, 1_000_000, 1_000_000, field="action")  # check the record now
    thought = answer.split("actions:\n", 1)[0].strip() or None
    stem = Path(image).stem
    parts = stem.split("_")
    if len(parts) < 2:
        raise SchemaError(f"{image!r} has no episode in its name (<x>_<episode>_...)", field="image")
    nums = re.findall(r"\d+", "_".join(parts[2:]))
    step = int(nums[-1]) if nums else n
    draft = Draft(
        make=lambda w, h: (native_action(obj, w, h, field="action"), None, []),
        image=locate_image(file.parent, image),
        thought=thought,
    )
    return parts[1], step, m.group(1).strip(), draft


def _instruction(rec) -> TaskRow:
    instruction = require(rec, "instruction", str)
    if not instruction.strip():
        raise SchemaError("empty", field="instruction")
    ep = require(rec, "episode_id", str)
    step = require(rec, "step_id", int)
    name = require(rec, "task_name", str)
    task = Task(
        task_id=f"os_genesis:{ep}:{step}",
        instruction=instruction,
        language=language_of(instruction),
        app=str(rec.get("app_name") or ""),
        template_id=name,
    )
    return TaskRow(task=task, source_name="os_genesis", episode_id=ep, step_id=step)
