"""Format converters: GUI-Libra, Open-AutoGLM, Qwen2.5-VL, and the shared grids.

Property tests check both round trips (canonical -> format -> canonical within
the format's resolution; format -> canonical -> format exactly), example tests
use strings copied from /work/shared/samples (cited per test), and the
hand-computed values pin the arithmetic.
"""
from __future__ import annotations

import json
import math

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from schemas.actions import Action, ActionType
from schemas.converters import (SWIPE_SPAN, from_autoglm, from_gui_libra, from_qwen25vl,
                                parse_autoglm, qwen25vl_tool_call, scroll_to_swipe, smart_resize,
                                split_type_focus, swipe_direction, to_autoglm, to_gui_libra,
                                to_qwen25vl)
from schemas.converters import ms_from_seconds, seconds_number, seconds_text
from schemas.converters.gui_libra import NO_POINT, TO_NAME
from schemas.errors import SchemaError
from schemas.grids import GRID_999, GRID_1000, point_from_pixels

T = ActionType
unit = st.floats(0.0, 1.0, allow_nan=False)
sizes = st.integers(1, 4000)
directions = st.sampled_from(["up", "down", "left", "right"])
ms = st.integers(0, 10**7)
TRICKY = ['He said "hi"', "it's", "back\\slash", "line1\nline2", '\\"', "价格 ¥59「好」",
          "", " padded ", '{"json": 1}', "'single'", "\ttab\r\n", '")', 'finish(message="x")',
          "\\n not a newline", "emoji 👍🏽", "\x00nul", "\u2028sep"]
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
    for value, expected in ((2, 2000), (1.5, 1500), ("2", 2000), ("2 seconds", 2000),
                            ("1.5s", 1500), (" 3 second ", 3000), ("0.25", 250)):
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


# --- GUI-Libra ---------------------------------------------------------------------

LIBRA_TYPES = tuple(TO_NAME)
not_none = texts.filter(lambda s: s != "None")


@st.composite
def libra_actions(draw) -> Action:
    """Canonical actions restricted to what GUI-Libra keeps."""
    t = draw(st.sampled_from(LIBRA_TYPES))
    kw: dict = {"type": t, "description": draw(st.none() | not_none)}
    if t in (T.TAP, T.LONG_PRESS, T.SELECT, T.SWIPE) or \
            (t in (T.SCROLL, T.TYPE) and draw(st.booleans())):
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


LIBRA_NAMES = ["Click", "LongPress", "Swipe", "Scroll", "Write", "Select", "KeyboardPress",
               "OpenAPP", "NavigateBack", "NavigateHome", "Wait", "Answer", "Terminate"]


@st.composite
def libra_objects(draw, w: int, h: int, max_v: int | None = None):
    """GUI-Libra answer objects in the writer's spelling (pixels, or a 0..max_v grid)."""
    name = draw(st.sampled_from(LIBRA_NAMES))
    xs = st.integers(0, max_v if max_v is not None else w - 1)
    ys = st.integers(0, max_v if max_v is not None else h - 1)
    point = [draw(xs), draw(ys)]
    value, p = "None", NO_POINT
    if name in ("Click", "LongPress", "Select", "Swipe"):
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
    return {"action_description": draw(not_none | st.just("None")), "action_type": name,
            "value": value, "point_2d": p}


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
    text = ('<think>\nReasoning about the current UI state, reflecting on progress,\n'
            'and planning the next action...\n</think>\n<answer>\n{\n'
            '  "action_description": "brief description of the action",\n'
            '  "action_type": "Click",\n  "value": "None",\n  "point_2d": [540, 1200]\n}\n</answer>')
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
        '"Click", "value": "None", "point_2d": [540, 1200]}\n</answer>')
    o = _libra_obj(to_gui_libra(Action(type="back"), *SCREEN))
    assert o == {"action_description": "None", "action_type": "NavigateBack", "value": "None",
                 "point_2d": [-100, -100]}
    o = _libra_obj(to_gui_libra(Action(type="wait", duration_ms=1500), *SCREEN))
    assert o["value"] == "1.5"
    assert to_gui_libra(a, *SCREEN).startswith("<answer>")  # no thought, no think block


@pytest.mark.parametrize("answer,expected", [
    # single quotes and None: a Python literal
    ("<answer>{'action_description': 'go', 'action_type': 'Click', 'value': None, "
     "'point_2d': [108, 240]}</answer>", Action.tap(0.1, 0.1, description="go")),
    # trailing text after the JSON, and no closing tag
    ('<answer> {"action_type": "Scroll", "value": "down", "point_2d": [-100, -100]} '
     'I will scroll now.', Action.scroll("down")),
    # no tags at all, in a code fence
    ('```json\n{"action_type": "Write", "value": "北京", "point_2d": null}\n```',
     Action.type_text("北京")),
    # aliases and case, value "None" meaning absent for optional values
    ('<answer>{"action_type": "openapp", "value": "微信", "point_2d": "None"}</answer>',
     Action(type="open_app", text="微信")),
    ('<answer>{"action_type": "Terminate", "value": "None"}</answer>', Action(type="done")),
    ('<answer>{"action_type": "Complete", "value": "success"}</answer>',
     Action(type="done", text="success")),
    ('<answer>{"action_type": "Wait", "value": 2}</answer>', Action(type="wait", duration_ms=2000)),
    ('<answer>{"action_type": "Write", "value": "None"}</answer>', Action.type_text("None")),
    ('<answer>{"action_type": "keyboard_press", "value": "enter"}</answer>', Action.key("enter")),
    ('<answer>{"action_type": "Select", "value": "Red", "point_2d": [1080, 2400]}</answer>',
     Action(type="select", x=1.0, y=1.0, text="Red")),
    # a thought that itself mentions the answer format
    ('<think>I should output <answer>{"x": 1}</answer></think><answer>{"action_type": '
     '"NavigateHome", "value": "None", "point_2d": [-100, -100]}</answer>', Action(type="home")),
])
def test_gui_libra_robust_parsing(answer, expected):
    assert from_gui_libra(answer, *SCREEN)[0] == expected


def test_gui_libra_swipe_keeps_start_and_direction():
    text = '<answer>{"action_type": "Swipe", "value": "up", "point_2d": [540, 1800]}</answer>'
    a, _ = from_gui_libra(text, *SCREEN)
    assert (a.type, a.direction, a.x, a.y) == (T.SWIPE, "up", 0.5, 0.75)
    assert math.isclose(a.y - a.y2, SWIPE_SPAN) and a.x2 == 0.5
    centre, _ = from_gui_libra('<answer>{"action_type": "Swipe", "value": "left"}</answer>', *SCREEN)
    assert (centre.x, centre.y, centre.direction) == (0.5, 0.5, "left")


@pytest.mark.parametrize("answer,field", [
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
])
def test_gui_libra_malformed_input_names_the_field(answer, field):
    raises_field(field, from_gui_libra, answer, *SCREEN)


def test_gui_libra_grid_out_of_range():
    text = '<answer>{"action_type": "Click", "point_2d": [1001, 5]}</answer>'
    raises_field("point_2d", from_gui_libra, text, *SCREEN, coords="grid1000")
    with pytest.raises(ValueError, match="coords"):
        from_gui_libra(text, *SCREEN, coords="grid999")


# --- Open-AutoGLM ------------------------------------------------------------------------

AUTOGLM_TYPES = (T.TAP, T.DOUBLE_TAP, T.LONG_PRESS, T.SWIPE, T.TYPE, T.OPEN_APP, T.BACK,
                 T.HOME, T.WAIT, T.TAKE_OVER, T.DONE)


@st.composite
def autoglm_actions(draw) -> Action:
    t = draw(st.sampled_from(AUTOGLM_TYPES))
    kw: dict = {"type": t}
    if t in (T.TAP, T.DOUBLE_TAP, T.LONG_PRESS, T.SWIPE):
        kw["x"], kw["y"] = draw(unit), draw(unit)
    if t == T.SWIPE:
        kw["x2"], kw["y2"] = draw(unit), draw(unit)
    if t in (T.TYPE, T.DONE):
        kw["text"] = draw(raw_texts) if t == T.TYPE else draw(st.none() | raw_texts)
    if t in (T.OPEN_APP,):
        kw["text"] = draw(texts)
    if t in (T.TAP, T.TAKE_OVER):
        kw["text"] = draw(st.none() | texts)
    if t == T.WAIT:
        kw["duration_ms"] = draw(st.none() | ms)
    return Action(**kw)


@given(a=autoglm_actions(), thought=st.none() | st.text(max_size=20).filter(lambda s: "</think>" not in s))
def test_autoglm_canonical_round_trip(a, thought):
    text = to_autoglm(a, thought)
    back, got = parse_autoglm(text)
    assert got == thought
    assert_same(a, back, 1 / 1000, 1 / 1000)


def _qs(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


@st.composite
def autoglm_lines(draw) -> str:
    """Action lines in the writer's spelling, built from the documented grammar."""
    pt = st.tuples(st.integers(0, 999), st.integers(0, 999)).map(lambda p: f"[{p[0]},{p[1]}]")
    return draw(st.one_of(
        st.builds(lambda n, p: f'do(action="{n}", element={p})',
                  st.sampled_from(["Tap", "Double Tap", "Long Press"]), pt),
        st.builds(lambda p, m: f'do(action="Tap", element={p}, message={_qs(m)})', pt, texts),
        st.builds(lambda a, b: f'do(action="Swipe", start={a}, end={b})', pt, pt),
        raw_texts.map(lambda s: f'do(action="Type", text="{s}")'),
        texts.map(lambda s: f'do(action="Launch", app={_qs(s)})'),
        st.sampled_from(['do(action="Back")', 'do(action="Home")', 'do(action="Wait")',
                         'do(action="Take_over")', "finish()"]),
        ms.map(lambda v: f'do(action="Wait", duration="{seconds_text(v)} seconds")'),
        texts.map(lambda s: f'do(action="Take_over", message={_qs(s)})'),
        raw_texts.map(lambda s: f'finish(message="{s}")'),
    ))


@given(line=autoglm_lines())
def test_autoglm_format_round_trip_is_exact(line):
    assert to_autoglm(from_autoglm(line)) == line


@pytest.mark.parametrize("a,hint", [
    (Action.scroll("down"), "scroll_to_swipe"),
    (Action.key("Enter"), ""),
    (Action(type="select", x=0.1, y=0.1, text="A"), ""),
    (Action(type="answer", text="42"), "finish"),
    (Action.type_text("hi", 0.1, 0.2), "split_type_focus"),
])
def test_autoglm_cannot_express(a, hint):
    err = raises_field("type", to_autoglm, a)
    assert a.type.value in str(err) and hint in str(err)
    if a.type == T.SCROLL:  # the suggested rewrite is expressible
        assert from_autoglm(to_autoglm(scroll_to_swipe(a))).type == T.SWIPE
    if a.type == T.TYPE:
        assert [from_autoglm(to_autoglm(p)).type for p in split_type_focus(a)] == [T.TAP, T.TYPE]


def test_autoglm_readme_expected_output():
    # open_autoglm/readme_expected_output_zh.txt (README lines 276-287), verbatim, with
    # the closing code fence of the README and no </answer>.
    text = (
        "<think>用户想要比较这个洗发水在京东和淘宝上的价格，然后选择最便宜的平台下单。"
        "当前在小红书app上，显示的是一个关于LUMMI MOOD洗发水的帖子。\n\n我需要：\n"
        "1. 先启动京东app，搜索这个洗发水\n2. 查看京东的价格\n3. 再启动淘宝app，搜索这个洗发水\n"
        "4. 查看淘宝的价格\n5. 比较价格后，选择最便宜的京东或淘宝下单\n\n"
        "首先，我需要从当前的小红书界面退出，然后启动京东app。</think>\n"
        '<answer>do(action="Launch", app="京东")\n```\n')
    a, thought = parse_autoglm(text)
    assert a == Action(type="open_app", text="京东")
    assert thought.startswith("用户想要比较") and thought.endswith("启动京东app。")
    assert to_autoglm(a) == 'do(action="Launch", app="京东")'


@pytest.mark.parametrize("line,expected", [
    # The examples of open_autoglm/sample_messages_en.truncated.json's system prompt.
    ('do(action="Type", text="Hello World")', Action.type_text("Hello World")),
    ('do(action="Launch", app="Settings")', Action(type="open_app", text="Settings")),
    ('do(action="Back")', Action(type="back")),
    ('finish(message="Task completed.")', Action(type="done", text="Task completed.")),
    # open_autoglm/PROVENANCE.md grammar, with numbers on the 0-999 grid.
    ('do(action="Tap", element=[500,500])', Action.tap(0.5, 0.5)),
    ('do(action="Tap", element=[500,500], message="支付")', Action.tap(0.5, 0.5, text="支付")),
    ('do(action="Long Press", element=[999,0])', Action(type="long_press", x=0.999, y=0.0)),
    ('do(action="Double Tap", element=[250,750])', Action(type="double_tap", x=0.25, y=0.75)),
    ('do(action="Swipe", start=[500,800], end=[500,200])',
     Action(type="swipe", x=0.5, y=0.8, x2=0.5, y2=0.2)),
    ('do(action="Home")', Action(type="home")),
    ('do(action="Wait", duration="2 seconds")', Action(type="wait", duration_ms=2000)),
    ('do(action="Take_over", message="请登录")', Action(type="take_over", text="请登录")),
    # Looser spellings a model writes.
    ("do(action='Launch', app='微信')", Action(type="open_app", text="微信")),
    ('do( action = "Tap" , element = [ 10 , 20 ] )', Action.tap(0.01, 0.02)),
    ("finish(message='done')", Action(type="done", text="done")),
    ('  do(action="Home")  \n', Action(type="home")),
    ('<answer>do(action="Back")</answer>', Action(type="back")),
    # A raw newline inside a literal: upstream escapes it before ast.
    ('do(action="Take_over", message="line1\nline2")', Action(type="take_over", text="line1\nline2")),
    # Type's text is raw, as upstream reads it: inner quotes are kept as they are.
    ('do(action="Type", text="He said "hi"")', Action.type_text('He said "hi"')),
    ('do(action="Type", text="C:\\temp")', Action.type_text("C:\\temp")),
])
def test_autoglm_examples(line, expected):
    assert from_autoglm(line) == expected


def test_autoglm_one_way_actions_keep_the_original_call():
    line = 'do(action="Type_Name", text="张三")'
    assert from_autoglm(line) == Action.type_text("张三", description=line)
    line = 'do(action="Interact")'
    assert from_autoglm(line) == Action(type="take_over", description=line)
    for line in ('do(action="Note", message="True")', 'do(action="Call_API", instruction="总结评论")'):
        assert from_autoglm(line) == Action(type="wait", description=line)


def test_autoglm_hand_computed_points():
    # element [500, 500] on the 1080x2400 sample screen -> 540, 1200 px
    assert from_autoglm('do(action="Tap", element=[500,500])').point_px(*SCREEN) == (540, 1200)
    assert to_autoglm(Action.tap(1.0, 0.0)) == 'do(action="Tap", element=[999,0])'
    assert to_autoglm(Action.tap(0.12345, 0.5)) == 'do(action="Tap", element=[123,500])'
    assert to_autoglm(Action(type="wait", duration_ms=1500)) == \
        'do(action="Wait", duration="1.5 seconds")'
    assert to_autoglm(Action(type="done"), "ok") == "<think>ok</think>\n<answer>finish()</answer>"


def test_autoglm_tricky_strings_written_as_python_literals():
    a = Action(type="open_app", text='a "quoted" \\ name\n第二行')
    line = to_autoglm(a)
    assert "\n" not in line  # one line, as the prompt demands
    assert from_autoglm(line) == a


@pytest.mark.parametrize("line,field", [
    ("tap the button", "action"),
    ("do(1, 2)", "action"),
    ("do(**x)", "action"),
    ("print('x')", "action"),
    ("do(action=)", "action"),
    ('do(action="Fly")', "action"),
    ("do(action=3)", "action"),
    ('do(action="Tap")', "element"),
    ('do(action="Tap", element=[1000,5])', "element"),
    ('do(action="Tap", element=[1,2,3])', "element"),
    ('do(action="Tap", element="center")', "element"),
    ('do(action="Swipe", start=[1,2])', "end"),
    ('do(action="Launch")', "app"),
    ('do(action="Launch", app=42)', "app"),
    ('do(action="Wait", duration="soon")', "duration"),
    ('do(action="Launch", app=__import__("os").getcwd())', "app"),
    ('do(action="Launch", app="x" + "y")', "app"),
])
def test_autoglm_malformed_input_names_the_field(line, field):
    raises_field(field, from_autoglm, line)


# --- Qwen2.5-VL ------------------------------------------------------------------------

QWEN_TYPES = (T.TAP, T.LONG_PRESS, T.SWIPE, T.TYPE, T.KEY, T.BACK, T.HOME, T.OPEN_APP,
              T.WAIT, T.ANSWER, T.DONE)


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
    return draw(st.one_of(
        st.builds(lambda p: {"action": "click", "coordinate": p}, pt),
        st.builds(lambda p: {"action": "long_press", "coordinate": p}, pt),
        st.builds(lambda p, s: {"action": "long_press", "coordinate": p, "time": s}, pt, secs),
        st.builds(lambda a, b: {"action": "swipe", "coordinate": a, "coordinate2": b}, pt, pt),
        texts.map(lambda s: {"action": "type", "text": s}),
        keys.map(lambda s: {"action": "key", "text": s}),
        st.sampled_from(["Back", "Home", "Enter", "Menu"]).map(
            lambda b: {"action": "system_button", "button": b}),
        texts.map(lambda s: {"action": "open", "text": s}),
        st.just({"action": "wait"}),
        secs.map(lambda s: {"action": "wait", "time": s}),
        texts.map(lambda s: {"action": "answer", "text": s}),
        st.sampled_from(["success", "failure"]).map(lambda s: {"action": "terminate", "status": s}),
    ))


@given(data=st.data(), w=sizes, h=sizes)
def test_qwen_format_round_trip_is_exact(data, w, h):
    args = data.draw(qwen_args(w, h))
    assert to_qwen25vl(from_qwen25vl(args, w, h), w, h) == args


@pytest.mark.parametrize("a", [
    Action.scroll("up"), Action(type="double_tap", x=0.1, y=0.1),
    Action(type="select", x=0.1, y=0.1, text="A"), Action(type="take_over"),
    Action.type_text("hi", 0.1, 0.2),
])
def test_qwen_cannot_express(a):
    err = raises_field("type", to_qwen25vl, a, *SCREEN)
    assert a.type.value in str(err)


UIS1_HEIGHT = 2400  # AndroidControl screenshots are 1080 wide; UI-S1 bboxes reach x=1080


@pytest.mark.parametrize("args,expected", [
    # android_control/derived_uis1_android_control_train_example.first2.jsonl, episode 0 and 20
    ({"action": "open", "text": "Zoho Meeting"}, Action(type="open_app", text="Zoho Meeting")),
    ({"action": "wait", "time": 2}, Action(type="wait", duration_ms=2000)),
    ({"action": "terminate", "status": "success"}, Action(type="done", text="success")),
    ({"action": "system_button", "button": "Back"}, Action(type="back")),
    ({"action": "swipe", "coordinate": [540.0, 600.0], "coordinate2": [540.0, 1800.0]},
     Action(type="swipe", x=0.5, y=0.25, x2=0.5, y2=0.75)),
    # android_control/derived_uis1_android_control_evaluation_std.first1.jsonl, episode 8193
    ({"action": "type", "text": "Sculpture art"}, Action.type_text("Sculpture art")),
    ({"action": "click", "coordinate": [540, 2273]}, Action.tap(0.5, 2273 / 2400)),
    # other spellings seen in Qwen-style agents
    ({"action": "system_button", "button": "home"}, Action(type="home")),
    ({"action": "system_button", "button": "Enter"}, Action.key("Enter")),
    ({"action": "key", "text": "volume_up"}, Action.key("volume_up")),
    ({"action": "long_press", "coordinate": [108, 240], "time": 1.5},
     Action(type="long_press", x=0.1, y=0.1, duration_ms=1500)),
    ({"action": "answer", "text": "¥59"}, Action(type="answer", text="¥59")),
])
def test_qwen_samples(args, expected):
    assert from_qwen25vl(args, 1080, UIS1_HEIGHT) == expected


def test_qwen_uis1_click_lands_in_its_bbox():
    # derived_uis1_android_control_train_example.first2.jsonl, episode 0 step 2:
    # float pixels beside the element's bbox [360, 327, 695, 466].
    a = from_qwen25vl({"action": "click", "coordinate": [540.0, 389.8351648351648],
                       "bbox": [360, 327, 695, 466]}, 1080, UIS1_HEIGHT)
    px, py = a.point_px(1080, UIS1_HEIGHT)
    assert 360 <= px <= 695 and 327 <= py <= 466
    assert to_qwen25vl(a, 1080, UIS1_HEIGHT) == {"action": "click", "coordinate": [540, 390]}


def test_qwen_call_wrappers():
    args = {"action": "click", "coordinate": [546, 1204]}
    call = {"name": "mobile_use", "arguments": args}
    openai = {"name": "mobile_use", "arguments": json.dumps(args)}
    text = qwen25vl_tool_call(args)
    assert text == ('<tool_call>\n{"name": "mobile_use", "arguments": {"action": "click", '
                    '"coordinate": [546, 1204]}}\n</tool_call>')
    for obj in (args, call, openai, text, "Thought: tap it.\n" + text, json.dumps(call)):
        assert from_qwen25vl(obj, 1092, 2408) == Action.tap(0.5, 0.5)


def test_qwen_lossy_spots_are_as_documented():
    assert to_qwen25vl(Action(type="done"), 10, 10) == {"action": "terminate", "status": "success"}
    assert to_qwen25vl(Action(type="done", text="all good"), 10, 10)["status"] == "success"
    assert to_qwen25vl(Action(type="back"), 10, 10) == {"action": "system_button", "button": "Back"}
    assert to_qwen25vl(Action(type="wait"), 10, 10) == {"action": "wait"}
    assert to_qwen25vl(Action(type="wait", duration_ms=2500), 10, 10) == {"action": "wait", "time": 2.5}


@pytest.mark.parametrize("obj,field", [
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
])
def test_qwen_malformed_input_names_the_field(obj, field):
    raises_field(field, from_qwen25vl, obj, 1092, 2408)


# --- smart_resize ------------------------------------------------------------------------

@pytest.mark.parametrize("hw,kw,expected", [
    ((2400, 1080), {}, (2408, 1092)),  # the Open-AutoGLM sample screen: 85.7 -> 86, 38.6 -> 39 patches
    ((800, 1280), {}, (812, 1288)),  # 28.57 -> 29, 45.71 -> 46 patches
    ((800, 1280), {"max_pixels": 1280 * 28 * 28}, (784, 1260)),  # scaled by 1/1.0102, floored
    ((10, 10), {}, (56, 56)),  # scaled up to the 3136-pixel floor
    ((28, 28), {}, (56, 56)),
    ((56, 56), {}, (56, 56)),
    ((42, 70), {"min_pixels": 28 * 28}, (56, 56)),  # 1.5 -> 2 and 2.5 -> 2: ties go to even
])
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
