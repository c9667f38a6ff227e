"""Candidate goal tasks from recorded walks: what a step changed becomes a task's goal.

A walk's steps each hold the screen before their action, so step j+1 holds what step j
left. Every change between the two (a tab now selected, a box now checked, a text box
now holding a text, a dialog now open or gone, a new path or query in the URL) that was
not already so right after the reset is a goal: a `predicates` verifier
(schemas/predicates.py) of the end state, never of the path; so is what the walk typed
or an item it acted on, shown anew (`echo_goals`: which post, which item, where the URL
or a flash says only the kind of change). A goal's demonstration is
the step that made it and the steps it needs: one that made the element it acted on
appear (a field inside a dialog needs the tap that opened the dialog), and, for an
action with no element (a key, a scroll), the step before it. The demonstration is
written as element-named script steps (crawlers/scripted.py, what the oracle plays)
when every step names its element, and as the recorded actions always.

What counts as a change, and its words, is crawlers/screen_changes.py's. Instructions
are written from the predicates, in English and Chinese (labelled `template`). Candidates are only candidates: crawlers.task_validation decides which
are kept (non-trivial, achievable, specific, new).

Pure data: nothing here drives an app.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from urllib.parse import urlsplit

from schemas.a11y import AriaNode
from schemas.actions import ActionType
from schemas.environment import Environment
from schemas.predicate_eval import EndState, check, node_value
from schemas.predicates import Predicate
from schemas.records import Step, Trajectory

from .screen_changes import (
    MAX_NAME,
    MAX_SHOWN_OF_A_ROLE,
    SHOWN_RANK,
    VALUE_ROLES,
    Goal,
    Screen,
    goals_between,
    instruction,
    main_goals,
    new_goal,
    shown_goal,
    worded,
)
from .task_demonstrations import (
    POINT_VERBS,
    demonstration,
    loop_free_path,
    plays_as_recorded,
    script_step,
    unexplained,
)


@dataclass
class Candidate:
    """A candidate task: its goals, the demonstration's steps (indices in the walk)."""

    goals: list[Goal]
    walk: str  # the walk's trajectory id
    steps: list[int]
    # {walk_steps, script, actions} or {walk_steps, actions, device}: the walk's screen,
    # where recorded points land on what they touched (_demonstration_of).
    demo: dict
    fallback: dict | None = None  # the same, of the walk's whole path (loops cut)
    key: str = field(init=False)

    def __post_init__(self) -> None:
        self.key = predicates_key([g.predicate for g in self.goals])


def predicates_key(predicates: list[dict]) -> str:
    """The same goal, written in any order, has the same key."""
    canon = sorted(json.dumps(p, sort_keys=True, ensure_ascii=False) for p in predicates)
    return hashlib.sha1("\n".join(canon).encode("utf-8")).hexdigest()[:12]


# Compared on a page seen again besides SHOWN_RANK's: a list's changed link ("Unread,
# Carmen Diaz ..." -> "Carmen Diaz ..."), a toggle's new name ("Pin note: X" -> "Unpin
# note: X", "Save to wishlist" -> "Remove from wishlist"): which item changed, and how.
REVISIT_ROLES = ("link", "button")


# ------------------------------------------------------------------ walks -> candidates
def walk_candidates(
    traj: Trajectory, steps: list[Step], environment: Environment, *, max_goals: int = 2
) -> list[Candidate]:
    """The candidates of one walk: one per goal a step made that still holds a step
    later and was not so after the reset, and one for each pair of such goals made by
    different steps that both hold at the later one (a goal of two parts, `max_goals`)."""
    steps = sorted(steps, key=lambda s: s.index)
    screens = [Screen.of(s, environment.volatile) for s in steps]
    reset = screens[0].state()
    made: list[tuple[int, Goal]] = []
    out: list[Candidate] = []
    for j in range(len(steps) - 1):
        for goal in _made_at(steps, screens, j, reset):
            # Made again (the table left and opened again): this step is its maker now.
            made = [(k, g) for k, g in made if g.predicate != goal.predicate]
            made.append((j, goal))
            out.append(_candidate(traj, steps, screens, [goal], [j]))
        if max_goals >= 2:
            now = screens[j + 1].state()
            for i, (k, earlier) in enumerate(made):
                if k >= j or not check(Predicate.model_validate(earlier.predicate), now).holds:
                    continue
                if k in demonstration(steps, screens, j):
                    continue  # the later goal needs the earlier: one goal, said once
                for _, goal in (m for m in made[i + 1 :] if m[0] == j):
                    if goal.predicate != earlier.predicate:  # (a dialog opened again is one goal)
                        out.append(_candidate(traj, steps, screens, [earlier, goal], [k, j]))
    return out


def _made_at(steps: list[Step], screens: list[Screen], j: int, reset: EndState) -> list[Goal]:
    """The goals step j made that were not so after the reset, the best rank of them; and,
    when step j ended on a page the walk saw before (its own included), the best of what
    differs from that visit (`revisit_goals`)."""
    step = steps[j]
    if step.guard or step.error or _error_page(steps[j + 1].url):
        return []
    if step.screen_changed is False and screens[j].probes == screens[j + 1].probes:
        return []  # (a save changes a probe, not the screen)
    # Trivial goals (already so after the reset) go before the best rank is chosen: a
    # closed view that was closed at the reset must not hide what the step did.
    made = main_goals(_not_trivial(goals_between(screens[j], screens[j + 1]), reset))
    k = _last_visit(screens, j + 1)
    if k is not None:
        # k == j: the step stayed on its page (a list's bulk action): its rows and links
        # are compared too, which goals_between leaves out (links, names over MAX_NAME).
        seen = {json.dumps(g.predicate, sort_keys=True) for g in made}
        again = _not_trivial(revisit_goals(screens[k], screens[j + 1]), reset)
        # Three: a list's changed row besides the counts that changed with it ("Inbox 3").
        made += [g for g in main_goals(again, most=3) if json.dumps(g.predicate, sort_keys=True) not in seen]
    # What the walk typed or acted on, shown anew: unless a goal above names it already.
    made += [g for g in _not_trivial(echo_goals(steps, screens, j), reset) if not _named_in(g, made)]
    return made


# A typed text or an acted-on item's name shows as the part of a node's name it shares
# with it, at least this long (or whole); an acted-on name shorter than ITEM_NAME is a
# control's label ("Save", "Inbox"), not an item's.
MIN_TYPED_PART = 8
ITEM_NAME = 16
ECHO_RANK = 1


def echo_goals(steps: list[Step], screens: list[Screen], j: int) -> list[Goal]:
    """What the walk typed, or the name of an item it acted on, up to step j, that step
    j's screen shows outside a text box and the screen before did not: the new post,
    comment or note named by the user's own words ("Open post by Alex Morgan: Trying
    the new coffee"), a repost quoting the post it reposts. It tells the change from
    another of its kind (another post, another item). One goal per text: the first
    new node showing all of it, else the one showing the longest part; checked by that
    part, or, where the part showed before too (the reposted post itself), by the new
    node's own name (the quote "：#dev# fought the compiler all afternoon")."""
    # New: on neither the screen before nor the reset's (the feed the post was on).
    earlier = [screens[j].state(), screens[0].state()]
    seen = {(n.role, n.name) for e in earlier for n in e.nodes}
    fresh = [n for n in screens[j + 1].nodes if (n.role, n.name) not in seen]
    goals = []
    for text in dict.fromkeys(_echoed_texts(steps[: j + 1])) if fresh else ():
        shown = [(part, n) for n in fresh if (part := _shared_part(n, text)) is not None]
        if not shown:
            continue
        part, node = max(shown, key=lambda pn: len(pn[0]))  # the first of the longest
        for ref in ({"role": node.role, "name_contains": part}, _name_ref(node)):
            predicate = {"element": ref, "present": True}
            if not any(check(Predicate.model_validate(predicate), e).holds for e in earlier):
                shown_as = ref.get("name") or ref["name_contains"]
                words = {"en": f'show "{shown_as}"', "zh": f"显示“{shown_as}”"}
                goals.append(Goal(predicate, words, ECHO_RANK, echo=True))
                break
    return goals


def _name_ref(node: AriaNode) -> dict:
    """{role, name}, or for a name over MAX_NAME {role, name_contains: its first MAX_NAME}."""
    name = " ".join((node.name or "").split())
    if len(name) <= MAX_NAME:
        return {"role": node.role, "name": name}
    return {"role": node.role, "name_contains": name[:MAX_NAME]}


def _echoed_texts(steps: list[Step]) -> list[str]:
    out = []
    for s in steps:
        if s.action.type == ActionType.TYPE and s.action.text and worded(s.action.text):
            out.append(" ".join(s.action.text.split()))
        elif s.action.type in POINT_VERBS and s.target is not None and len(s.target.name or "") >= ITEM_NAME:
            out.append(" ".join(s.target.name.split()))
    return out


def _shared_part(node: AriaNode, text: str) -> str | None:
    """The part of `text` (at most MAX_NAME long) that `node`'s name shows: all of it, or
    a run of at least MIN_TYPED_PART characters (a name cut short); None when it shows
    none, or the node is a text box (its value is a goal of its own)."""
    name = " ".join((node.name or "").split())
    if node.role in VALUE_ROLES or node.role == "option" or not name or "<volatile>" in name:
        return None
    if text[:MAX_NAME].casefold() in name.casefold():
        return text[:MAX_NAME]
    m = SequenceMatcher(None, name.casefold(), text.casefold(), autojunk=False).find_longest_match()
    if m.size >= MIN_TYPED_PART and worded(text[m.b : m.b + m.size]):
        return text[m.b : m.b + min(m.size, MAX_NAME)].strip()
    return None


def _named_in(goal: Goal, goals: list[Goal]) -> bool:
    """`goal`'s name part is in the name another of `goals` checks (the same node)."""
    ref = goal.predicate["element"]
    part = (ref.get("name") or ref.get("name_contains") or "").casefold()
    return any(
        part in ((g.predicate.get("element") or {}).get("name") or "").casefold()
        or part in ((g.predicate.get("element") or {}).get("name_contains") or "").casefold()
        for g in goals
    )


def _not_trivial(goals: list[Goal], reset: EndState) -> list[Goal]:
    return [g for g in goals if not check(Predicate.model_validate(g.predicate), reset).holds]


def _last_visit(screens: list[Screen], i: int) -> int | None:
    """The last screen before screens[i] on the same page (URL path), if any."""
    path = urlsplit(screens[i].url or "").path
    if not urlsplit(screens[i].url or "").scheme.startswith("http"):
        return None
    return next((k for k in range(i - 1, -1, -1) if urlsplit(screens[k].url or "").path == path), None)


def revisit_goals(before: Screen, after: Screen) -> list[Goal]:
    """What is new or gone on a page since the walk last saw it (a list's row after an
    edit elsewhere: the deleted email's link, the renamed note's): items and links, a
    long name checked by its first MAX_NAME characters (`name_contains`); a role with
    many at once is a new view's content and skipped."""
    goals = []
    for shown, was, now in ((True, before, after), (False, after, before)):
        was_state = was.state()
        new = []
        for n in now.nodes:
            name = n.name or ""
            if (n.role not in SHOWN_RANK and n.role not in REVISIT_ROLES) or not name or "<volatile>" in name:
                continue
            if "\n" in name or not worded(name):
                continue
            ref = (
                {"role": n.role, "name": name}
                if len(name) <= MAX_NAME
                else {"role": n.role, "name_contains": name[:MAX_NAME]}
            )
            if not was_state.shows(n.role, **{k: v for k, v in ref.items() if k != "role"}):
                new.append(ref)
        per_role = Counter(r["role"] for r in new)
        goals += [_ref_goal(r, shown) for r in new if per_role[r["role"]] <= MAX_SHOWN_OF_A_ROLE]
    unique = {json.dumps(g.predicate, sort_keys=True): g for g in goals}
    return sorted(unique.values(), key=lambda g: g.rank)


def _ref_goal(ref: dict, shown: bool) -> Goal:
    if "name" in ref and ref["role"] in SHOWN_RANK:
        return shown_goal(ref["role"], ref["name"], shown)
    name = ref.get("name") or ref["name_contains"] + "…"
    predicate = {"element": ref, "present": shown}
    rank = SHOWN_RANK.get(ref["role"], 3)
    if shown:
        return new_goal(predicate, f'show "{name}"', f"显示“{name}”", rank)
    return new_goal(predicate, f'remove "{name}"', f"删除“{name}”", rank)


def final_goals(steps: list[Step], environment: Environment) -> list[Goal]:
    """Every goal a walk's steps made that holds on its last step's screen (its end
    state) and was not so after the reset, each once, in the order made: what the
    whole walk achieved, as one conjunction (an oracle episode's goal, in words a
    `predicates` verifier checks). Empty when the end state shows none."""
    steps = sorted(steps, key=lambda s: s.index)
    screens = [Screen.of(s, environment.volatile) for s in steps]
    if not screens:
        return []
    reset, end = screens[0].state(), screens[-1].state()
    out: dict[str, Goal] = {}
    for j in range(len(steps) - 1):
        for goal in _made_at(steps, screens, j, reset):
            key = json.dumps(goal.predicate, sort_keys=True, ensure_ascii=False)
            if key not in out and check(Predicate.model_validate(goal.predicate), end).holds:
                out[key] = goal
    return list(out.values())


def _error_page(url: str) -> bool:
    """The browser's own error page (a refused or failed load): no goal of the app's."""
    return url.startswith(("chrome-error:", "about:neterror", "about:blank"))


def _touched(screens: list[Screen], goal: Goal, before: int) -> list[int]:
    """The steps before `before` that changed the goal's element (its value or states): a
    text box's value is what every edit of it left, not only the last."""
    if "probe" in goal.predicate:
        return _edits(screens, before)
    ref = goal.predicate.get("element")
    if not ref or "name" not in ref:
        return []
    key = (ref["role"], ref["name"])

    def seen(screen: Screen) -> tuple | None:
        for i, n in enumerate(screen.nodes):
            if (n.role, n.name) == key:
                return node_value(screen.nodes, i), tuple(sorted(n.attrs.items()))
        return None

    # Changed while shown: a step that only brought it (back) into view is its maker's
    # business (task_demonstrations.demonstration), and a visit left since needs no replay.
    return [
        m
        for m in range(before)
        if None not in (seen(screens[m]), seen(screens[m + 1])) and seen(screens[m]) != seen(screens[m + 1])
    ]


def _edits(screens: list[Screen], before: int) -> list[int]:
    """The steps before `before` that changed a field's value: what a save (a probe
    goal) writes is every edit made before it, not only the last."""

    def values(screen: Screen) -> list[tuple]:
        return [
            (n.role, n.name, node_value(screen.nodes, i))
            for i, n in enumerate(screen.nodes)
            if n.role in VALUE_ROLES
        ]

    return [m for m in range(before) if values(screens[m]) != values(screens[m + 1])]


def _echoed_by(steps: list[Step], goal: Goal, before: int) -> list[int]:
    """The steps before `before` whose typed text or acted-on item an echo goal shows
    (`echo_goals`): the typing of a post is part of posting it."""
    ref = goal.predicate.get("element") or {}
    shown = ref.get("name_contains") or ref.get("name")
    if not shown or not goal.echo:
        return []
    node = AriaNode(role="", name=shown)
    return [m for m in range(before) if any(_shared_part(node, t) for t in _echoed_texts([steps[m]]))]


def _candidate(
    traj: Trajectory, steps: list[Step], screens: list[Screen], goals: list[Goal], makers: list[int]
) -> Candidate:
    makers = makers + [
        m
        for goal, last in zip(goals, makers)
        for m in _touched(screens, goal, last) + _echoed_by(steps, goal, last)
    ]
    needed = sorted({i for m in makers for i in demonstration(steps, screens, m)})
    path = loop_free_path(screens, max(needed))
    if any(steps[i].action.type == ActionType.BACK for i in needed):
        needed = path  # back goes where the history says: the walk's own path made it
    demo = _demonstration_of(steps, screens, needed, traj.device.name)
    if "script" not in demo and (len(path) < len(needed) or not plays_as_recorded(screens, needed)):
        # Played as recorded points, a step lands only on the screen the walk saw: the
        # walk's own path to the goal, its loops cut, unless the steps needed are so.
        needed, demo = path, _demonstration_of(steps, screens, path, traj.device.name)
    return Candidate(
        goals=goals,
        walk=traj.trajectory_id,
        steps=needed,
        demo=demo,
        # What validation plays when the steps found needed do not reach the goal (a view
        # mode a key set that no screen showed): the walk's own path, loops cut.
        fallback=None if path == needed else _demonstration_of(steps, screens, path, traj.device.name),
    )


def _demonstration_of(steps: list[Step], screens: list[Screen], indices: list[int], device: str) -> dict:
    """The steps as a task's demonstration: a script naming their elements where every
    one can, else the recorded points (`actions`) and the walk's `device`."""
    script = [None if unexplained(steps, screens, i) else script_step(steps[i]) for i in indices]
    actions = [steps[i].action.model_dump(mode="json", exclude_none=True) for i in indices]
    if all(script):
        return {"walk_steps": indices, "script": script, "actions": actions}
    return {"walk_steps": indices, "actions": actions, **({"device": device} if device else {})}


def candidate_tasks(
    walks: Iterable[tuple[Trajectory, list[Step]]],
    environment: Environment,
    languages: tuple[str, ...] = ("en", "zh"),
    *,
    max_goals: int = 2,
) -> list[dict]:
    """Task rows (the environment file's task shape) of every distinct goal the walks
    made, one per language; the shortest demonstration of a goal is kept."""
    best: dict[str, Candidate] = {}
    for traj, steps in walks:
        for c in walk_candidates(traj, steps, environment, max_goals=max_goals):
            held = best.get(c.key)
            if held is None or len(c.steps) < len(held.steps):
                best[c.key] = c
    return [task_row(c, environment, lang) for c in best.values() for lang in languages]


def task_row(c: Candidate, environment: Environment, language: str) -> dict:
    params: dict = {
        **c.demo,
        "instruction_source": "template",
        "instructions": {lang: instruction(c.goals, lang) for lang in ("en", "zh")},
        "walk": c.walk,
    }
    if c.fallback is not None:
        params["fallback"] = c.fallback
    return {
        "task_id": f"{environment.name}-goal-{c.key}-{language}",
        "instruction": instruction(c.goals, language),
        "language": language,
        "environment": environment.name,
        "params": params,
        "verifier": {"kind": "predicates", "predicates": [g.predicate for g in c.goals]},
    }
