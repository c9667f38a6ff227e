"""Qwen2.5-VL converter: round trips, the samples, tool-call wrappers, lossy spots, errors.

Strings copied from /work/shared/samples are cited per test (see test_converters.py).
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from schemas.actions import Action
from schemas.converters import from_qwen25vl, qwen25vl_tool_call, to_qwen25vl
from schemas.converters.common import seconds_number
from tests.schemas.converter_helpers import SCREEN, T, assert_same, ms, raises_field, sizes, texts, unit

# --- Qwen2.5-VL ------------------------------------------------------------------------

QWEN_TYPES = (
    T.TAP,
    T.LONG_PRESS,
    T.SWIPE,
    T.TYPE,
    T.KEY,
    T.BACK,
    T.HOME,
    T.OPEN_APP,
    T.WAIT,
    T.ANSWER,
    T.DONE,
)


@st.composite
def qwen_actions(draw) -> Action:
    t = draw(st.sampled_from(QWEN_TYPES))
    kw: dict = {"type": t}
    if t in (T.TAP, T.LONG_PRESS, T.SWIPE):
        kw["x"], kw["y"] = draw(unit), draw(unit)
    if t == T.SWIPE:
        kw["x2"], kw["y2"] = draw(unit), draw(unit)
    if t in (T.TYPE, T.KEY, T.OPEN_APP, T.ANSWER):
        kw["text"] = draw(texts)
    if t == T.DONE:
        kw["text"] = draw(st.sampled_from(["success", "failure"]))
    if t in (T.LONG_PRESS, T.WAIT):
        kw["duration_ms"] = draw(st.none() | ms)
    return Action(**kw)


@given(a=qwen_actions(), w=sizes, h=sizes)
def test_qwen_canonical_round_trip(a, w, h):
    args = to_qwen25vl(a, w, h)
    assert_same(a, from_qwen25vl(args, w, h), 1 / w, 1 / h)
    # and through the model's tool-call text
    assert_same(a, from_qwen25vl(qwen25vl_tool_call(args), w, h), 1 / w, 1 / h)


@st.composite
def qwen_args(draw, w: int, h: int) -> dict:
    pt = st.tuples(st.integers(0, w - 1), st.integers(0, h - 1)).map(list)
    secs = ms.map(seconds_number)
    keys = texts.filter(lambda s: s not in ("Enter", "Menu"))
    return draw(
        st.one_of(
            st.builds(lambda p: {"action": "click", "coordinate": p}, pt),
            st.builds(lambda p: {"action": "long_press", "coordinate": p}, pt),
            st.builds(lambda p, s: {"action": "long_press", "coordinate": p, "time": s}, pt, secs),
            st.builds(lambda a, b: {"action": "swipe", "coordinate": a, "coordinate2": b}, pt, pt),
            texts.map(lambda s: {"action": "type", "text": s}),
            keys.map(lambda s: {"action": "key", "text": s}),
            st.sampled_from(["Back", "Home", "Enter", "Menu"]).map(
                lambda b: {"action": "system_button", "button": b}
            ),
            texts.map(lambda s: {"action": "open", "text": s}),
            st.just({"action": "wait"}),
            secs.map(lambda s: {"action": "wait", "time": s}),
            texts.map(lambda s: {"action": "answer", "text": s}),
            st.sampled_from(["success", "failure"]).map(lambda s: {"action": "terminate", "status": s}),
        )
    )


@given(data=st.data(), w=sizes, h=sizes)
def test_qwen_format_round_trip_is_exact(data, w, h):
    args = data.draw(qwen_args(w, h))
    assert to_qwen25vl(from_qwen25vl(args, w, h), w, h) == args


@pytest.mark.parametrize(
    "a",
    [
        Action.scroll("up"),
        Action(type="double_tap", x=0.1, y=0.1),
        Action(type="select", x=0.1, y=0.1, text="A"),
        Action(type="take_over"),
        Action.type_text("hi", 0.1, 0.2),
    ],
)
def test_qwen_cannot_express(a):
    err = raises_field("type", to_qwen25vl, a, *SCREEN)
    assert a.type.value in str(err)


UIS1_HEIGHT = 2400  # AndroidControl screenshots are 1080 wide; UI-S1 bboxes reach x=1080


@pytest.mark.parametrize(
    "args,expected",
    [
        # android_control/derived_uis1_android_control_train_example.first2.jsonl, episode 0 and 20
        ({"action": "open", "text": "Zoho Meeting"}, Action(type="open_app", text="Zoho Meeting")),
        ({"action": "wait", "time": 2}, Action(type="wait", duration_ms=2000)),
        ({"action": "terminate", "status": "success"}, Action(type="done", text="success")),
        ({"action": "system_button", "button": "Back"}, Action(type="back")),
        (
            {"action": "swipe", "coordinate": [540.0, 600.0], "coordinate2": [540.0, 1800.0]},
            Action(type="swipe", x=0.5, y=0.25, x2=0.5, y2=0.75),
        ),
        # android_control/derived_uis1_android_control_evaluation_std.first1.jsonl, episode 8193
        ({"action": "type", "text": "Sculpture art"}, Action.type_text("Sculpture art")),
        ({"action": "click", "coordinate": [540, 2273]}, Action.tap(0.5, 2273 / 2400)),
        # other spellings seen in Qwen-style agents
        ({"action": "system_button", "button": "home"}, Action(type="home")),
        ({"action": "system_button", "button": "Enter"}, Action.key("Enter")),
        ({"action": "key", "text": "volume_up"}, Action.key("volume_up")),
        (
            {"action": "long_press", "coordinate": [108, 240], "time": 1.5},
            Action(type="long_press", x=0.1, y=0.1, duration_ms=1500),
        ),
        ({"action": "answer", "text": "¥59"}, Action(type="answer", text="¥59")),
    ],
)
def test_qwen_samples(args, expected):
    assert from_qwen25vl(args, 1080, UIS1_HEIGHT) == expected


def test_qwen_uis1_click_lands_in_its_bbox():
    # derived_uis1_android_control_train_example.first2.jsonl, episode 0 step 2:
    # float pixels beside the element's bbox [360, 327, 695, 466].
    a = from_qwen25vl(
        {"action": "click", "coordinate": [540.0, 389.8351648351648], "bbox": [360, 327, 695, 466]},
        1080,
        UIS1_HEIGHT,
    )
    px, py = a.point_px(1080, UIS1_HEIGHT)
    assert 360 <= px <= 695 and 327 <= py <= 466
    assert to_qwen25vl(a, 1080, UIS1_HEIGHT) == {"action": "click", "coordinate": [540, 390]}


def test_qwen_call_wrappers():
    args = {"action": "click", "coordinate": [546, 1204]}
    call = {"name": "mobile_use", "arguments": args}
    openai = {"name": "mobile_use", "arguments": json.dumps(args)}
    text = qwen25vl_tool_call(args)
    assert text == (
        '<tool_call>\n{"name": "mobile_use", "arguments": {"action": "click", '
        '"coordinate": [546, 1204]}}\n</tool_call>'
    )
    for obj in (args, call, openai, text, "Thought: tap it.\n" + text, json.dumps(call)):
        assert from_qwen25vl(obj, 1092, 2408) == Action.tap(0.5, 0.5)


def test_qwen_lossy_spots_are_as_documented():
    assert to_qwen25vl(Action(type="done"), 10, 10) == {"action": "terminate", "status": "success"}
    assert to_qwen25vl(Action(type="done", text="all good"), 10, 10)["status"] == "success"
    assert to_qwen25vl(Action(type="back"), 10, 10) == {"action": "system_button", "button": "Back"}
    assert to_qwen25vl(Action(type="wait"), 10, 10) == {"action": "wait"}
    assert to_qwen25vl(Action(type="wait", duration_ms=2500), 10, 10) == {"action": "wait", "time": 2.5}


@pytest.mark.parametrize(
    "obj,field",
    [
        ({"action": "click"}, "coordinate"),
        ({"action": "click", "coordinate": [1093, 10]}, "coordinate"),
        ({"action": "click", "coordinate": [-1, 10]}, "coordinate"),
        ({"action": "click", "coordinate": "546,1204"}, "coordinate"),
        ({"action": "swipe", "coordinate": [1, 1]}, "coordinate2"),
        ({"action": "fly"}, "action"),
        ({"coordinate": [1, 1]}, "action"),
        ({"action": "system_button", "button": "Power"}, "button"),
        ({"action": "system_button"}, "button"),
        ({"action": "type", "text": 5}, "text"),
        ({"action": "open"}, "text"),
        ({"action": "wait", "time": "soon"}, "time"),
        ({"action": "terminate", "status": 1}, "status"),
        (["click"], "arguments"),
        ("<tool_call>not json</tool_call>", "arguments"),
        ({"name": "mobile_use", "arguments": "{bad"}, "arguments"),
        ({"name": "mobile_use", "arguments": [1]}, "arguments"),
    ],
)
def test_qwen_malformed_input_names_the_field(obj, field):
    raises_field(field, from_qwen25vl, obj, 1092, 2408)
