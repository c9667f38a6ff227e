"""What differs between two screens of a walk, as candidate goals with their words.

Every change from one screen to the next (a tab now selected, a box now checked, a text
box now holding a text, a dialog now open or gone, a new path or query in the URL, a
probe's new value) is a `Goal`: a `predicates` predicate (schemas/predicates.py) of the
later screen, its rank (a state or value change says more than an appearance) and its
clause in English and Chinese. crawlers/task_candidates.py turns a walk's goals into
candidate tasks.

Pure data: nothing here drives an app.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, unquote, urlsplit

from schemas.a11y import AriaNode, parse_snapshot
from schemas.environment import mask_volatile
from schemas.predicate_eval import EndState, node_value
from schemas.records import Step

# Roles whose appearance or disappearance is a goal a user would name, by rank: a
# dialog or heading names a view, a list's item or a table's cell is the view's content.
SHOWN_RANK = {
    "dialog": 1, "alertdialog": 1, "heading": 1, "alert": 1,
    "tabpanel": 2, "article": 2, "region": 2,
    "listitem": 3, "row": 3, "treeitem": 3, "option": 3, "menuitem": 3,
    "cell": 4,
}  # fmt: skip
# More new items of one role than this at once: a new view's content, not a goal.
MAX_SHOWN_OF_A_ROLE = 3
VALUE_ROLES = ("textbox", "searchbox", "combobox", "spinbutton", "slider")
MAX_NAME = 60
MAX_PROBE_TEXT = 200  # a probe's text longer than this is a document, not a goal's value


@dataclass(frozen=True)
class Goal:
    """One change a step made: its predicate and its words in each language."""

    predicate: dict
    words: dict[str, str]  # {"en": ..., "zh": ...}: the goal as an instruction's clause
    rank: int  # lower first: a state or value change says more than an appearance
    echo: bool = False  # shows what the walk typed or acted on (echo_goals)


# ------------------------------------------------------------------ state changes
@dataclass
class Screen:
    """One step's screen as goals compare it."""

    url: str
    tree: str
    nodes: list[AriaNode]
    probes: dict = field(default_factory=dict)  # the environment's probes, where the walk read them
    view: tuple = ()  # what tells two screens apart: url, masked tree, probes
    _state: EndState | None = field(default=None, repr=False, compare=False)

    @classmethod
    def of(cls, step: Step, volatile: list[str]) -> Screen:
        masked = mask_volatile(step.a11y_tree, volatile)
        probes = _masked(step.probes or {}, volatile)
        view = (step.url, masked, json.dumps(probes, sort_keys=True))
        return cls(step.url, step.a11y_tree, parse_snapshot(masked), probes, view)

    def count(self, role: str, name: str) -> int:
        return sum(1 for n in self.nodes if n.role == role and n.name == name)

    def state(self) -> EndState:
        """The screen as predicates see it: made (and its tree parsed) once."""
        if self._state is None:
            self._state = EndState(url=self.url, a11y_tree=self.tree, probes=self.probes)
        return self._state


def _nameable(node: AriaNode) -> bool:
    name = node.name or ""
    return 0 < len(name) <= MAX_NAME and "<volatile>" not in name and "\n" not in name and worded(name)


def worded(name: str) -> bool:
    """A name with a letter in it: a bare number (a count, a table's cell "21") names
    nothing a person would ask for, and changes with the data."""
    return any(ch.isalpha() for ch in name)


def goals_between(before: Screen, after: Screen) -> list[Goal]:
    """What differs from `before` in `after`, as goals, the most telling first: a state or
    value change, then a new path, then a view that opened or closed, then its content."""
    goals = (
        _state_goals(before, after)
        + _probe_goals(before.probes, after.probes)
        + _shown_goals(before, after)
        + _url_goals(before.url, after.url)
    )
    return sorted(goals, key=lambda g: g.rank)


def main_goals(goals: list[Goal], most: int = 2) -> list[Goal]:
    """The goals of the best rank (at most `most`): what a step did, not its side effects
    (closing a tiddler also removes every item in it)."""
    if not goals:
        return []
    best = goals[0].rank
    return [g for g in goals if g.rank == best][:most]


def _keyed(nodes: list[AriaNode]) -> dict[tuple[str, str], int]:
    """The first node of each (role, name) that is unique on its screen."""
    counts = Counter((n.role, n.name) for n in nodes)
    return {
        (n.role, n.name): i for i, n in enumerate(nodes) if counts[(n.role, n.name)] == 1 and _nameable(n)
    }


def _state_goals(before: Screen, after: Screen) -> list[Goal]:
    was, now = _keyed(before.nodes), _keyed(after.nodes)
    goals = []
    for (role, name), i in now.items():
        if (role, name) not in was:
            continue
        old, new = before.nodes[was[(role, name)]], after.nodes[i]
        for state in ("checked", "selected", "expanded"):
            a, b = _state(old, state), _state(new, state)
            if a != b and b in (True, False) and not (state == "selected" and not b):
                # (a tab or an option loses its selection to another: that one is the goal)
                goals.append(_state_goal(role, name, state, b))
        if role in VALUE_ROLES:
            value = node_value(after.nodes, i)
            if value and value != node_value(before.nodes, was[(role, name)]) and len(value) <= MAX_NAME:
                goals.append(_value_goal(role, name, value))
    return goals


def _state(node: AriaNode, state: str) -> bool | str:
    if state == "checked":
        v = node.attrs.get("checked")
        return False if v in (None, "false") else ("mixed" if v == "mixed" else True)
    return state in node.attrs


def _shown_goals(before: Screen, after: Screen) -> list[Goal]:
    goals = _appeared(before, after, True) + _appeared(after, before, False)
    unique = {json.dumps(g.predicate, sort_keys=True): g for g in goals}
    return list(unique.values())


def _appeared(before: Screen, after: Screen, shown: bool) -> list[Goal]:
    """Goals for the nameable nodes of `after` that `before` lacks (shown, or, with the
    screens swapped, gone); a role with many at once is a view's content and skipped."""
    new = [
        n for n in after.nodes if n.role in SHOWN_RANK and _nameable(n) and before.count(n.role, n.name) == 0
    ]
    per_role = Counter(n.role for n in new)
    keep = [n for n in new if per_role[n.role] <= MAX_SHOWN_OF_A_ROLE or SHOWN_RANK[n.role] == 1]
    return [shown_goal(n.role, n.name, shown) for n in keep]


def _probe_goals(before: dict, after: dict) -> list[Goal]:
    """A probe's value that changed (state the screen may not show: a saved file, the
    app's API): a short text it now equals, or the lines or list items it now holds
    that it did not (a new file, a new row). Numbers, objects and removals name
    nothing a person would ask for by value, and are left out."""
    goals: list[Goal] = []
    said: set[str] = set()  # one change seen by two probes (the page's list, the server's): one goal
    for name in [n for n in after if n in before]:  # the file's order
        old, new = before[name], after[name]
        if new == old or new in (None, ""):
            continue
        label = name.replace("_", " ").replace("-", " ")
        items = _items(new)
        if items is None:
            if (
                isinstance(new, str)
                and len(new) <= MAX_PROBE_TEXT
                and worded(new)
                and "<volatile>" not in new
                and new not in said
            ):
                said.add(new)
                goals.append(
                    new_goal(
                        {"probe": name, "equals": new},
                        f'set the {label} to "{new}"',
                        f"将{label}设为“{new}”",
                        0,
                    )
                )
            continue
        was = set(_items(old) or [])
        added = [
            i
            for i in dict.fromkeys(items)
            if i not in was and worded(i) and len(i) <= MAX_NAME and "<volatile>" not in i
        ]
        if added and set(added) <= said:
            continue
        said.update(added)
        if len(added) <= MAX_SHOWN_OF_A_ROLE:
            goals += [
                new_goal(
                    {"probe": name, "contains": i}, f'add "{i}" to the {label}', f"在{label}中添加“{i}”", 0
                )
                for i in added
            ]
    return goals


def _masked(probes: dict, volatile: list[str]) -> dict:
    """Probe values with the environment's volatile text masked, as the tree's is (a
    journal titled with today's date names nothing a task can ask for tomorrow)."""

    def mask(v):
        if isinstance(v, str):
            return mask_volatile(v, volatile)
        return [mask(x) for x in v] if isinstance(v, list) else v

    return {name: mask(v) for name, v in probes.items()} if volatile else probes


def _items(value) -> list[str] | None:
    """A probe value's items: a list's scalars, a text's lines; None for one value."""
    if isinstance(value, list):
        return [str(v) for v in value if isinstance(v, str | int | float) and not isinstance(v, bool)]
    if isinstance(value, str) and "\n" in value.strip():
        return [line.strip() for line in value.splitlines() if line.strip()]
    return None


def _url_goals(before: str, after: str) -> list[Goal]:
    a, b = urlsplit(before or ""), urlsplit(after or "")
    if not b.scheme.startswith("http"):
        return []  # a desktop title or an activity: the tree says what changed
    goals = []
    path = unquote(b.path) or "/"
    if path != (unquote(a.path) or "/"):
        goals.append(new_goal({"url": {"path": path}}, f"go to the page {path}", f"前往页面 {path}", 2))
    old = dict(parse_qsl(a.query, keep_blank_values=True))
    for k, v in parse_qsl(b.query, keep_blank_values=True):
        if old.get(k) != v and len(v) <= MAX_NAME:
            goals.append(
                new_goal(
                    {"url": {"query": {k: v}}},
                    f'show the page with {k} = "{v}"',
                    f"显示 {k} 为“{v}”的页面",
                    2,
                )
            )
    return goals


# ------------------------------------------------------------------ goals in words
_ROLE_ZH = {"tab": "标签页", "checkbox": "复选框", "switch": "开关", "radio": "单选项", "textbox": "输入框"}


def new_goal(predicate: dict, en: str, zh: str, rank: int) -> Goal:
    return Goal(predicate=predicate, words={"en": en, "zh": zh}, rank=rank)


def _state_goal(role: str, name: str, state: str, on: bool) -> Goal:
    predicate = {"element": {"role": role, "name": name}, state: on}
    if state == "selected":
        return new_goal(
            predicate,
            *(_selected_words(role, name) if on else (f'deselect "{name}"', f"取消选中“{name}”")),
            0,
        )
    if state == "expanded":
        return new_goal(
            predicate,
            *((f'expand "{name}"', f"展开“{name}”") if on else (f'collapse "{name}"', f"收起“{name}”")),
            0,
        )
    if role == "switch":
        words = (
            (f'turn on "{name}"', f"打开“{name}”开关") if on else (f'turn off "{name}"', f"关闭“{name}”开关")
        )
    elif role == "radio":
        words = (f'choose "{name}"', f"选择“{name}”") if on else (f'clear "{name}"', f"取消选择“{name}”")
    else:
        words = (f'check "{name}"', f"勾选“{name}”") if on else (f'uncheck "{name}"', f"取消勾选“{name}”")
    return new_goal(predicate, *words, 0)


def _selected_words(role: str, name: str) -> tuple[str, str]:
    if role == "tab":
        return f'open the "{name}" tab', f"打开“{name}”标签页"
    return f'select "{name}"', f"选中“{name}”"


def _value_goal(role: str, name: str, value: str) -> Goal:
    element = {"role": role, "name": name} if name else {"role": role}
    where_en = f'the "{name}" field' if name else "the text field"
    where_zh = f"“{name}”输入框" if name else "输入框"
    return new_goal(
        {"element": element, "value": value},
        f'set {where_en} to "{value}"',
        f"将{where_zh}设为“{value}”",
        0,
    )


def shown_goal(role: str, name: str, shown: bool) -> Goal:
    predicate = {"element": {"role": role, "name": name}, "present": shown}
    rank = SHOWN_RANK[role]
    if shown:
        if rank <= 2:
            return new_goal(predicate, f'open "{name}"', f"打开“{name}”", rank)
        return new_goal(predicate, f'show "{name}"', f"显示“{name}”", rank)
    if rank >= 3:
        return new_goal(predicate, f'remove "{name}"', f"删除“{name}”", rank)
    return new_goal(predicate, f'close "{name}"', f"关闭“{name}”", rank)


def instruction(goals: list[Goal], language: str) -> str:
    """The goals as one instruction: 'Open the "Tools" tab and set the "Title" field to "milk"'."""
    clauses = [g.words[language] for g in goals]
    if language == "zh":
        return "，并".join(clauses)
    text = " and ".join(clauses)
    return text[:1].upper() + text[1:]
