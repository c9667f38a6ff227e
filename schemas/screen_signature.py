"""The signature of a screen: a short hash of its accessibility tree, blind to what moves.

Filters key near-duplicates with it (filters/neardup.py) and the live episode
runners (sandbox/reflection.py, sandbox/restore.py) compare a reached screen
with a recorded one by it, so it sits below both.
"""

from __future__ import annotations

import hashlib
import re

# Lines of an accessibility tree that change while the state does not: live
# regions (toasts, alerts) and the numbers in them; boxes move on every scroll.
_LIVE_ROLES = re.compile(r"^\s*-\s*(status|alert|log|timer|marquee)\b")
_BOX_OR_REF = re.compile(r"\s*\[(box|ref|cursor)=[^\]]*\]")
_DIGITS = re.compile(r"\d+")


def screen_signature(a11y_tree: str) -> str:
    """A short hash of an accessibility tree, stable across scrolls, toasts and clocks.

    Works on the Step text form (`- role "name" [box=...]`) and on Playwright
    aria snapshots: boxes and refs are dropped, live-region subtrees (status,
    alert, ...) are dropped, digit runs become "#". Two screens with the same
    signature show the same elements; pass it (with the action signature) as
    the key of `nearest_earlier`.
    """
    out, skip_indent = [], None
    for line in a11y_tree.splitlines():
        indent = len(line) - len(line.lstrip())
        if skip_indent is not None and indent > skip_indent:
            continue  # inside a live region
        skip_indent = None
        if _LIVE_ROLES.match(line):
            skip_indent = indent
            continue
        out.append(_DIGITS.sub("#", _BOX_OR_REF.sub("", line)).rstrip())
    return hashlib.sha1("\n".join(out).encode("utf-8")).hexdigest()[:16]
