"""What a task asks for, as data: its goal's identity, its checks, its difficulty.

Two tasks are the same goal when their verifier specs (their own, else the
environment's), canonicalised with the task's placeholders filled, are equal, with the
params their verifier reads where it reads them (`goal_key`); duplicates also share a
language and an instruction up to its values (`masked_instruction`). Pure functions of
an environment file: validation (crawlers/task_validation.py) plays the rest.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from schemas.environment import Environment, TaskSpec, fill

DEMONSTRATION_KEYS = ("script", "actions")
# What a synthesised task's params record about where it came from: not its goal.
PROVENANCE_KEYS = ("walk", "walk_steps", "instruction_source")
# Verifier kinds that read the task's params (a python function gets the task, a
# command its TASK_PARAM_* variables): for them the params are part of the goal.
PARAM_READERS = ("python", "state", "command", "judge")
_VALUES = re.compile(r"\"[^\"]*\"|'[^']*'|“[^”]*”|「[^」]*」|‘[^’]*’|\d+(?:[.,]\d+)*")


def check_count(spec) -> int:
    """A verifier's checks: a predicates verifier's predicates, else 1 (0: none)."""
    if spec is None:
        return 0
    return max(1, len(getattr(spec, "predicates", None) or []))


def _canonical(value: Any) -> Any:
    """Sorted keys, whitespace collapsed in strings, lists ordered (a verifier's lists
    are sets: a conjunction's checks, statuses, headers)."""
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        items = [_canonical(v) for v in value]
        return sorted(items, key=lambda v: json.dumps(v, sort_keys=True, ensure_ascii=False))
    if isinstance(value, str):
        return " ".join(value.split())
    return value


def goal_key(environment: Environment, spec: TaskSpec) -> str:
    """What a task asks for: its verifier (its own, else the environment's), its
    placeholders filled but {session}, and the params its verifier reads."""
    verifier = environment.verifier_for(spec)
    dumped = verifier.model_dump(mode="json", exclude_defaults=True) if verifier else None
    values = {"task_id": spec.task_id, "language": spec.language, "app": environment.name}
    if "seed" in spec.params:
        values["seed"] = spec.params["seed"]
    text = fill(json.dumps(dumped, sort_keys=True, ensure_ascii=False), **values)
    goal: dict[str, Any] = {"verifier": _canonical(json.loads(text)), "start_url": spec.start_url}
    params = {k: v for k, v in spec.params.items() if k not in DEMONSTRATION_KEYS + PROVENANCE_KEYS}
    if verifier is not None and verifier.kind in PARAM_READERS:
        goal["params"] = _canonical(params)
    elif "seed" in params:
        goal["seed"] = params["seed"]  # another start state
    blob = json.dumps(goal, sort_keys=True, ensure_ascii=False)
    return hashlib.sha1(blob.encode("utf-8")).hexdigest()[:16]


def masked_instruction(text: str | None) -> str:
    """An instruction up to its values: quoted strings and numbers masked, case and
    spaces folded."""
    return " ".join(_VALUES.sub("<v>", text or "").lower().split())


def duplicates(environment: Environment) -> dict[str, str]:
    """task_id -> the earlier task it duplicates (same goal, language, masked instruction)."""
    first: dict[tuple, str] = {}
    out = {}
    for spec in environment.tasks:
        key = (goal_key(environment, spec), spec.language, masked_instruction(spec.instruction))
        if key in first:
            out[spec.task_id] = first[key]
        else:
            first[key] = spec.task_id
    return out


def difficulty(demo_steps: int, checks: int, random_rate: float, max_random_rate: float = 0.05) -> float:
    """A task's difficulty in [0, 1]:

        0.5 * min(L, 10) / 10  +  0.2 * min(C, 5) / 5  +  0.3 * (1 - min(1, r / max_random_rate))

    with L the demonstration's executed steps (the fewest over the resets), C its
    verifier's checks (`check_count`) and r the random walks' success rate (a kept task
    has r <= max_random_rate; one that no walk reached gets the full 0.3)."""
    length = min(max(demo_steps, 0), 10) / 10
    many = min(max(checks, 0), 5) / 5
    luck = min(1.0, random_rate / max_random_rate) if max_random_rate > 0 else float(random_rate > 0)
    return round(0.5 * length + 0.2 * many + 0.3 * (1 - luck), 3)


def predicate_set(environment: Environment, spec: TaskSpec) -> frozenset[str]:
    """A predicates verifier's checks, each as canonical JSON (empty for other kinds)."""
    verifier = environment.verifier_for(spec)
    if verifier is None or verifier.kind != "predicates":
        return frozenset()
    return frozenset(
        json.dumps(p.model_dump(mode="json", exclude_unset=True), sort_keys=True) for p in verifier.predicates
    )
