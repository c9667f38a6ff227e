"""Alignment checks on a scripted backend: match rates and box decisions worked out by hand."""

from __future__ import annotations

import json

import pytest

from filters.judge import DATA_CLOSE, DATA_OPEN
from schemas.actions import Action, ActionType
from synthesis.alignment import AlignmentResult, AlignmentSettings, check_alignment, parse_box, token_f1
from synthesis.cot import StepItem
from synthesis.prompts import SYSTEM_BOX, SYSTEM_PREDICT
from synthesis.template_cot import TemplateCoT

from . import H, ScriptedBackend, W, make_traj, user_text


def libra(action_type: str, value="None", point=(-100, -100)) -> str:
    answer = {"action_description": "x", "action_type": action_type, "value": value, "point_2d": list(point)}
    return f"<think>hmm</think><answer>{json.dumps(answer, ensure_ascii=False)}</answer>"


# The "Add to cart" button is at x 20..160, y 200..240 px; the tap at (90, 220).
IN, OUT = (150, 235), (170, 220)
TAP_SAMPLES = (
    [libra("Click", point=IN)] * 4
    + [libra("Click", point=OUT)] * 2
    + [libra("Write", "hi")] * 2
    + ["no answer at all", libra("Fly")]
)


def items_for(language="en", positions=(0,)):
    traj, steps = make_traj(language)
    return [StepItem(traj, steps, k, b"") for k in positions]


def scripted(samples_by_key: dict[str, list[str]], boxes: dict[str, str]):
    def answer(req, k):
        if req.metadata["kind"] == "box":
            return boxes[req.key]
        return samples_by_key[req.key][k]

    return ScriptedBackend(answer)


def test_match_rate_and_box_by_hand():
    items = items_for()
    backend = scripted({"t-en#0": TAP_SAMPLES}, {"t-en#0": 'The box: {"box": [400, 300, 380, 280]}'})
    res = check_alignment(backend, items, AlignmentSettings(n=10, min_match=0.3, seed=5))[0]
    # 4 of 10 samples tap inside the target's box; 2 unreadable answers count as misses.
    assert res.match_rate == pytest.approx(0.4) and res.n == 10 and res.unparsed == 2
    # The box came in pixels with its corners swapped: stored normalised and ordered.
    assert res.box == pytest.approx((380 / W, 280 / H, 400 / W, 300 / H))
    # The recorded tap (90, 220) is not in it: dropped although the match rate passes.
    assert (res.point_in_box, res.keep, res.reason) == (False, False, "point_outside_box")
    predict, box = backend.calls
    assert (predict["n"], predict["temperature"], predict["seed"]) == (10, 1.0, 5)
    assert box["n"] == 1 and box["temperature"] == 0.0
    assert predict["requests"][0].messages[0]["content"] == SYSTEM_PREDICT["en"]
    assert box["requests"][0].messages[0]["content"] == SYSTEM_BOX["en"]
    # ... and the re-prediction prompt carries no hint of the recorded action.
    data = json.loads(user_text(predict["requests"][0]).split(DATA_OPEN)[1].split(DATA_CLOSE)[0])
    assert "action_taken" not in data and "Click" not in json.dumps(data)


def test_keep_decisions():
    items = items_for()
    inside = '{"box": [20, 200, 160, 240]}'
    cases = [  # (min_match, box answer) -> (keep, reason, point_in_box)
        (0.3, inside, True, None, True),
        (0.5, inside, False, "low_match", True),
        (0.3, '{"box": [300, 300, 400, 400]}', False, "point_outside_box", False),
        (0.3, "it is the blue button", False, "box_unparsed", False),
        (0.3, "<|box_start|>(20,200),(160,240)<|box_end|>", True, None, True),
    ]
    for min_match, box_text, keep, reason, in_box in cases:
        res = check_alignment(
            scripted({"t-en#0": TAP_SAMPLES}, {"t-en#0": box_text}),
            items,
            AlignmentSettings(min_match=min_match),
        )[0]
        assert (res.keep, res.reason, res.point_in_box) == (keep, reason, in_box), box_text
    # With the step's CoT, the box question asks for the target its answer describes.
    cot = TemplateCoT().generate(items[0].trajectory, items[0].steps, 0)
    cot.answer["action_description"] = "Tap the big cart button"
    backend = scripted({"t-en#0": TAP_SAMPLES}, {"t-en#0": inside})
    check_alignment(backend, items, cots=[cot])
    assert '"target": "Tap the big cart button"' in user_text(backend.calls[1]["requests"][0])
    # The box check can be switched off: no box asked, only the match rate decides.
    backend = scripted({"t-en#0": TAP_SAMPLES}, {})
    res = check_alignment(backend, items, AlignmentSettings(check_box=False))[0]
    assert res.keep and res.box is None and res.point_in_box is None and len(backend.calls) == 1


def test_text_direction_and_point_rules():
    traj, steps = make_traj("zh", tid="t-zh")
    steps[0] = steps[0].model_copy(update={"target": None})  # no box: 0.04 of the recorded point
    steps[1] = steps[1].model_copy(update={"action": Action.scroll("down", 0.5, 0.5), "target": None})
    steps[3] = steps[3].model_copy(update={"action": Action.type_text("红鞋")})
    items = [StepItem(traj, steps, k, b"") for k in (0, 1, 2, 3, 4)]
    px, py = 90, 220
    samples = {
        # 0.03 * 800 = 24 px away matches, 0.05 * 800 = 40 px does not
        "t-zh#0": [libra("Click", point=(px + 24, py)), libra("Click", point=(px + 40, py))],
        "t-zh#1": [libra("Scroll", "down"), libra("Scroll", "up")],
        # select: the point in the 尺码 box and the option's value must both match
        "t-zh#2": [libra("Select", "L", (80, 175)), libra("Select", "XL", (80, 175))],
        # 红色鞋子 vs 红鞋: 2 common characters, precision 2/4, recall 1: F1 0.667
        "t-zh#3": [libra("Write", "红色鞋子"), libra("Write", "蓝帽")],
        "t-zh#4": [libra("Terminate"), libra("NavigateBack")],
    }
    backend = scripted(samples, {"t-zh#0": "[80, 210, 100, 230]", "t-zh#2": "[20, 160, 140, 190]"})
    res = check_alignment(backend, items, AlignmentSettings(n=2, min_match=0.5))
    assert [r.match_rate for r in res] == [0.5] * 5
    assert all(r.keep for r in res)
    # Only the steps that act at a point on an element get the box question (not the
    # scroll, whose point is anywhere), in Chinese for a zh task.
    boxed = backend.calls[1]["requests"]
    assert [r.key for r in boxed] == ["t-zh#0", "t-zh#2"]
    assert boxed[0].messages[0]["content"] == SYSTEM_BOX["zh"]
    assert "点击(90, 220) 处" in user_text(boxed[0])  # no target: the action in words
    assert '"target": "“尺码”下拉框"' in user_text(boxed[1])  # the target element in words
    assert [r.point_in_box for r in res] == [True, None, True, None, None]
    assert res[2].box == pytest.approx((20 / W, 160 / H, 140 / W, 190 / H))


def test_template_backend_is_never_checked():
    items = items_for(positions=(0, 2))
    for backend in (None, TemplateCoT()):
        res = check_alignment(backend, items)
        assert res == [AlignmentResult(None, 0, None, None, True, "unchecked")] * 2


def test_n_1_and_unsupported_and_bad_arguments():
    traj, steps = make_traj("en")
    steps[2] = steps[2].model_copy(update={"action": Action(type=ActionType.DOUBLE_TAP, x=0.1, y=0.1)})
    items = [StepItem(traj, steps, k, b"") for k in (0, 2)]
    backend = scripted({"t-en#0": [libra("Click", point=IN)]}, {"t-en#0": "[20, 200, 160, 240]"})
    res = check_alignment(backend, items, AlignmentSettings(n=1))
    assert res[0].match_rate == 1.0 and res[0].keep
    assert (res[1].reason, res[1].match_rate, res[1].keep) == ("unsupported_action", None, True)
    assert [len(c["requests"]) for c in backend.calls] == [1, 1]
    with pytest.raises(ValueError):
        check_alignment(backend, items, AlignmentSettings(n=0))
    with pytest.raises(ValueError):
        check_alignment(backend, items, cots=[])


def test_helpers():
    assert token_f1("red shoes", "red shoes please") == pytest.approx(0.8)
    assert token_f1("Enter", "enter") == 1.0 and token_f1("", "") == 1.0 and token_f1("a", "") == 0.0
    assert token_f1("buy红鞋", "红鞋 buy") == 1.0
    assert parse_box('{"bbox_2d": [0, 0, 1600, 300]}', W, H) == (0.0, 0.0, 1.0, 0.5)
    assert parse_box("[1, 2, 3]", W, H) is None and parse_box('{"box": [true, 0, 1, 1]}', W, H) is None
    assert AlignmentResult(0.5, 2, (0.1, 0.2, 0.3, 0.4), True, True, None).to_row()["box"] == [
        0.1,
        0.2,
        0.3,
        0.4,
    ]
