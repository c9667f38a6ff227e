"""Held out: which splits hold each task template and each instruction.

No template and no instruction (trajforge.publish.holdout's normalised form) may
appear in more than one split; `SplitGroups.finish` reports each one that does.
"""

from __future__ import annotations

from schemas.errors import SchemaError
from trajforge.publish.holdout import normalise_instruction


class SplitGroups:
    """Which splits hold each task template and each instruction (once per trajectory)."""

    def __init__(self):
        self.split = ""
        self.done: set[str] = set()
        self.where: dict[tuple[str, str], dict[str, tuple[str, str]]] = {}

    def note(self, obj: dict, src: str, key: str) -> None:

        tid = obj.get("trajectory_id")
        if not isinstance(tid, str) or tid in self.done:
            return
        self.done.add(tid)
        task = obj.get("task") if isinstance(obj.get("task"), dict) else {}
        template = task.get("template_id") or obj.get("template_id")
        instruction = task.get("instruction") or obj.get("instruction") or _set_task(obj)
        for kind, value in (("template", template), ("instruction", instruction)):
            if isinstance(value, str) and value.strip():
                if kind == "instruction":
                    value = normalise_instruction(value)
                self.where.setdefault((kind, value), {}).setdefault(self.split, (src, key))

    def finish(self, problem) -> tuple[int, int]:
        counts = {"template": 0, "instruction": 0}
        for (kind, value), splits in sorted(self.where.items()):
            if len(splits) < 2:
                continue
            counts[kind] += 1
            src, key = splits[sorted(splits)[-1]]
            fld = "task.template_id" if kind == "template" else "task.instruction"
            problem(
                SchemaError(
                    f"{kind} {value[:80]!r} is in splits {sorted(splits)}: "
                    "evaluation must hold out what training sees",
                    source=src,
                    record=key,
                    field=fld,
                )
            )
        return counts["template"], counts["instruction"]


def _set_task(obj: dict) -> str | None:
    """The task line of a reasoning-set sample's human turn (sets written before the
    sample carried its instruction)."""
    for turn in obj.get("conversations") or ():
        if isinstance(turn, dict) and turn.get("from") == "human":
            for line in str(turn.get("value", "")).splitlines():
                for head in ("Task: ", "任务："):
                    if line.startswith(head):
                        return line[len(head) :]
    return None
