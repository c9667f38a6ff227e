"""Reading a model's free-form answer: the JSON objects it holds, prose around them ignored."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

_OPEN = re.compile(r"\{")


def json_objects(raw: str) -> Iterator[Any]:
    """Every JSON value that starts at a "{" of the text, in order (a nested object
    is yielded again on its own; callers take the first that has what they need)."""
    decoder = json.JSONDecoder()
    for m in _OPEN.finditer(raw):
        try:
            obj, _ = decoder.raw_decode(raw, m.start())
        except ValueError:
            continue
        yield obj
