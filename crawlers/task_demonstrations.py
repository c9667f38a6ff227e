"""A demonstration of a candidate goal: the steps it needs, as element-named script steps.

A goal's demonstration is the step that made it and the steps it needs: one that made
the element it acted on appear (a field inside a dialog needs the tap that opened the
dialog; the nth button of a name needs the step that made the nth), and, for an action
with no element (a key, a scroll), the step before it. It is written as script steps
(crawlers/scripted.py, what the oracle plays) when every step names its element.

Pure data (crawlers/task_candidates.py calls it); `screens` are anything with
`count(role, name)` (how many elements of that role and name a step's screen shows) and
`view` (equal for screens that are the same); screens[k] is what step k acted on.
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
        maker = _maker(steps, screens, k, key)
        if maker is None and k > 0:  # nothing made it that the screens show: the step before
            todo.append(k - 1)
        elif maker is not None and maker >= 0:
            todo.append(maker)
    return sorted(needed)


def unexplained(steps: list[Step], screens: list, k: int) -> bool:
    """Whether step k acts on a named element no screen shows arriving: named by what it
    held (a code editor's hidden field, named by its selected word) rather than by a
    label, so its name finds it on no replay."""
    key = _target_key(steps[k])
    return key is not None and _maker(steps, screens, k, key) is None


def _maker(steps: list[Step], screens: list, k: int, key: tuple[str, str]) -> int | None:
    """The step that made step k's element appear: -1 when it is there after the reset,
    None when no screen shows it arriving. The nth of its name (a second "advanced
    search" button) needs what made the nth."""
    nth = _ref(steps[k], key).get("nth", 0)
    if screens[0].count(*key) > nth:
        return -1
    return next(
        (m for m in range(k - 1, -1, -1) if screens[m].count(*key) <= nth < screens[m + 1].count(*key)),
        None,
    )


def plays_as_recorded(screens: list, steps: list[int]) -> bool:
    """Whether each of `steps`, played from the reset, acts on the screen it acted on in
    the walk: what recorded points need to land on what they touched."""
    at = screens[0].view
    for k in steps:
        if screens[k].view != at:
            return False
        at = screens[k + 1].view
    return True


def loop_free_path(screens: list, last: int) -> list[int]:
    """Steps 0..`last` of a walk less its loops: from each screen, the walk goes on from
    the last time it stood on that same screen (`view`) before step `last`."""
    path, k = [], 0
    while k <= last:
        k = max(j for j in range(k, last + 1) if screens[j].view == screens[k].view)
        path.append(k)
        k += 1
    return path


def script_step(step: Step) -> dict | None:
    """The step as a script step that names its element; None when it cannot."""
    a, key = step.action, _target_key(step)
    ref = _ref(step, key) if key is not None else None
    if a.type in POINT_VERBS:
        return {POINT_VERBS[a.type]: ref} if ref is not None else None
    if a.type == ActionType.TYPE:
        if ref is None and a.x is not None:
            return None  # typed at a point on an unnamed field: only the point finds it again
        if ref is None:
            return {"type": a.text or ""}
        return {"type": a.text or "", "into": ref, **_at(step)}
    if a.type == ActionType.KEY:
        return {"key": a.text}
    if a.type == ActionType.SELECT:
        return {"select": a.text, "on": ref} if ref is not None else None
    if a.type == ActionType.SCROLL:
        return {"scroll": a.direction}
    if a.type == ActionType.BACK:
        return {"back": True}
    return None


def _at(step: Step) -> dict:
    """Where in its field's box the walk typed ({at: [fx, fy]}): where the caret lands
    decides what the text joins (a folder dialog's selected "New Folder")."""
    a, box = step.action, step.target.bbox if step.target is not None else None
    if a.x is None or box is None or box[2] <= box[0] or box[3] <= box[1]:
        return {}
    fx, fy = (a.x - box[0]) / (box[2] - box[0]), (a.y - box[1]) / (box[3] - box[1])
    if not (0 <= fx <= 1 and 0 <= fy <= 1):
        return {}  # typed beside the box it names: its centre is as good a guess
    return {"at": [round(fx, 3), round(fy, 3)]}


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
