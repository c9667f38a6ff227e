"""The AT-SPI reader of one desktop session, run as a process of its own in that session.

libatspi keeps one connection per process (to the accessibility bus of the
session whose D-Bus it first asked), so each session has its own reader:
`python -m crawlers.desktop_atspi`, started with the session's environment,
answers one JSON request per line on stdin with one JSON line on stdout. A
hung bus then costs a bounded wait in the caller (crawlers.desktop_tree), never
a hung crawl.

Requests: {"op": "tree"} -> {"apps": [node, ...]}; a node is
{"role", "name", "states", "box": [x, y, w, h] (screen px), "value", "children"}
with AT-SPI's own role names ("push button"); only what is showing is read.
{"op": "ping"} -> {"ok": true}.
"""

from __future__ import annotations

import json
import os
import sys

_MAX_CHILDREN = 400  # a spreadsheet's table has millions of cells: read what fits
_MAX_DEPTH = 40
_MAX_VALUE = 500
_STATES = (
    "showing",
    "visible",
    "focused",
    "enabled",
    "sensitive",
    "checked",
    "selected",
    "expanded",
    "editable",
    "active",
)
_TEXT_ROLES = frozenset(
    {"text", "entry", "password text", "terminal", "paragraph", "document text", "spin button"}
)


def _node(acc, Atspi, depth: int, counter: list[int]) -> dict | None:
    counter[0] += 1
    try:
        states = acc.get_state_set()
        names = [s for s in _STATES if states.contains(getattr(Atspi.StateType, s.upper()))]
        if depth >= 1 and "showing" not in names and (depth > 1 or "visible" not in names):
            return None  # a closed menu, a hidden page or window: not on the screen
        role = acc.get_role_name() or "unknown"
        name = acc.get_name() or ""
        box = None
        try:
            ext = acc.get_extents(Atspi.CoordType.SCREEN)
            box = [ext.x, ext.y, ext.width, ext.height]
        except Exception:  # noqa: BLE001 - no Component interface (the application node)
            pass
        value = None
        if role in _TEXT_ROLES:
            try:
                count = Atspi.Text.get_character_count(acc)
                value = Atspi.Text.get_text(acc, 0, min(count, _MAX_VALUE))
            except Exception:  # noqa: BLE001
                value = None
        children = []
        if depth < _MAX_DEPTH:
            count = min(acc.get_child_count(), _MAX_CHILDREN)
            for i in range(count):
                child = acc.get_child_at_index(i)
                if child is None:
                    continue
                got = _node(child, Atspi, depth + 1, counter)
                if got is not None:
                    children.append(got)
        return {"role": role, "name": name, "states": names, "box": box, "value": value, "children": children}
    except Exception:  # noqa: BLE001 - the node went away while it was read (a closed dialog)
        if depth == 0:
            raise
        return None


def read_tree(Atspi) -> dict:
    desktop = Atspi.get_desktop(0)
    apps = []
    counter = [0]
    for i in range(desktop.get_child_count()):
        app = desktop.get_child_at_index(i)
        if app is None:
            continue
        try:
            if app.get_process_id() == os.getpid():
                continue
        except Exception:  # noqa: BLE001 - the app quit
            continue
        node = _node(app, Atspi, 0, counter)
        if node is not None:
            apps.append(node)
    return {"apps": apps, "nodes": counter[0]}


def main() -> None:
    import gi

    gi.require_version("Atspi", "2.0")
    from gi.repository import Atspi

    Atspi.init()
    Atspi.set_timeout(2000, 5000)  # a D-Bus call to a hung app: fail, do not wait
    for line in sys.stdin:
        try:
            req = json.loads(line)
            if req.get("op") == "tree":
                out = read_tree(Atspi)
            elif req.get("op") == "ping":
                out = {"ok": True}
            else:
                out = {"error": f"unknown op {req.get('op')!r}"}
        except Exception as e:  # noqa: BLE001 - say it to the caller
            out = {"error": f"{type(e).__name__}: {e}"}
        sys.stdout.write(json.dumps(out, ensure_ascii=False) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
