"""Rewards: composite, GUI-Libra step reward, shortest-path factor; values computed by hand."""

from __future__ import annotations

import pytest

from schemas.actions import Action, ActionType
from schemas.converters.gui_libra import to_gui_libra
from schemas.records import Step
from synthesis.rewards import (
    composite_reward,
    invalid_from_steps,
    shortest_path_factor,
    step_reward,
    task_reward,
    tokens,
    value_f1,
)


def test_composite_reward_and_the_task_term():
    assert composite_reward(True, True, False, False) == pytest.approx(1.1)  # 1 + 0.1
    assert composite_reward(False, True, True, True) == pytest.approx(-1.6)  # 0.1 + 0.3 - 2.0
    assert composite_reward(True, True, True, False) == pytest.approx(1.4)  # 1 + 0.1 + 0.3
    # Success in 8 steps where 4 suffice: r_task = min(1, 4/8) = 0.5; 0.5 + 0.1 + 0.3 = 0.9
    assert composite_reward(task_reward(True, 8, 4), 1, 1, 0) == pytest.approx(0.9)
    assert composite_reward(1, 0, 0, 1, w_invalid=1.0) == pytest.approx(0.0)  # 1 - 1.0
    assert shortest_path_factor(8, 4) == 0.5
    assert shortest_path_factor(3, 4) == 1.0  # capped: never more than a shortest path
    assert task_reward(False, 8, 4) == 0.0  # the factor only applies to successes
    assert task_reward(True) == 1.0
    with pytest.raises(ValueError, match="format_ok"):
        composite_reward(1, 2.0, 0, 0)
    with pytest.raises(ValueError, match="steps_taken"):
        shortest_path_factor(0, 3)


def test_invalid_comes_from_the_guard():
    def step(i, guard=None):
        return Step(
            trajectory_id="t",
            index=i,
            screenshot="",
            width=10,
            height=10,
            action=Action.tap(0.5, 0.5),
            guard=guard,
        )

    assert invalid_from_steps([step(0), step(1)]) == 0
    assert invalid_from_steps([step(0), step(1, guard="blocked:payment: Pay now")]) == 1


def test_value_f1_words_and_chinese_characters():
    # common {red, shirt} = 2; precision 2/3, recall 2/2: F1 = 2*(2/3)*1 / (2/3 + 1) = 0.8
    assert value_f1("red cotton shirt", "Red shirt") == pytest.approx(0.8)
    # characters 蓝 色 衬 衫 vs 蓝 色: common 2, P = 2/4, R = 2/2: F1 = 2*0.5*1/1.5 = 2/3
    assert value_f1("蓝色衬衫", "蓝色") == pytest.approx(2 / 3)
    assert tokens("买 iPhone15手机") == ["买", "iphone15", "手", "机"]
    assert value_f1("Hello, world!", "hello world") == 1.0  # punctuation and case ignored
    assert value_f1("", None) == 1.0 and value_f1("a", "") == 0.0 and value_f1("a", "b") == 0.0


REF_TAP = Action.tap(0.5, 0.5)
BOX = (0.4, 0.4, 0.6, 0.6)


def test_step_reward_on_actions():
    assert step_reward(Action.tap(0.55, 0.45), REF_TAP, BOX) == pytest.approx(1.0)  # 0.1 + 0.9
    assert step_reward(Action.tap(0.7, 0.5), REF_TAP, BOX) == pytest.approx(0.1)  # outside
    assert step_reward(Action.tap(0.6, 0.6), REF_TAP, BOX) == pytest.approx(1.0)  # on the edge
    long_press = Action(type=ActionType.LONG_PRESS, x=0.5, y=0.5)
    assert step_reward(long_press, REF_TAP, BOX) == pytest.approx(0.1)  # wrong type
    # No box: within 0.04 of the recorded point.
    # hypot(0.02, 0.03) = 0.036 is in, hypot(0.03, 0.04) = 0.05 is out.
    assert step_reward(Action.tap(0.52, 0.53), REF_TAP) == pytest.approx(1.0)
    assert step_reward(Action.tap(0.53, 0.54), REF_TAP) == pytest.approx(0.1)
    ref_type = Action.type_text("red shirt")
    assert step_reward(Action.type_text("red cotton shirt"), ref_type) == pytest.approx(1.0)  # 0.8
    assert step_reward(Action.type_text("blue hat"), ref_type) == pytest.approx(0.1)  # F1 0
    # "red dress" vs "red shirt": 1 common, P = R = 1/2, F1 = 0.5 >= 0.5: a match
    assert step_reward(Action.type_text("red dress"), ref_type) == pytest.approx(1.0)
    ref_scroll = Action.scroll("down")  # no point: the box check passes
    assert step_reward(Action.scroll("down", 0.5, 0.5), ref_scroll) == pytest.approx(1.0)
    assert step_reward(Action.scroll("up"), ref_scroll) == pytest.approx(0.1)


def test_step_reward_on_gui_libra_text():
    # 1000x800 screen: point_2d [550, 360] is (0.55, 0.45), inside the box.
    text = to_gui_libra(Action.tap(0.55, 0.45), 1000, 800, thought="The button is there.")
    assert '"point_2d": [550, 360]' in text
    assert step_reward(text, REF_TAP, BOX, width=1000, height=800) == pytest.approx(1.0)
    miss = '<answer>{"action_type": "Click", "value": "None", "point_2d": [900, 100]}</answer>'
    assert step_reward(miss, REF_TAP, BOX, width=1000, height=800) == pytest.approx(0.1)
    # grid1000 coordinates: [550, 450] of 1000 = (0.55, 0.45)
    grid = '<answer>{"action_type": "Tap", "value": "None", "point_2d": [550, 450]}</answer>'
    assert step_reward(grid, REF_TAP, BOX, width=1000, height=800, coords="grid1000") == pytest.approx(1.0)
    assert step_reward("I would click the button", REF_TAP, BOX, width=1000, height=800) == 0.0
    assert (
        step_reward('<answer>{"action_type": "Click"}</answer>', REF_TAP, BOX, width=1000, height=800) == 0.0
    )  # a Click without a point does not parse
    with pytest.raises(ValueError, match="width and height"):
        step_reward(text, REF_TAP, BOX)
