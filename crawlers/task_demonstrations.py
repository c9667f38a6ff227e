"""A demonstration of a candidate goal: the steps it needs, as element-named script steps.

A goal's demonstration is the step that made it and the steps it needs: one that made
the element it acted on appear (a field inside a dialog needs the tap that opened the
dialog; the nth button of a name needs the step that made the nth), and, for an action
with no element (a key, a scroll), the step before it. It is written as script steps
(crawlers/scripted.py, what the oracle plays) when every step names its element.

Pure data (crawlers/task_candidates.py calls it); `screens` are anything with
`count(role, name)`: how many elements of that role and name a step's screen shows.
"""

from __future__ import annotations

from schemas.actions import ActionType
from schemas.records import Element, Step

# Script verbs for the recorded action types that scripted.ScriptedPolicy plays.
POINT_VERBS = {
    ActionType.TAP: "tap",
    ActionType.DOUBLE_TAP: "double_tap",
    ActionType.LONG_PRESS: "long_press",
}


def _target_key(step: Step) -> tuple[str, str] | None:
    t = step.target
    return (t.role, t.name) if t is not None and t.role and t.name else None


def demonstration(steps: list[Step], screens: list, last: int) -> list[int]:
    """The steps goal-making step `last` needs (see the module docstring), in order."""
    needed, todo = set(), [last]
    while todo:
        k = todo.pop()
        if k in needed:
            continue
        needed.add(k)
        key = _target_key(steps[k])
        if key is None:
            if k > 0:  # a key, or a tap on an unnamed element: what the step before left is needed
                todo.append(k - 1)
            continue
        # The nth of its name (a second "advanced search" button) needs what made the nth.
        nth = _ref(steps[k], key).get("nth", 0)
        if screens[0].count(*key) > nth:
            continue  # there after the reset: nothing before is needed to reach it
        maker = next(
            (m for m in range(k - 1, -1, -1) if screens[m].count(*key) <= nth < screens[m + 1].count(*key)),
            None,
        )
        if maker is not None:
            todo.append(maker)
    return sorted(needed)


def script_step(step: Step) -> dict | None:
    """The step as a script step that names its element; None when it cannot."""
    a, key = step.action, _target_key(step)
    ref = _ref(step, key) if key is not None else None
    if a.type in POINT_VERBS:
        return {POINT_VERBS[a.type]: ref} if ref is not None else None
    if a.type == ActionType.TYPE:
        return {"type": a.text or "", **({"into": ref} if ref is not None else {})}
    if a.type == ActionType.KEY:
        return {"key": a.text}
    if a.type == ActionType.SELECT:
        return {"select": a.text, "on": ref} if ref is not None else None
    if a.type == ActionType.SCROLL:
        return {"scroll": a.direction}
    if a.type == ActionType.BACK:
        return {"back": True}
    return None


def _ref(step: Step, key: tuple[str, str]) -> dict:
    """{role, name} of the step's target, with `nth` among same-named elements."""
    same = [e for e in step.elements if (e.role, e.name) == key and e.bbox is not None]
    nth = next((i for i, e in enumerate(same) if _same_box(e, step.target)), 0)
    return {"role": key[0], "name": key[1], **({"nth": nth} if nth else {})}


def _same_box(a: Element, b: Element | None) -> bool:
    return (
        b is not None
        and b.bbox is not None
        and a.bbox is not None
        and all(abs(x - y) < 1e-6 for x, y in zip(a.bbox, b.bbox))
    )
