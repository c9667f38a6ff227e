"""A desktop session's accessibility tree, normalised like a web page's or a phone's.

`TreeReader` keeps the session's AT-SPI reader process (crawlers.desktop_atspi)
and asks it for the tree with a bounded wait: a hung accessibility bus is a
`TreeTimeout`, never a hung crawl. `normalise_tree` turns its answer into the
shared node form (crawlers.page_nodes): roles in the web's words (AT-SPI's
"push button" is a `button`, "text" a `textbox`), boxes in screen pixels,
states (focused, checked, selected, expanded, disabled); then the same text, Elements
and visibility record as every other platform (page_render, page_visibility).
Windows are the roots, drawn in order: frames first, dialogs and menus over
them, the active window last.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path

from schemas.records import Element

from .page_nodes import ACTIONABLE_ROLES, Node, absorb, clean_text
from .page_render import render_tree, to_elements
from .page_visibility import measure_nodes

_ROLES = {
    "push button": "button",
    "toggle button": "button",
    "check box": "checkbox",
    "radio button": "radio",
    "menu item": "menuitem",
    "menu": "menuitem",  # a menu bar's entry: it opens its menu when clicked
    "check menu item": "menuitemcheckbox",
    "radio menu item": "menuitemradio",
    "tearoff menu item": "menuitem",
    "menu bar": "menubar",
    "popup menu": "menu",
    "text": "textbox",
    "entry": "textbox",
    "password text": "textbox",
    "terminal": "textbox",
    "combo box": "combobox",
    "spin button": "spinbutton",
    "slider": "slider",
    "scroll bar": "scrollbar",
    "page tab": "tab",
    "page tab list": "tablist",
    "list": "list",
    "list box": "listbox",
    "list item": "option",
    "table": "grid",
    "tree table": "treegrid",
    "tree": "tree",
    "table cell": "cell",
    "table row": "row",
    "table column header": "columnheader",
    "table row header": "rowheader",
    "column header": "columnheader",
    "row header": "rowheader",
    "tree item": "treeitem",
    "frame": "window",
    "window": "window",
    "dialog": "dialog",
    "file chooser": "dialog",
    "alert": "alertdialog",
    "label": "text",
    "static": "text",
    "heading": "heading",
    "link": "link",
    "image": "img",
    "icon": "img",
    "tool bar": "toolbar",
    "status bar": "status",
    "separator": "separator",
    "tool tip": "tooltip",
    "document text": "document",
    "document frame": "document",
    "document web": "document",
    "paragraph": "paragraph",
    "progress bar": "progressbar",
    "filler": "generic",
    "panel": "generic",
    "scroll pane": "generic",
    "viewport": "generic",
    "split pane": "generic",
    "layered pane": "generic",
    "root pane": "generic",
    "glass pane": "generic",
    "internal frame": "generic",
    "section": "generic",
    "form": "form",
}
_WINDOW_ROLES = frozenset({"window", "dialog", "alertdialog", "menu", "tooltip"})
_READ_TIMEOUT_S = 5.0
_CONTAINERS = frozenset({"textbox", "combobox", "listbox", "spinbutton"})


class TreeTimeout(RuntimeError):
    """The accessibility bus did not answer in time (a hung app or bus)."""


class TreeReader:
    """The session's AT-SPI reader process; `read()` answers its tree or raises."""

    def __init__(self, environ: dict[str, str], *, timeout_s: float = _READ_TIMEOUT_S):
        self.environ = dict(environ)
        root = str(Path(__file__).resolve().parent.parent)
        self.environ["PYTHONPATH"] = root + os.pathsep + self.environ.get("PYTHONPATH", "")
        self.timeout_s = timeout_s
        self.proc: subprocess.Popen | None = None

    def _start(self) -> subprocess.Popen:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "crawlers.desktop_atspi"],
            env=self.environ,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        return self.proc

    def read(self) -> dict:
        if self.proc is not None and self.proc.poll() is not None:
            self.close()  # it exited (an episode's end kills the session's processes): its pipes too
        proc = self.proc if self.proc is not None else self._start()
        proc.stdin.write(b'{"op": "tree"}\n')
        proc.stdin.flush()
        fd = proc.stdout.fileno()
        deadline = time.monotonic() + self.timeout_s
        buf = b""
        while not buf.endswith(b"\n"):
            left = deadline - time.monotonic()
            ready = select.select([fd], [], [], max(0.0, left))[0] if left > 0 else []
            if not ready:
                self.close()  # its answer would come late, to the next question
                raise TreeTimeout(f"the accessibility bus did not answer within {self.timeout_s:g} s")
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                self.close()
                raise TreeTimeout("the accessibility reader exited")
            buf += chunk
        out = json.loads(buf)
        if "error" in out:
            raise TreeTimeout(f"the accessibility tree could not be read: {out['error']}")
        return out

    def close(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None:
            proc.kill()
            proc.wait()
            for f in (proc.stdin, proc.stdout):
                try:
                    f.close()
                except OSError:
                    pass


def _convert(raw: dict) -> Node | list[Node]:
    role = _ROLES.get(raw["role"], raw["role"].replace(" ", ""))
    states = raw.get("states") or []
    box = raw.get("box")
    if box is not None and (box[2] <= 0 or box[3] <= 0 or box[0] < -10_000):
        box = None  # AT-SPI's -1 extents: no component
    flags = [s for s in ("focused", "checked", "selected", "expanded") if s in states]
    if "enabled" not in states or "sensitive" not in states:
        flags.append("disabled")
    value = raw.get("value")
    node = Node(
        role=role,
        name=clean_text(raw.get("name")),
        box=tuple(box) if box is not None else None,
        states=flags,
        value=clean_text(value) if value else None,
    )
    for c in raw.get("children") or []:
        got = _convert(c)
        node.children.extend(got if isinstance(got, list) else [got])
    # A toolkit's page tab holds its whole page (GTK's notebook): never read as one label.
    if role in ACTIONABLE_ROLES and role not in _CONTAINERS and raw["role"] != "page tab":
        absorb(node)
    if node.box is None and role not in _WINDOW_ROLES and not node.name:
        return node.children  # a boxless wrapper (a page tab's holder): its children stay
    return node


def windows(answer: dict, stacking: list[str] | None = None) -> list[tuple[str, Node, bool]]:
    """(app name, window node, active) of every app's showing windows, in drawing order:
    the X server's stacking of their titles (`stacking`, bottom to top) when known;
    windows it does not list (menus, tooltips: no title of their own) on top."""
    out = []
    for app in answer.get("apps", []):
        for w in app.get("children") or []:
            got = _convert(w)
            for node in got if isinstance(got, list) else [got]:
                out.append((app.get("name") or "", node, "active" in (w.get("states") or [])))
    order = {title: i for i, title in enumerate(stacking or [])}
    rank = {"window": 0}
    out.sort(key=lambda t: (order.get(t[1].name, len(order)), t[2], rank.get(t[1].role, 1)))
    return out


def normalise_tree(
    answer: dict, width: int, height: int, stacking: list[str] | None = None
) -> tuple[str, list[Element], list[Node]]:
    """(tree text, elements, window nodes) of the reader's answer on a width x height screen."""
    roots = [node for _, node, _ in windows(answer, stacking)]
    measure_nodes(roots, width, height)
    return render_tree(roots), to_elements(roots, width, height), roots
