"""The unified Action: required fields per type, coordinate checks, pixel maps."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from schemas.actions import (
    ACTION_TYPES,
    POINT_ACTIONS,
    TEXT_ACTIONS,
    Action,
    ActionType,
    from_pixels,
    to_pixels,
)

unit = st.floats(0.0, 1.0, allow_nan=False)
sizes = st.integers(1, 5000)
directions = st.sampled_from(["up", "down", "left", "right"])
texts = st.text(max_size=40)
ms = st.integers(0, 10**7)


@st.composite
def actions(draw, types=tuple(ActionType)) -> Action:
    """Any valid Action of the given types, with every optional field sometimes set."""
    t = draw(st.sampled_from(types))
    kw: dict = {"type": t}
    needs_point = t in POINT_ACTIONS
    if needs_point or draw(st.booleans()):
        kw["x"], kw["y"] = draw(unit), draw(unit)
    if t == ActionType.SWIPE:
        kw["x2"], kw["y2"] = draw(unit), draw(unit)
    if t == ActionType.SCROLL or draw(st.booleans()):
        kw["direction"] = draw(directions)
    if t == ActionType.SCROLL:
        kw["amount"] = draw(st.none() | st.floats(0.01, 1e6, allow_nan=False))
    if t in TEXT_ACTIONS or draw(st.booleans()):
        kw["text"] = draw(texts)
    kw["duration_ms"] = draw(st.none() | ms)
    kw["description"] = draw(st.none() | texts)
    return Action(**kw)


# The smallest valid action of every type: the table must cover the whole action space.
MINIMAL = {
    "tap": {"x": 0.5, "y": 0.5},
    "double_tap": {"x": 0.5, "y": 0.5},
    "long_press": {"x": 0.5, "y": 0.5},
    "swipe": {"x": 0.5, "y": 0.8, "x2": 0.5, "y2": 0.2},
    "scroll": {"direction": "down"},
    "type": {"text": "hello"},
    "key": {"text": "Enter"},
    "open_app": {"text": "Settings"},
    "back": {},
    "home": {},
    "wait": {},
    "select": {"x": 0.5, "y": 0.5, "text": "Red"},
    "answer": {"text": "42"},
    "take_over": {},
    "done": {},
    "right_click": {"x": 0.5, "y": 0.5},
}


def test_minimal_table_covers_every_type():
    assert sorted(MINIMAL) == sorted(ACTION_TYPES)


@pytest.mark.parametrize("type_", ACTION_TYPES)
def test_minimal_action_of_every_type_is_valid(type_):
    a = Action(type=type_, **MINIMAL[type_])
    assert a.type.value == type_


@pytest.mark.parametrize(
    "type_,drop,message",
    [
        *[(t.value, "x", "needs a point") for t in sorted(POINT_ACTIONS)],
        ("swipe", "x2", "needs an end point"),
        ("scroll", "direction", "needs a direction"),
        *[(t.value, "text", "needs text") for t in sorted(TEXT_ACTIONS)],
    ],
)
def test_required_field_missing_is_rejected(type_, drop, message):
    kw = dict(MINIMAL[type_])
    kw.pop(drop)
    if drop in ("x", "x2"):  # a point comes as a pair
        kw.pop(drop.replace("x", "y"))
    with pytest.raises(ValidationError, match=message):
        Action(type=type_, **kw)


@pytest.mark.parametrize(
    "kw,message",
    [
        ({"x": 0.5}, "x and y must be given together"),
        ({"y": 0.5}, "x and y must be given together"),
        ({"x": 0.5, "y": 0.5, "x2": 0.1}, "x2 and y2 must be given together"),
    ],
)
def test_half_a_point_is_rejected(kw, message):
    with pytest.raises(ValidationError, match=message):
        Action(type="wait", **kw)


bad_coordinates = st.floats(allow_nan=True, allow_infinity=True).filter(lambda v: not (0.0 <= v <= 1.0))


@given(field=st.sampled_from(["x", "y", "x2", "y2"]), value=bad_coordinates)
def test_coordinates_outside_unit_or_not_finite_are_rejected_naming_the_field(field, value):
    kw = {"x": 0.5, "y": 0.5, "x2": 0.5, "y2": 0.5, field: value}
    with pytest.raises(ValidationError) as info:
        Action(type="swipe", **kw)
    locs = [e["loc"] for e in info.value.errors()]
    assert (field,) in locs


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), -1e-9, 1.0000001])
def test_explicit_bad_values(value):
    with pytest.raises(ValidationError, match="not a normalised coordinate"):
        Action.tap(value, 0.5)


def test_edges_are_valid():
    assert Action.tap(0.0, 1.0).y == 1.0


def test_negative_duration_is_rejected():
    with pytest.raises(ValidationError, match="negative"):
        Action(type="wait", duration_ms=-1)


def test_unknown_type_and_fields_are_rejected():
    with pytest.raises(ValidationError):
        Action(type="fly")
    with pytest.raises(ValidationError):
        Action(type="back", speed=3)
    with pytest.raises(ValidationError):
        Action(type="scroll", direction="sideways")


def test_actions_are_frozen():
    a = Action.tap(0.1, 0.2)
    with pytest.raises(ValidationError):
        a.x = 0.3


@given(actions())
def test_json_round_trip(a):
    assert Action.model_validate(a.model_dump(mode="json")) == a
    assert Action.model_validate_json(a.model_dump_json()) == a


def test_constructors():
    assert Action.type_text("hi", 0.1, 0.2) == Action(type="type", text="hi", x=0.1, y=0.2)
    assert Action.scroll("up") == Action(type="scroll", direction="up")
    assert Action.key("Enter").text == "Enter"


def test_point_px_and_brief():
    a = Action.tap(0.5, 0.25)
    assert a.point_px(1080, 2400) == (540, 600)
    assert Action(type="back").point_px(10, 10) is None
    assert a.brief() == "tap (0.500,0.250)"
    s = Action(type="swipe", x=0.5, y=0.8, x2=0.5, y2=0.2)
    assert s.brief() == "swipe (0.500,0.800)->(0.500,0.200)"
    assert Action.type_text("你好").brief() == "type '你好'"


# --- to_pixels / from_pixels -------------------------------------------------


def test_pixels_hand_computed():
    assert to_pixels(0.5, 0.5, 1080, 2400) == (540, 1200)
    assert to_pixels(1.0, 1.0, 1080, 2400) == (1079, 2399)  # clamped onto the last pixel
    assert to_pixels(0.0, 0.0, 1080, 2400) == (0, 0)
    assert from_pixels(540, 1200, 1080, 2400) == (0.5, 0.5)
    assert from_pixels(-5, 3000, 1080, 2400) == (0.0, 1.0)  # clamped into [0, 1]


@given(x=unit, y=unit, w=sizes, h=sizes)
def test_to_pixels_stays_on_screen_and_inverts_within_a_pixel(x, y, w, h):
    px, py = to_pixels(x, y, w, h)
    assert isinstance(px, int) and isinstance(py, int)
    assert 0 <= px < w and 0 <= py < h
    nx, ny = from_pixels(px, py, w, h)
    assert abs(nx - x) <= 1 / w + 1e-12
    assert abs(ny - y) <= 1 / h + 1e-12


@given(data=st.data(), w=sizes, h=sizes)
def test_integer_pixels_round_trip_exactly(data, w, h):
    px = data.draw(st.integers(0, w - 1))
    py = data.draw(st.integers(0, h - 1))
    assert to_pixels(*from_pixels(px, py, w, h), w, h) == (px, py)


@pytest.mark.parametrize("w,h", [(0, 10), (10, 0), (-1, 10)])
def test_non_positive_screen_sizes_are_rejected(w, h):
    with pytest.raises(ValueError, match="not positive"):
        from_pixels(1, 1, w, h)
    with pytest.raises(ValueError, match="not positive"):
        to_pixels(0.5, 0.5, w, h)


@pytest.mark.parametrize("px,py", [(math.nan, 1), (1, math.inf)])
def test_non_finite_pixels_are_rejected(px, py):
    with pytest.raises(ValueError, match="not finite"):
        from_pixels(px, py, 100, 100)
