"""The template CoT backend: grounded in the step's accessibility tree, deterministic,
the recorded action in the answer, EN and ZH written natively."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from schemas.a11y import parse_snapshot
from schemas.actions import Action, ActionType
from schemas.converters.gui_libra import to_gui_libra
from synthesis.cot import generate_cot
from synthesis.language import is_chinese
from synthesis.template_cot import TemplateCoT

from . import make_traj

ELEMENT_ACTIONS = {"tap", "long_press", "swipe", "scroll", "type", "select"}
QUOTED = {"en": re.compile(r'"([^"]*)"'), "zh": re.compile(r"“([^”]*)”")}


def tree_names(step) -> set[str]:
    return {n.name for n in parse_snapshot(step.a11y_tree) if n.name}


def recorded_answer(step) -> dict:
    text = to_gui_libra(step.action, step.width, step.height)
    return json.loads(text[text.index("{") : text.rindex("}") + 1])


def check_grounded(cot, step, language):
    """Every name the observation quotes is in the step's tree; the target is named."""
    named = QUOTED[language].findall(cot.observation)
    assert named and set(named) <= tree_names(step), (named, cot.observation)
    if step.target is not None:
        assert step.target.name in named
        if step.action.type.value in ELEMENT_ACTIONS:  # the plan says what it acts on
            assert step.target.name in cot.plan
    ref = recorded_answer(step)
    assert (cot.answer["action_type"], cot.answer["point_2d"], cot.answer["value"]) == (
        ref["action_type"],
        ref["point_2d"],
        ref["value"],
    )
    assert cot.backend == "template" and cot.parsed and cot.language == language


@pytest.mark.parametrize("language", ["en", "zh"])
def test_template_names_only_tree_elements_and_copies_the_action(language):
    traj, steps = make_traj(language)
    gen = TemplateCoT()
    cots = [gen.generate(traj, steps, k) for k in range(len(steps))]
    for cot, step in zip(cots, steps):
        check_grounded(cot, step, language)
        named = QUOTED[language].findall(cot.observation)
        # The page's first heading, then 2-3 salient elements and the target.
        assert named[0] == ("蓝色衬衫" if language == "zh" else "Blue shirt")
        assert 3 <= len(named) <= 5
        assert "/shop/product/p" in cot.observation and "msg=x" not in cot.observation
        assert ("隐藏的优惠" if language == "zh" else "Hidden offer") not in cot.observation  # off screen
    # Salient elements are the ones nearest the action point.
    assert ("尺码" if language == "zh" else '"Size"') in cots[0].observation
    # Reflection follows what the previous step did.
    first, after_noop, after_error, after_change = (c.reflection for c in cots[:4])
    if language == "en":
        assert "first step" in first
        assert "did not change" in after_noop and 'tap the button "Add to cart"' in after_noop
        assert "failed" in after_error and "timeout 5000ms exceeded" in after_error
        assert "worked" in after_change and 'choose "L" in the drop-down "Size"' in after_change
        assert cots[3].plan == (
            'To complete the task "Add the blue shirt in size L to the cart", next I will type "looks great".'
        )
        assert cots[0].thought.startswith("Observation: The screen shows /shop/product/p0")
        assert not is_chinese(cots[0].thought)
    else:
        assert "第一步" in first
        assert "没有变化" in after_noop and "点击“加入购物车”按钮" in after_noop
        assert "没有成功" in after_error and "timeout 5000ms exceeded" in after_error
        assert "生效" in after_change and "在“尺码”下拉框中选择“L”" in after_change
        assert cots[3].plan == "为了完成任务“把蓝色衬衫加入购物车，尺码选 L”，下一步我要输入“很好看”。"
        assert cots[0].thought.startswith("观察：当前页面是 /shop/product/p0")
        assert all(is_chinese(c.thought) for c in cots)
    assert "finish" in cots[4].plan or "结束任务" in cots[4].plan
    # Deterministic: the same input gives the same text.
    assert [gen.generate(traj, steps, k) for k in range(len(steps))] == cots


def test_tree_only_step_and_language_override():
    """A step stored without elements or URL (an import): names come from the tree text."""
    traj, steps = make_traj("en")
    bare = [s.model_copy(update={"elements": [], "url": ""}) for s in steps]
    cot = TemplateCoT().generate(traj, bare, 2)
    check_grounded(cot, bare[2], "en")
    assert cot.observation.startswith('The screen shows the current view, headed "Blue shirt".')
    # Without boxes nothing can be ranked by distance: document order, first three.
    assert (
        'the link "Shoply home", the search box "Search products" and the button "Search"' in cot.observation
    )
    zh = TemplateCoT(language_of=lambda t: "zh").generate(traj, steps, 0)
    assert zh.language == "zh" and zh.reflection.startswith("这是第一步")
    assert zh.answer["action_description"] == "点击“Add to cart”按钮"


def test_generate_cot_over_a_store_skips_unsupported_actions(tmp_path):
    from tests.export.shard_fixtures import build_store

    built = build_store(tmp_path, n_traj=6)
    pairs = [(built.trajectories[t], built.steps[t]) for t in sorted(built.trajectories)]
    tid, steps = pairs[0][0].trajectory_id, pairs[0][1]
    steps[1] = steps[1].model_copy(update={"action": Action(type=ActionType.DOUBLE_TAP, x=0.2, y=0.5)})
    skipped: Counter = Counter()
    cots = list(generate_cot(pairs, skipped=skipped))
    assert skipped == {"unsupported_action": 1}
    assert len(cots) == built.num_steps - 1
    by_key = {(s.trajectory_id, s.index): s for _, ss in pairs for s in ss}
    for cot in cots:
        step = by_key[(cot.trajectory_id, cot.index)]
        language = built.trajectories[cot.trajectory_id].task.language
        check_grounded(cot, step, language)
        assert is_chinese(cot.thought) == (language == "zh")
    assert (tid, 1) not in {(c.trajectory_id, c.index) for c in cots}


@pytest.mark.parametrize("language", ["en", "zh"])
def test_a_recorded_reflection_is_kept_not_overwritten(language):
    """A reflection episode's step carries `<reflection>…</reflection>` written from the live
    screen after a real wrong tap; the template keeps it, and writes its own elsewhere."""
    traj, steps = make_traj(language)
    text = "The wrong tab opened; going back." if language == "en" else "打开了错误的页面，返回。"
    steps[1] = steps[1].model_copy(update={"thought": f"<reflection>{text}</reflection>"})
    gen = TemplateCoT()
    assert gen.generate(traj, steps, 1).reflection == text
    own = gen.generate(traj, steps, 2).reflection
    assert own != text and own == TemplateCoT().reflection(steps, 2, language)
