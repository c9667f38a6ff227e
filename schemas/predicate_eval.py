"""Evaluate a `predicates` verifier on an end state: state in, verdict out (no browser).

The state is what an observation records (its URL and accessibility-tree text, in
the grammar every platform renders: schemas.a11y) plus the values of the probes
the predicates name. So a live episode (crawlers.env_runtime) and a recorded step
(its `url` and `a11y_tree`) are judged by the same code.

Matching: roles exactly; `name` and `value` equal once spaces are collapsed;
`name_contains`, `value_contains` and a probe's text `contains` ignore case.
States as the tree writes them: `[checked]` (`[checked=mixed]`), `[selected]`,
`[expanded]`; absent means false. An element's value is its inline text
(`textbox "Title": milk`), or for a combobox / listbox its selected option's name.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from .a11y import AriaNode, parse_snapshot
from .predicates import Predicate, UrlCheck

_MAX_SHOWN = 80


@dataclass
class EndState:
    """What the predicates are checked against."""

    url: str = ""
    a11y_tree: str = ""
    probes: dict[str, Any] = field(default_factory=dict)
    _nodes: list[AriaNode] | None = field(default=None, repr=False)
    _names: dict[str, tuple[set[str], list[str]]] | None = field(default=None, repr=False)

    @property
    def nodes(self) -> list[AriaNode]:
        if self._nodes is None:
            self._nodes = parse_snapshot(self.a11y_tree or "")
        return self._nodes

    def shows(self, role: str, name: str | None = None, name_contains: str | None = None) -> bool:
        """Whether an element of `role` (named `name`, or with `name_contains` in its
        name) is here: what an element predicate with nothing else asked checks, by a
        look-up rather than a scan (a walk's screens are compared many times over)."""
        if self._names is None:
            self._names = {}
            for node in self.nodes:
                normed, raw = self._names.setdefault(node.role, (set(), []))
                normed.add(_norm(node.name))
                raw.append((node.name or "").casefold())
        normed, raw = self._names.get(role, (set(), []))
        if name is not None:
            return _norm(name) in normed
        if name_contains is not None:
            want = name_contains.casefold()
            return any(want in n for n in raw)
        return bool(raw)


@dataclass
class PredicateResult:
    holds: bool
    what: str  # the predicate in words
    why: str  # what was observed


def _norm(s: str | None) -> str:
    return " ".join((s or "").split())


def _shown(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 3] + "..."


def describe(p: Predicate) -> str:
    """A predicate in words, as reasons (and instructions written from them) read it."""
    if p.element is not None:
        ref = p.element
        who = ref.role
        if ref.name is not None:
            who += f" {ref.name!r}"
        elif ref.name_contains is not None:
            who += f" named like {ref.name_contains!r}"
        if not p.present:
            return f"no {who}"
        parts = [
            f"{s}={getattr(p, s)}" for s in ("checked", "selected", "expanded") if getattr(p, s) is not None
        ]
        if p.value is not None:
            parts.append(f"value {p.value!r}")
        if p.value_contains is not None:
            parts.append(f"value containing {p.value_contains!r}")
        return who + (" " + ", ".join(parts) if parts else " present")
    if p.url is not None:
        u = p.url
        parts = [f"path {u.path!r}"] if u.path is not None else []
        if u.path_contains is not None:
            parts.append(f"path containing {u.path_contains!r}")
        parts += [f"{k}={v}" if v is not None else f"query key {k}" for k, v in u.query.items()]
        return "url " + ", ".join(parts)
    op, want = p.comparison()
    return f"probe {p.probe} {op.replace('_', ' ')} {_shown(want)}"


# ------------------------------------------------------------------ elements
def _name_matches(node: AriaNode, p: Predicate) -> bool:
    ref = p.element
    if node.role != ref.role:
        return False
    if ref.name is not None:
        return _norm(node.name) == _norm(ref.name)
    if ref.name_contains is not None:
        return ref.name_contains.casefold() in (node.name or "").casefold()
    return True


def node_value(nodes: list[AriaNode], i: int) -> str | None:
    """The value of nodes[i]: its inline text, else a `text:` child's, else (a
    combobox, a listbox) the name of its selected option."""
    node = nodes[i]
    if node.text is not None:
        return node.text
    for n in nodes[i + 1 :]:
        if n.depth <= node.depth:
            break
        if n.depth == node.depth + 1 and n.role == "text" and n.text is not None:
            return n.text
        if node.role in ("combobox", "listbox") and n.role == "option" and "selected" in n.attrs:
            return n.name
    return None


def _checked(node: AriaNode) -> bool | str:
    v = node.attrs.get("checked")
    if v is None or v == "false":
        return False
    return "mixed" if v == "mixed" else True


def _state_misses(nodes: list[AriaNode], i: int, p: Predicate) -> str | None:
    """Why nodes[i] fails p's state and value checks; None when it passes."""
    node = nodes[i]
    if p.checked is not None and _checked(node) != p.checked:
        return f"checked={_checked(node)}"
    for state in ("selected", "expanded"):
        want = getattr(p, state)
        if want is not None and (state in node.attrs) != want:
            return f"{state}={state in node.attrs}"
    if p.value is not None or p.value_contains is not None:
        value = node_value(nodes, i)
        if p.value is not None and _norm(value) != _norm(p.value):
            return f"value {_shown(value)}"
        if p.value_contains is not None and p.value_contains.casefold() not in (value or "").casefold():
            return f"value {_shown(value)}"
    return None


def _check_element(state: EndState, p: Predicate) -> tuple[bool, str]:
    nodes = state.nodes
    found = [i for i, n in enumerate(nodes) if _name_matches(n, p)]
    if not p.present:
        if found:
            return False, f"{len(found)} found"
        return True, "none found"
    if not found:
        return False, "not found"
    misses = []
    for i in found:
        miss = _state_misses(nodes, i, p)
        if miss is None:
            return True, "found"
        misses.append(miss)
    shown = "; ".join(misses[:3]) + ("; ..." if len(misses) > 3 else "")
    return False, f"found {len(found)}, none matching: {shown}"


# ------------------------------------------------------------------ url
def _check_url(url: str, u: UrlCheck) -> tuple[bool, str]:
    parts = urlsplit(url or "")
    path = unquote(parts.path)
    if u.path is not None and (path.rstrip("/") or "/") != (u.path.rstrip("/") or "/"):
        return False, f"path is {path!r}"
    if u.path_contains is not None and u.path_contains not in path:
        return False, f"path is {path!r}"
    query: dict[str, list[str]] = {}
    for k, v in parse_qsl(parts.query, keep_blank_values=True):
        query.setdefault(k, []).append(v)
    for key, want in u.query.items():
        if key not in query:
            return False, f"no query key {key!r} in {_shown(parts.query)}"
        if want is not None and want not in query[key]:
            return False, f"{key}={'|'.join(query[key])}"
    return True, "matches"


# ------------------------------------------------------------------ probes
def pick(value: Any, path: str | None) -> Any:
    """Walk into a JSON value: "rows.0.title"; "length" of a list, text or object
    (where it is not a key); "*" maps the rest over a list ("*.title": every title).
    A step that does not exist gives None."""
    if not path:
        return value
    steps = path.split(".")
    for n, step in enumerate(steps):
        if step == "*" and isinstance(value, list):
            rest = ".".join(steps[n + 1 :])
            return [pick(item, rest) for item in value]
        if isinstance(value, dict) and step in value:
            value = value[step]
        elif isinstance(value, list) and step.lstrip("-").isdigit() and -len(value) <= int(step) < len(value):
            value = value[int(step)]
        elif step == "length" and isinstance(value, list | str | dict):
            value = len(value)
        else:
            return None
    return value


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, int | float):
        return float(v)
    if isinstance(v, list | dict):
        return float(len(v))
    try:
        out = float(str(v).strip())
    except ValueError:
        return None
    return out if math.isfinite(out) else None


def _same(v: Any, want: Any) -> bool:
    if v == want and type(v) is type(want):
        return True
    if isinstance(want, bool) or isinstance(v, bool):
        return v == want and isinstance(v, bool) and isinstance(want, bool)
    if want is None or v is None:
        return False
    if isinstance(want, int | float) or isinstance(v, int | float):
        a, b = _number(v), _number(want)
        return a is not None and b is not None and not isinstance(v, list | dict) and a == b
    if isinstance(v, str) and isinstance(want, str):
        return v.strip() == want.strip()
    return v == want


def _contains(v: Any, want: Any) -> bool:
    if isinstance(v, str):
        return str(want).casefold() in v.casefold()
    if isinstance(v, list):
        return any(_same(item, want) for item in v)
    if isinstance(v, dict):
        return str(want) in v
    return False


def compare(op: str, value: Any, want: Any) -> bool:
    """A probe's value against the predicate's operand."""
    if op == "equals":
        return _same(value, want)
    if op == "not_equals":
        return not _same(value, want)
    if op == "contains":
        return _contains(value, want)
    n = _number(value)
    if n is None:
        return False
    return n > want if op == "greater_than" else n < want


def _check_probe(state: EndState, p: Predicate) -> tuple[bool, str]:
    if p.probe not in state.probes:
        return False, "not read"
    value = state.probes[p.probe]
    op, want = p.comparison()
    return compare(op, value, want), f"value {_shown(value)}"


# ------------------------------------------------------------------ all
def check(p: Predicate, state: EndState) -> PredicateResult:
    if p.element is not None:
        holds, why = _check_element(state, p)
    elif p.url is not None:
        holds, why = _check_url(state.url, p.url)
    else:
        holds, why = _check_probe(state, p)
    return PredicateResult(holds=holds, what=describe(p), why=why)


def check_all(predicates: list[Predicate], state: EndState) -> list[PredicateResult]:
    return [check(p, state) for p in predicates]


def verdict(predicates: list[Predicate], state: EndState) -> dict:
    """{done, success, reward, reason}: done and successful when every predicate holds;
    else the reason names the first that fails (its index, its words, what was seen)."""
    results = check_all(predicates, state)
    failed = [(i, r) for i, r in enumerate(results) if not r.holds]
    if not failed:
        n = len(results)
        return {"done": True, "success": True, "reward": 1.0, "reason": f"all {n} predicates hold"}
    i, r = failed[0]
    more = f" (and {len(failed) - 1} more of {len(results)} fail)" if len(failed) > 1 else ""
    return {
        "done": False,
        "success": False,
        "reward": 0.0,
        "reason": f"predicate {i} ({r.what}) fails: {r.why}{more}",
    }
