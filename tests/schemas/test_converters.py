"""Format converters: GUI-Libra, Open-AutoGLM, Qwen2.5-VL, and the shared grids.

Property tests check both round trips (canonical -> format -> canonical within
the format's resolution; format -> canonical -> format exactly), example tests
use strings copied from /work/shared/samples (cited per test), and the
hand-computed values pin the arithmetic.
Split by format: test_converters_gui_libra.py, test_converters_autoglm.py,
test_converters_qwen.py; this file holds the shared grids and helpers and
smart_resize. Shared strategies and assertions: converter_helpers.py.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from schemas.actions import Action
from schemas.converters import (
    SWIPE_SPAN,
    from_qwen25vl,
    scroll_to_swipe,
    smart_resize,
    split_type_focus,
    swipe_direction,
    to_qwen25vl,
)
from schemas.converters.common import ms_from_seconds, seconds_number, seconds_text
from schemas.grids import GRID_999, GRID_1000, point_from_pixels
from tests.schemas.converter_helpers import SCREEN, T, directions, ms, raises_field, unit

# --- grids ---------------------------------------------------------------------


def test_grid_hand_computed():
    # grid 500 of width 1080 -> 540 px; Open-AutoGLM's (999, 999) is the bottom-right corner.
    assert GRID_1000.decode(500, field="p") * 1080 == 540
    assert GRID_1000.encode(1.0) == 1000 and GRID_999.encode(1.0) == 999
    assert GRID_999.encode(0.5) == 500 and GRID_999.decode(999, field="p") == 0.999
    # OS-Atlas AndroidControl sample: LONG_PRESS <point>[[108,272]]</point> (0-1000 scale)
    # (shared/samples/android_control/derived_osatlas_ac_test.jsonl, id 20)
    x, y = GRID_1000.decode(108, field="p"), GRID_1000.decode(272, field="p")
    assert (round(x * 1080), round(y * 2400)) == (117, 653)


@pytest.mark.parametrize("grid", [GRID_1000, GRID_999])
@given(v=unit)
def test_grid_encode_decode_within_one_unit(grid, v):
    g = grid.encode(v)
    assert isinstance(g, int) and 0 <= g <= grid.max_value
    assert abs(grid.decode(g, field="p") - v) <= 1 / grid.divisor + 1e-12


@pytest.mark.parametrize("grid", [GRID_1000, GRID_999])
@given(data=st.data())
def test_grid_integers_round_trip_exactly(grid, data):
    g = data.draw(st.integers(0, grid.max_value))
    assert grid.encode(grid.decode(g, field="p")) == g


@pytest.mark.parametrize("value", [-1, 1000, 10**6, True, None, "500", math.nan, math.inf])
def test_grid999_rejects_bad_values(value):
    raises_field("element", GRID_999.decode, value, field="element")


def test_pixels_checked_not_clamped():
    assert point_from_pixels([1080, 2400], *SCREEN, field="p") == (1.0, 1.0)
    assert point_from_pixels([540.0, 389.8351648351648], *SCREEN, field="p")[0] == 0.5
    for bad in ([-1, 0], [1081, 0], [0, 2401], [1], "x", [1, "2"]):
        raises_field("coordinate", point_from_pixels, bad, *SCREEN, field="coordinate")


# --- shared helpers ---------------------------------------------------------------


def test_seconds_formatting_is_exact():
    assert [seconds_text(v) for v in (2000, 1500, 1, 0, 120000)] == ["2", "1.5", "0.001", "0", "120"]
    assert [seconds_number(v) for v in (2000, 1500)] == [2, 1.5]
    assert isinstance(seconds_number(2000), int)
    for value, expected in (
        (2, 2000),
        (1.5, 1500),
        ("2", 2000),
        ("2 seconds", 2000),
        ("1.5s", 1500),
        (" 3 second ", 3000),
        ("0.25", 250),
    ):
        assert ms_from_seconds(value, field="t") == expected
    for bad in ("soon", "-1", -1, True, None, math.inf, "2 minutes"):
        raises_field("t", ms_from_seconds, bad, field="t")


@given(v=ms)
def test_seconds_round_trip(v):
    assert ms_from_seconds(seconds_text(v), field="t") == v
    assert ms_from_seconds(seconds_number(v), field="t") == v


def test_swipe_direction():
    mk = lambda x, y, x2, y2, **kw: Action(type="swipe", x=x, y=y, x2=x2, y2=y2, **kw)
    assert swipe_direction(mk(0.5, 0.8, 0.5, 0.2)) == "up"
    assert swipe_direction(mk(0.2, 0.5, 0.9, 0.6)) == "right"
    assert swipe_direction(mk(0.5, 0.5, 0.6, 0.6)) == "down"  # a tie goes vertical
    assert swipe_direction(mk(0.5, 0.5, 0.5, 0.5, direction="left")) == "left"
    raises_field("x2", swipe_direction, mk(0.5, 0.5, 0.5, 0.5))


def test_split_type_focus():
    a = Action.type_text("你好", 0.2, 0.3, description="fill name")
    tap, typed = split_type_focus(a)
    assert tap == Action.tap(0.2, 0.3)
    assert typed == Action.type_text("你好", description="fill name")
    assert split_type_focus(typed) == [typed]
    assert split_type_focus(tap) == [tap]


@given(d=directions, point=st.none() | st.tuples(unit, unit))
def test_scroll_to_swipe_moves_the_finger_against_the_scroll(d, point):
    scroll = Action.scroll(d) if point is None else Action.scroll(d, *point)
    s = scroll_to_swipe(scroll)
    assert s.type == T.SWIPE
    finger = {"down": "up", "up": "down", "left": "right", "right": "left"}[d]
    assert s.direction == finger
    dx, dy = s.x2 - s.x, s.y2 - s.y
    along = {"up": -dy, "down": dy, "left": -dx, "right": dx}[finger]
    assert along >= 0 and abs(dx * dy) == 0
    if point is None:  # from the centre the whole span fits
        assert math.isclose(along, SWIPE_SPAN)


# --- smart_resize ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "hw,kw,expected",
    [
        ((2400, 1080), {}, (2408, 1092)),  # the Open-AutoGLM sample screen: 85.7 -> 86, 38.6 -> 39 patches
        ((800, 1280), {}, (812, 1288)),  # 28.57 -> 29, 45.71 -> 46 patches
        ((800, 1280), {"max_pixels": 1280 * 28 * 28}, (784, 1260)),  # scaled by 1/1.0102, floored
        ((10, 10), {}, (56, 56)),  # scaled up to the 3136-pixel floor
        ((28, 28), {}, (56, 56)),
        ((56, 56), {}, (56, 56)),
        ((42, 70), {"min_pixels": 28 * 28}, (56, 56)),  # 1.5 -> 2 and 2.5 -> 2: ties go to even
    ],
)
def test_smart_resize_hand_computed(hw, kw, expected):
    assert smart_resize(*hw, **kw) == expected


def test_smart_resize_rejects_bad_sizes():
    with pytest.raises(ValueError, match="aspect ratio"):
        smart_resize(28, 28 * 201)
    with pytest.raises(ValueError, match="not positive"):
        smart_resize(0, 100)


@given(h=st.integers(28, 8000), w=st.integers(28, 8000))
def test_smart_resize_properties(h, w):
    assume(max(h, w) / min(h, w) <= 200)
    rh, rw = smart_resize(h, w)
    assert rh % 28 == 0 and rw % 28 == 0
    assert 4 * 28 * 28 <= rh * rw <= 16384 * 28 * 28
    if max(rh, rw) / min(rh, rw) <= 200:  # rounding can push a thin image past the limit
        assert smart_resize(rh, rw) == (rh, rw)  # a resized image is left alone
    small = smart_resize(h, w, max_pixels=1280 * 28 * 28)
    assert small[0] * small[1] <= 1280 * 28 * 28


def test_resized_frame_pipeline():
    # A model sees the 1080x2400 screen as 1092x2408; its pixels map back to the same point.
    rh, rw = smart_resize(2400, 1080)
    args = to_qwen25vl(Action.tap(0.5, 0.5), rw, rh)
    assert args == {"action": "click", "coordinate": [546, 1204]}
    assert from_qwen25vl(args, rw, rh).point_px(1080, 2400) == (540, 1200)
