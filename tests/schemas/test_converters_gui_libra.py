"""GUI-Libra converter: round trips, the README's examples, robust parsing, errors.

Strings copied from /work/shared/samples are cited per test (see test_converters.py).
"""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from schemas.actions import Action
from schemas.converters import SWIPE_SPAN, from_gui_libra, swipe_direction, to_gui_libra
from schemas.converters.common import seconds_text
from schemas.converters.gui_libra import NO_POINT, TO_NAME
from tests.schemas.converter_helpers import (
    SCREEN,
    T,
    assert_same,
    directions,
    ms,
    raises_field,
    sizes,
    texts,
    unit,
)

# --- GUI-Libra ---------------------------------------------------------------------

LIBRA_TYPES = tuple(TO_NAME)
not_none = texts.filter(lambda s: s != "None")


@st.composite
def libra_actions(draw) -> Action:
    """Canonical actions restricted to what GUI-Libra keeps."""
    t = draw(st.sampled_from(LIBRA_TYPES))
    kw: dict = {"type": t, "description": draw(st.none() | not_none)}
    if t in (T.TAP, T.RIGHT_CLICK, T.LONG_PRESS, T.SELECT, T.SWIPE) or (
        t in (T.SCROLL, T.TYPE) and draw(st.booleans())
    ):
        kw["x"], kw["y"] = draw(unit), draw(unit)
    if t == T.SWIPE:
        kw["x2"], kw["y2"] = draw(unit), draw(unit)
        assume((kw["x2"], kw["y2"]) != (kw["x"], kw["y"]))
    if t == T.SCROLL:
        kw["direction"] = draw(directions)
    if t in (T.TYPE, T.SELECT, T.KEY, T.OPEN_APP, T.ANSWER):
        kw["text"] = draw(texts)
    if t == T.DONE:
        kw["text"] = draw(st.none() | not_none)
    if t == T.WAIT:
        kw["duration_ms"] = draw(st.none() | ms)
    return Action(**kw)


@given(a=libra_actions(), w=sizes, h=sizes, thought=st.none() | texts.filter(lambda s: "</think>" not in s))
def test_gui_libra_canonical_round_trip_pixels(a, w, h, thought):
    back, got_thought = from_gui_libra(to_gui_libra(a, w, h, thought), w, h)
    assert got_thought == thought
    _check_libra(a, back, 1 / w, 1 / h)


@given(a=libra_actions(), w=sizes, h=sizes)
def test_gui_libra_canonical_round_trip_grid1000(a, w, h):
    text = to_gui_libra(a, w, h, "t", coords="grid1000", think_tag="thinking")
    back, thought = from_gui_libra(text, w, h, coords="grid1000")
    assert thought == "t"
    _check_libra(a, back, 1 / 1000, 1 / 1000)


def _check_libra(a: Action, back: Action, tx: float, ty: float):
    if a.type == T.SWIPE:  # start and direction survive; the end is re-synthesised
        assert back.direction == swipe_direction(a)
        assert abs(back.x - a.x) <= tx + 1e-12 and abs(back.y - a.y) <= ty + 1e-12
        # The synthetic end agrees with the direction, unless the start is on that edge.
        if (back.x2, back.y2) != (back.x, back.y):
            assert swipe_direction(back.model_copy(update={"direction": None})) == back.direction
    else:
        assert_same(a, back, tx, ty)


LIBRA_NAMES = [
    "Click",
    "RightClick",
    "LongPress",
    "Swipe",
    "Scroll",
    "Write",
    "Select",
    "KeyboardPress",
    "OpenAPP",
    "NavigateBack",
    "NavigateHome",
    "Wait",
    "Answer",
    "Terminate",
]


@st.composite
def libra_objects(draw, w: int, h: int, max_v: int | None = None):
    """GUI-Libra answer objects in the writer's spelling (pixels, or a 0..max_v grid)."""
    name = draw(st.sampled_from(LIBRA_NAMES))
    xs = st.integers(0, max_v if max_v is not None else w - 1)
    ys = st.integers(0, max_v if max_v is not None else h - 1)
    point = [draw(xs), draw(ys)]
    value, p = "None", NO_POINT
    if name in ("Click", "RightClick", "LongPress", "Select", "Swipe"):
        p = point
    if name in ("Scroll", "Write") and draw(st.booleans()):
        p = point
    if name in ("Scroll", "Swipe"):
        value = draw(directions)
    if name in ("Write", "Select", "KeyboardPress", "OpenAPP", "Answer"):
        value = draw(texts)
    if name == "Terminate":
        value = draw(not_none | st.just("None"))
    if name == "Wait":
        value = draw(st.just("None") | ms.map(seconds_text))
    return {
        "action_description": draw(not_none | st.just("None")),
        "action_type": name,
        "value": value,
        "point_2d": p,
    }


def _libra_obj(text: str) -> dict:
    # The first tag opens the answer and the last closes it: a description may
    # itself contain "<answer>" (hypothesis found one).
    return json.loads(text.split("<answer>", 1)[1].rsplit("</answer>", 1)[0])


@given(data=st.data(), w=sizes, h=sizes)
def test_gui_libra_format_round_trip_is_exact(data, w, h):
    for coords, max_v in (("pixels", None), ("grid1000", 1000)):
        obj = data.draw(libra_objects(w, h, max_v))
        text = "<think>x</think>\n<answer>\n" + json.dumps(obj, ensure_ascii=False) + "\n</answer>"
        action, _ = from_gui_libra(text, w, h, coords=coords)
        assert _libra_obj(to_gui_libra(action, w, h, "x", coords=coords)) == obj


@pytest.mark.parametrize("t", [T.DOUBLE_TAP, T.TAKE_OVER])
def test_gui_libra_cannot_express(t):
    a = Action(type=t, x=0.5, y=0.5)
    err = raises_field("type", to_gui_libra, a, *SCREEN)
    assert t.value in str(err) and "GUI-Libra" in str(err)


def test_gui_libra_readme_example():
    # gui_libra/PROVENANCE.md: README "Data Format" output, with numbers for [x, y].
    text = (
        "<think>\nReasoning about the current UI state, reflecting on progress,\n"
        "and planning the next action...\n</think>\n<answer>\n{\n"
        '  "action_description": "brief description of the action",\n'
        '  "action_type": "Click",\n  "value": "None",\n  "point_2d": [540, 1200]\n}\n</answer>'
    )
    a, thought = from_gui_libra(text, *SCREEN)
    assert a == Action.tap(0.5, 0.5, description="brief description of the action")
    assert thought.startswith("\nReasoning about")
    # Qwen3 checkpoints: <thinking> and the 0-1000 grid; grid 500 of 1080 px is 540 px.
    q3 = text.replace("think>", "thinking>")
    a3, thought3 = from_gui_libra(q3.replace("[540, 1200]", "[500, 500]"), *SCREEN, coords="grid1000")
    assert thought3 == thought and a3.point_px(*SCREEN) == (540, 1200)


def test_gui_libra_writer_output_is_the_documented_shape():
    a = Action.tap(0.5, 0.5, description="Tap 搜索")
    assert to_gui_libra(a, *SCREEN, "想一想") == (
        '<think>想一想</think>\n<answer>\n{"action_description": "Tap 搜索", "action_type": '
        '"Click", "value": "None", "point_2d": [540, 1200]}\n</answer>'
    )
    o = _libra_obj(to_gui_libra(Action(type="back"), *SCREEN))
    assert o == {
        "action_description": "None",
        "action_type": "NavigateBack",
        "value": "None",
        "point_2d": [-100, -100],
    }
    o = _libra_obj(to_gui_libra(Action(type="wait", duration_ms=1500), *SCREEN))
    assert o["value"] == "1.5"
    assert to_gui_libra(a, *SCREEN).startswith("<answer>")  # no thought, no think block


@pytest.mark.parametrize(
    "answer,expected",
    [
        # single quotes and None: a Python literal
        (
            "<answer>{'action_description': 'go', 'action_type': 'Click', 'value': None, "
            "'point_2d': [108, 240]}</answer>",
            Action.tap(0.1, 0.1, description="go"),
        ),
        # trailing text after the JSON, and no closing tag
        (
            '<answer> {"action_type": "Scroll", "value": "down", "point_2d": [-100, -100]} '
            "I will scroll now.",
            Action.scroll("down"),
        ),
        # no tags at all, in a code fence
        (
            '```json\n{"action_type": "Write", "value": "北京", "point_2d": null}\n```',
            Action.type_text("北京"),
        ),
        # aliases and case, value "None" meaning absent for optional values
        (
            '<answer>{"action_type": "openapp", "value": "微信", "point_2d": "None"}</answer>',
            Action(type="open_app", text="微信"),
        ),
        ('<answer>{"action_type": "Terminate", "value": "None"}</answer>', Action(type="done")),
        (
            '<answer>{"action_type": "Complete", "value": "success"}</answer>',
            Action(type="done", text="success"),
        ),
        ('<answer>{"action_type": "Wait", "value": 2}</answer>', Action(type="wait", duration_ms=2000)),
        ('<answer>{"action_type": "Write", "value": "None"}</answer>', Action.type_text("None")),
        ('<answer>{"action_type": "keyboard_press", "value": "enter"}</answer>', Action.key("enter")),
        (
            '<answer>{"action_type": "Select", "value": "Red", "point_2d": [1080, 2400]}</answer>',
            Action(type="select", x=1.0, y=1.0, text="Red"),
        ),
        # a thought that itself mentions the answer format
        (
            '<think>I should output <answer>{"x": 1}</answer></think><answer>{"action_type": '
            '"NavigateHome", "value": "None", "point_2d": [-100, -100]}</answer>',
            Action(type="home"),
        ),
    ],
)
def test_gui_libra_robust_parsing(answer, expected):
    assert from_gui_libra(answer, *SCREEN)[0] == expected


def test_gui_libra_swipe_keeps_start_and_direction():
    text = '<answer>{"action_type": "Swipe", "value": "up", "point_2d": [540, 1800]}</answer>'
    a, _ = from_gui_libra(text, *SCREEN)
    assert (a.type, a.direction, a.x, a.y) == (T.SWIPE, "up", 0.5, 0.75)
    assert math.isclose(a.y - a.y2, SWIPE_SPAN) and a.x2 == 0.5
    centre, _ = from_gui_libra('<answer>{"action_type": "Swipe", "value": "left"}</answer>', *SCREEN)
    assert (centre.x, centre.y, centre.direction) == (0.5, 0.5, "left")


@pytest.mark.parametrize(
    "answer,field",
    [
        ("I cannot do that.", "answer"),
        ("<answer>[1, 2]</answer>", "answer"),
        ("<answer>{'broken': </answer>", "answer"),
        ('<answer>{"value": "x"}</answer>', "action_type"),
        ('<answer>{"action_type": "Fly"}</answer>', "action_type"),
        ('<answer>{"action_type": 3}</answer>', "action_type"),
        ('<answer>{"action_type": "Click", "point_2d": [-100, -100]}</answer>', "point_2d"),
        ('<answer>{"action_type": "Click"}</answer>', "point_2d"),
        ('<answer>{"action_type": "Click", "point_2d": [1, 2, 3]}</answer>', "point_2d"),
        ('<answer>{"action_type": "Click", "point_2d": "here"}</answer>', "point_2d"),
        ('<answer>{"action_type": "Click", "point_2d": [2000, 10]}</answer>', "point_2d"),
        ('<answer>{"action_type": "Click", "point_2d": [true, 10]}</answer>', "point_2d"),
        ('<answer>{"action_type": "Scroll", "value": "sideways"}</answer>', "value"),
        ('<answer>{"action_type": "Scroll", "value": "up or down"}</answer>', "value"),
        ('<answer>{"action_type": "Wait", "value": "soon"}</answer>', "value"),
        ('<answer>{"action_type": "Write", "value": null}</answer>', "value"),
        ('<answer>{"action_type": "Answer", "value": ["a"]}</answer>', "value"),
    ],
)
def test_gui_libra_malformed_input_names_the_field(answer, field):
    raises_field(field, from_gui_libra, answer, *SCREEN)


def test_gui_libra_grid_out_of_range():
    text = '<answer>{"action_type": "Click", "point_2d": [1001, 5]}</answer>'
    raises_field("point_2d", from_gui_libra, text, *SCREEN, coords="grid1000")
    # grid999 (Open-AutoGLM's frame, the open-autoglm model profile) stops at 999.
    raises_field("point_2d", from_gui_libra, text, *SCREEN, coords="grid999")
    with pytest.raises(ValueError, match="coords"):
        from_gui_libra(text, *SCREEN, coords="grid5")
