"""Python verifiers any environment file can name (`kind: python`, `function: ...`).

Each is called with (task, observation, history, env) and reads what it
checks from the task's params, so one function serves many tasks.
"""
from __future__ import annotations

import re
from urllib.parse import unquote

from schemas.observation import Observation
from schemas.records import Step, Task


def url_matches(task: Task, observation: Observation, history: list[Step], env) -> dict:
    """Success (and done) when the page's URL, percent-decoded, matches params.url_pattern."""
    pattern = task.params.get("url_pattern")
    if not pattern:
        raise ValueError(f"task {task.task_id}: url_matches needs params.url_pattern")
    url = unquote(observation.url or "")
    ok = re.search(pattern, url) is not None
    return {"done": ok, "success": ok,
            "reason": f"url {url!r} {'matches' if ok else 'does not match'} {pattern!r}"}


def answer_equals(task: Task, observation: Observation, history: list[Step], env) -> dict | None:
    """For information tasks: the last answer equals params.answer (case and spaces ignored)."""
    want = task.params.get("answer")
    if want is None:
        raise ValueError(f"task {task.task_id}: answer_equals needs params.answer")
    answers = [s.action.text for s in history if s.action.type.value == "answer"]
    if not answers:
        return {"done": False, "success": None}
    norm = lambda s: " ".join(str(s).split()).casefold()  # noqa: E731
    ok = norm(answers[-1]) == norm(want)
    return {"done": True, "success": ok, "reason": f"answered {answers[-1]!r}, expected {want!r}"}
