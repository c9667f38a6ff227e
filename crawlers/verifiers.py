"""Python verifiers any environment file can name (`kind: python`, `function: ...`).

Each is called with (task, observation, history, env) and reads what it
checks from the task's params, so one function serves many tasks.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

from schemas.environment import screen_digest
from schemas.observation import Observation
from schemas.records import Step, Task


def url_matches(task: Task, observation: Observation, history: list[Step], env) -> dict:
    """Success (and done) when the page's URL, percent-decoded, matches params.url_pattern."""
    pattern = task.params.get("url_pattern")
    if not pattern:
        raise ValueError(f"task {task.task_id}: url_matches needs params.url_pattern")
    url = unquote(observation.url or "")
    ok = re.search(pattern, url) is not None
    return {
        "done": ok,
        "success": ok,
        "reason": f"url {url!r} {'matches' if ok else 'does not match'} {pattern!r}",
    }


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


def replays_walk(task: Task, observation: Observation, history: list[Step], env) -> dict:
    """A reversed task's check: the replay saw the walk's screens, step by step.

    params.expect_trees holds the hashes of the walk's trees (volatile text
    masked with params.volatile); done as soon as a screen differs, or when
    every recorded screen was seen again.
    """
    expect = list(task.params.get("expect_trees") or [])
    if not expect:
        raise ValueError(f"task {task.task_id}: replays_walk needs params.expect_trees")
    volatile = list(task.params.get("volatile") or [])
    seen = [screen_digest(s.a11y_tree, volatile) for s in history]
    for i, (got, want) in enumerate(zip(seen, expect)):
        if got != want:
            return {"done": True, "success": False, "reason": f"step {i}: the screen differs from the walk's"}
    if len(seen) >= len(expect):
        return {"done": True, "success": True, "reason": f"all {len(expect)} screens of the walk seen again"}
    return {"done": False, "success": None}
