"""Open-AutoGLM converter: round trips, the README's expected output, examples, errors.

Strings copied from /work/shared/samples are cited per test (see test_converters.py).
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from schemas.actions import Action
from schemas.converters import from_autoglm, parse_autoglm, scroll_to_swipe, split_type_focus, to_autoglm
from schemas.converters.common import seconds_text
from tests.schemas.converter_helpers import SCREEN, T, assert_same, ms, raises_field, raw_texts, texts, unit

# --- Open-AutoGLM ------------------------------------------------------------------------

AUTOGLM_TYPES = (
    T.TAP,
    T.DOUBLE_TAP,
    T.LONG_PRESS,
    T.SWIPE,
    T.TYPE,
    T.OPEN_APP,
    T.BACK,
    T.HOME,
    T.WAIT,
    T.TAKE_OVER,
    T.DONE,
)


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
    return draw(
        st.one_of(
            st.builds(
                lambda n, p: f'do(action="{n}", element={p})',
                st.sampled_from(["Tap", "Double Tap", "Long Press"]),
                pt,
            ),
            st.builds(lambda p, m: f'do(action="Tap", element={p}, message={_qs(m)})', pt, texts),
            st.builds(lambda a, b: f'do(action="Swipe", start={a}, end={b})', pt, pt),
            raw_texts.map(lambda s: f'do(action="Type", text="{s}")'),
            texts.map(lambda s: f'do(action="Launch", app={_qs(s)})'),
            st.sampled_from(
                [
                    'do(action="Back")',
                    'do(action="Home")',
                    'do(action="Wait")',
                    'do(action="Take_over")',
                    "finish()",
                ]
            ),
            ms.map(lambda v: f'do(action="Wait", duration="{seconds_text(v)} seconds")'),
            texts.map(lambda s: f'do(action="Take_over", message={_qs(s)})'),
            raw_texts.map(lambda s: f'finish(message="{s}")'),
        )
    )


@given(line=autoglm_lines())
def test_autoglm_format_round_trip_is_exact(line):
    assert to_autoglm(from_autoglm(line)) == line


@pytest.mark.parametrize(
    "a,hint",
    [
        (Action.scroll("down"), "scroll_to_swipe"),
        (Action.key("Enter"), ""),
        (Action(type="select", x=0.1, y=0.1, text="A"), ""),
        (Action(type="answer", text="42"), "finish"),
        (Action.type_text("hi", 0.1, 0.2), "split_type_focus"),
    ],
)
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
        '<answer>do(action="Launch", app="京东")\n```\n'
    )
    a, thought = parse_autoglm(text)
    assert a == Action(type="open_app", text="京东")
    assert thought.startswith("用户想要比较") and thought.endswith("启动京东app。")
    assert to_autoglm(a) == 'do(action="Launch", app="京东")'


@pytest.mark.parametrize(
    "line,expected",
    [
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
        (
            'do(action="Swipe", start=[500,800], end=[500,200])',
            Action(type="swipe", x=0.5, y=0.8, x2=0.5, y2=0.2),
        ),
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
    ],
)
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
    assert to_autoglm(Action(type="wait", duration_ms=1500)) == 'do(action="Wait", duration="1.5 seconds")'
    assert to_autoglm(Action(type="done"), "ok") == "<think>ok</think>\n<answer>finish()</answer>"


def test_autoglm_tricky_strings_written_as_python_literals():
    a = Action(type="open_app", text='a "quoted" \\ name\n第二行')
    line = to_autoglm(a)
    assert "\n" not in line  # one line, as the prompt demands
    assert from_autoglm(line) == a


@pytest.mark.parametrize(
    "line,field",
    [
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
    ],
)
def test_autoglm_malformed_input_names_the_field(line, field):
    raises_field(field, from_autoglm, line)
