"""Strategies and assertions shared by the converter tests (test_converters*.py)."""

from __future__ import annotations

import pytest
from hypothesis import strategies as st

from schemas.actions import Action, ActionType
from schemas.errors import SchemaError

T = ActionType
unit = st.floats(0.0, 1.0, allow_nan=False)
sizes = st.integers(1, 4000)
directions = st.sampled_from(["up", "down", "left", "right"])
ms = st.integers(0, 10**7)
TRICKY = [
    'He said "hi"',
    "it's",
    "back\\slash",
    "line1\nline2",
    '\\"',
    "价格 ¥59「好」",
    "",
    " padded ",
    '{"json": 1}',
    "'single'",
    "\ttab\r\n",
    '")',
    'finish(message="x")',
    "\\n not a newline",
    "emoji 👍🏽",
    "\x00nul",
    "\u2028sep",
]
texts = st.sampled_from(TRICKY) | st.text(max_size=30)
# Raw Open-AutoGLM strings cannot hold the response tags themselves.
raw_texts = texts.filter(lambda s: not any(t in s for t in ("<think>", "<answer>", "</answer>")))
SCREEN = (1080, 2400)  # the Open-AutoGLM sample screenshot (sample_messages_en_screenshot.png)


def assert_same(a: Action, b: Action, tol_x: float, tol_y: float, *, fields=None):
    """Equal types and texts, points within tolerance."""
    assert a.type == b.type
    for f in fields or ("text", "direction", "duration_ms", "description"):
        assert getattr(a, f) == getattr(b, f), f
    for f, tol in (("x", tol_x), ("y", tol_y), ("x2", tol_x), ("y2", tol_y)):
        va, vb = getattr(a, f), getattr(b, f)
        assert (va is None) == (vb is None), f
        if va is not None:
            assert abs(va - vb) <= tol + 1e-12, (f, va, vb)


def raises_field(expected: str, fn, /, *args, **kw) -> SchemaError:
    """fn(*args, **kw) raises a SchemaError that names the field `expected`."""
    with pytest.raises(SchemaError) as info:
        fn(*args, **kw)
    assert info.value.field == expected, str(info.value)
    assert f"field '{expected}'" in str(info.value)
    return info.value
