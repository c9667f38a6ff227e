"""What GuiEnv.step reads: action dicts in screenshot pixels, model answers per profile, and
the reward terms; no browser here (tests/envs/test_gui_env.py plays them live)."""

from __future__ import annotations

import pytest

from schemas.actions import ActionType
from schemas.errors import SchemaError
from schemas.model_profiles import model_profile
from synthesis.rewards import composite_reward
from trajforge.envs.answers import action_from_dict, parse_answer, reflection_of
from trajforge.envs.rewards import RewardWeights, episode_parts, step_parts
from trajforge.envs.spaces import AnyText, GuiActions

W, H = 1280, 800


def test_an_action_dict_in_pixels_is_normalised_to_the_screenshot():
    a = action_from_dict({"type": "tap", "x": 640, "y": 200}, W, H)
    assert (a.type, a.x, a.y) == (ActionType.TAP, 0.5, 0.25)
    s = action_from_dict({"type": "swipe", "x": 0, "y": 800, "x2": 1280, "y2": 0, "duration_ms": 200.0}, W, H)
    assert (s.x, s.y, s.x2, s.y2, s.duration_ms) == (0.0, 1.0, 1.0, 0.0, 200)
    assert action_from_dict({"type": "key", "text": "Enter"}, W, H).text == "Enter"


@pytest.mark.parametrize(
    "bad, field",
    [
        ({"type": "tap", "x": 1281, "y": 10}, "x"),
        ({"type": "tap", "x": -1, "y": 10}, "x"),
        ({"type": "tap", "x": 10}, None),
        ({"type": "fly"}, None),
        ({"type": "type"}, None),
        (["tap", 1, 2], "action"),
    ],
)
def test_a_bad_action_dict_is_a_schema_error(bad, field):
    with pytest.raises(SchemaError) as err:
        action_from_dict(bad, W, H)
    if field:
        assert err.value.field == field


def _gui_libra(point, think="<think>the button</think>", kind="Click"):
    return (
        f'{think}<answer>{{"action_description": "Press it", "action_type": "{kind}", '
        f'"value": "None", "point_2d": {list(point)}}}</answer>'
    )


@pytest.mark.parametrize("name", ["qwen2.5-vl", "ui-tars", "gui-libra"])
def test_pixel_profiles_read_points_in_the_frame_the_model_saw(name):
    profile = model_profile(name)
    fw, fh = profile.frame(W, H)
    assert (fw, fh) != (W, H)  # a real mapping, not the identity
    action, thought = parse_answer(_gui_libra([fw // 4, fh // 2]), profile, W, H)
    assert thought == "the button"
    assert action.type == ActionType.TAP
    assert abs(action.x * W - W / 4) <= W / fw and abs(action.y * H - H / 2) <= H / fh


def test_qwen25vl_reads_its_mobile_use_tool_call_in_frame_pixels():
    profile = model_profile("qwen2.5-vl")
    fw, fh = profile.frame(W, H)
    text = (
        "<thinking>go</thinking>\n<tool_call>\n"
        f'{{"name": "mobile_use", "arguments": {{"action": "click", "coordinate": [{fw}, {fh // 2}]}}}}'
        "\n</tool_call>"
    )
    action, thought = parse_answer(text, profile, W, H)
    assert (action.type, action.x, action.y, thought) == (ActionType.TAP, 1.0, (fh // 2) / fh, "go")


def test_qwen3vl_reads_the_0_1000_grid_in_both_forms():
    profile = model_profile("qwen3-vl")
    call = '<tool_call>{"name": "mobile_use", "arguments": {"action": "click", "coordinate": [500, 250]}}</tool_call>'
    action, _ = parse_answer(call, profile, W, H)
    assert (action.x, action.y) == (0.5, 0.25)
    action, thought = parse_answer(_gui_libra([250, 1000], think="<thinking>t</thinking>"), profile, W, H)
    assert (action.x, action.y, thought) == (0.25, 1.0, "t")


def test_open_autoglm_reads_its_do_calls_on_the_0_999_grid():
    profile = model_profile("open-autoglm")
    action, thought = parse_answer(
        '<think>tap</think><answer>do(action="Tap", element=[500, 999])</answer>', profile, W, H
    )
    assert (action.type, action.x, action.y, thought) == (ActionType.TAP, 0.5, 0.999, "tap")
    done, _ = parse_answer('finish(message="all set")', profile, W, H)
    assert (done.type, done.text) == (ActionType.DONE, "all set")
    # The reasoning set's JSON, in its 0-999 frame, too.
    action, _ = parse_answer(_gui_libra([999, 0]), profile, W, H)
    assert (action.x, action.y) == (0.999, 0.0)


@pytest.mark.parametrize(
    "profile, text",
    [
        ("qwen2.5-vl", "I would click the blue button."),
        ("qwen2.5-vl", _gui_libra([99999, 10])),  # outside the frame
        ("qwen2.5-vl", _gui_libra([10, 10], kind="Teleport")),
        ("qwen3-vl", '<tool_call>{"name": "mobile_use", "arguments": {"action": "click"}}</tool_call>'),
        ("open-autoglm", 'do(action="Tap")'),
        ("gui-libra", ""),
    ],
)
def test_an_unparseable_answer_is_a_schema_error(profile, text):
    with pytest.raises(SchemaError):
        parse_answer(text, model_profile(profile), W, H)


def test_a_reflection_is_read_from_the_answer():
    assert (
        reflection_of("<think><reflection> wrong page, go back </reflection></think>")
        == "wrong page, go back"
    )
    assert reflection_of("<think><reflection> </reflection></think>") is None
    assert reflection_of(None) is None


def test_the_action_space_samples_what_it_contains():
    space = GuiActions(W, H, seed=3)
    samples = [space.sample() for _ in range(200)]
    assert all(space.contains(s) for s in samples)
    assert {s["type"] for s in samples} >= {"tap", "scroll", "wait", "type", "key"}
    assert space.contains("any answer at all, parsed or not")
    assert not space.contains({"type": "tap", "x": W + 5, "y": 0}) and not space.contains(3)


def test_any_text_holds_any_unicode():
    space = AnyText(10)
    assert space.contains("打开 ✓ é") and not space.contains("x" * 11) and not space.contains(b"x")
    assert space.contains(space.sample())


def test_step_terms_are_composite_rewards_weighted_terms():
    w = RewardWeights()
    assert (w.alpha, w.beta, w.gamma) == (0.1, 0.3, 2.0)
    ok = step_parts(0.0, format_ok=True, reflection=False, invalid=False, w=w)
    assert (ok["format"], ok["shaped"]) == (0.0, 0.0)
    bad = step_parts(0.0, format_ok=False, reflection=False, invalid=False, w=w)
    assert bad["format"] == pytest.approx(-0.1) and bad["shaped"] == pytest.approx(-0.1)
    blocked = step_parts(0.0, format_ok=True, reflection=False, invalid=True, w=w)
    assert blocked["invalid"] == -2.0 and blocked["shaped"] == pytest.approx(-2.0)
    won = step_parts(1.0, format_ok=True, reflection=True, invalid=False, w=RewardWeights(beta=0.5))
    assert won["shaped"] == pytest.approx(1.5) and won["weights"] == {"alpha": 0.1, "beta": 0.5, "gamma": 2.0}
    ep = episode_parts(success=True, format_ok=False, reflection=False, invalid=False, w=w)
    assert ep["reward"] == composite_reward(True, False, False, False) == 1.0
    with pytest.raises(ValueError, match="gamma"):
        RewardWeights(gamma=-1.0)
