"""Reasoning-set samples: the 1:1 mix, exact spans, answers that parse to the recording, history,
Chinese prompts, and every left-out step counted."""

from __future__ import annotations

import io
import json
from collections import Counter

import pytest
from PIL import Image

from schemas.actions import Action, ActionType
from schemas.converters.gui_libra import from_gui_libra, to_gui_libra
from schemas.records import DeviceProfile, Element, Step, Task, Trajectory
from synthesis.alignment import AlignmentResult
from synthesis.language import is_chinese
from synthesis.reasoning_set import answer_spans, build_samples, system_prompt
from synthesis.set_stats import same_action, set_checks, summarise
from synthesis.step_cot import StepCoT

W, H = 390, 844
SHA = "ab" * 32
# Values that would trip a naive span search: quotes, a `"value": ` inside the
# description, CJK, a `<` in typed text. Index 2 is missing (a curated gap).
ACTIONS = {
    0: Action.tap(0.5123, 0.3011, description="tap Go"),
    1: Action.type_text('say "value": 1 <image> 红鞋', 0.5, 0.1),
    3: Action(type=ActionType.SWIPE, x=0.9, y=0.5, x2=0.1, y2=0.52, duration_ms=300),
    4: Action(type=ActionType.WAIT, duration_ms=1500),
    5: Action(type=ActionType.DONE, text="完成"),
}
DROPPED = {2: Action.scroll("down")}  # recorded and executed, then dropped by curation


def trajectory(lang: str = "en", tid: str = "t-1", num_steps: int = 6) -> tuple[Trajectory, list[Step]]:
    task = Task(
        task_id="task",
        language=lang,
        app="shop",
        instruction="把红鞋加入购物车 <image>" if lang == "zh" else "Add red shoes <image> to the cart",
    )
    traj = Trajectory(
        trajectory_id=tid,
        task=task,
        platform="mobile_web",
        app="shop",
        device=DeviceProfile(viewport_width=W, viewport_height=H),
        policy="oracle",
        num_steps=num_steps,
        outcome="success",
        verified_by="state",
    )
    go = Element(role="button", name="Go", bbox=(0.4, 0.25, 0.6, 0.35))
    steps = [
        Step(
            trajectory_id=tid,
            index=i,
            screenshot=SHA,
            width=W,
            height=H,
            action=a,
            target=go if i == 0 else None,
            elements=[go],
        )
        for i, a in ACTIONS.items()
    ]
    return traj, steps


def cot(step: Step, lang: str, description: str = 'press "value": "x" here', **kw) -> StepCoT:
    text = to_gui_libra(step.action.model_copy(update={"description": description}), W, H)
    fields = dict(
        trajectory_id=step.trajectory_id,
        index=step.index,
        language=lang,
        observation="页面上有红鞋" if lang == "zh" else "The page lists red shoes",
        reflection="上一步已完成" if lang == "zh" else "The last action worked",
        plan="继续下一步" if lang == "zh" else "Go on",
        backend="template",
        parsed=True,
        answer=json.loads(text[text.index("{") : text.rindex("}") + 1]),
    )
    return StepCoT(**{**fields, **kw})


def recorded(steps: list[Step]) -> list[Step]:
    """The trajectory as recorded: its kept steps and the dropped one."""
    gone = [steps[0].model_copy(update={"index": i, "action": a, "target": None}) for i, a in DROPPED.items()]
    return sorted(steps + gone, key=lambda s: s.index)


def samples_of(lang="en", **options):
    traj, steps = trajectory(lang)
    cots = {s.index: cot(s, lang) for s in steps}
    images = {s.index: png(s.index) for s in steps}
    return traj, steps, build_samples(traj, steps, cots, images, recorded=recorded(steps), **options)


def png(shade: int) -> bytes:
    """A W x H screenshot (one grey per step)."""
    buf = io.BytesIO()
    Image.new("L", (W, H), 40 * shade).save(buf, format="PNG")
    return buf.getvalue()


def frame(sample: dict) -> tuple[int, int]:
    """The size of the image a sample holds: the model profile's frame (qwen2.5-vl: 392x840)."""
    return sample["json"]["image"]["width"], sample["json"]["image"]["height"]


def gpt(sample: dict) -> str:
    return sample["json"]["conversations"][2]["value"]


def test_every_step_gives_one_reason_and_one_direct_sample():
    traj, steps, samples = samples_of()
    assert [s["__key__"] for s in samples] == [
        f"t-1_s{i:04d}_{m}" for i in ACTIONS for m in ("direct", "reason")
    ]
    assert Counter(s["json"]["mode"] for s in samples) == {"direct": 5, "reason": 5}
    for s in samples:
        j = s["json"]
        # the screenshot given, resized to the frame the trainer feeds
        assert Image.open(io.BytesIO(s["png"])).size == frame(s) == (392, 840)
        assert j["screenshot"] == {"width": W, "height": H}
        assert [t["from"] for t in j["conversations"]] == ["system", "human", "gpt"]
        assert j["conversations"][0]["value"] == system_prompt(j["mode"], "en")
        assert gpt(s).startswith("<think>Observation: ") == (j["mode"] == "reason")
        assert j["alignment"] == {"match_rate": None, "box": None, "point_in_box": None, "checked": False}
    # The modes are told apart by their system prompts (same input, two outputs).
    assert system_prompt("reason", "en") != system_prompt("direct", "en")


def test_spans_slice_exactly_and_answers_parse_back_to_the_recording():
    traj, steps, samples = samples_of()
    recorded = {s.index: s.action for s in steps}
    for s in samples:
        j, text = s["json"], gpt(s)
        action, thought = from_gui_libra(text, *frame(s))
        want = recorded[j["index"]]
        assert action.type == want.type
        if want.x is not None:  # pixel points round-trip within 1 px
            (px, py), (wx, wy) = action.point_px(W, H), want.point_px(W, H)
            assert abs(px - wx) <= 1 and abs(py - wy) <= 1
        assert same_action(action, want, W, H)
        assert action.description == 'press "value": "x" here'  # from the CoT
        assert (thought is not None) == (j["mode"] == "reason")
        action_spans, coord_spans = j["spans"]["action"], j["spans"]["coords"]
        got = [json.loads(f'"{text[a:b]}"') for a, b in action_spans]
        assert got == [j["answer"]["action_type"], j["answer"]["value"]]
        assert [int(text[a:b]) for a, b in coord_spans] == (
            [] if j["answer"]["point_2d"] == [-100, -100] else j["answer"]["point_2d"]
        )
    # The typed text with quotes is sliced as its JSON text (escapes kept).
    typed = next(s for s in samples if s["json"]["index"] == 1)
    a, b = typed["json"]["spans"]["action"][1]
    assert gpt(typed)[a:b] == 'say \\"value\\": 1 <image> 红鞋'
    assert summarise(samples)["answers"] == {
        "total": 10,
        "parsed": 10,
        "match_recording": 10,
        "spans_ok": 10,
        "failures": [],
    }


def test_spans_by_hand():
    text = (
        '<think>t</think>\n<answer>\n{"action_description": "None", "action_type": "Click", '
        '"value": "None", "point_2d": [12, 345]}\n</answer>'
    )
    spans = answer_spans(text)
    assert [text[a:b] for a, b in spans["action"]] == ["Click", "None"]
    assert [text[a:b] for a, b in spans["coords"]] == ["12", "345"]


def test_history_lists_the_earlier_actions_and_escapes_untrusted_text():
    traj, steps, samples = samples_of()
    human = {s["json"]["index"]: s["json"]["conversations"][1]["value"] for s in samples}
    assert human[0].endswith("Previous actions: none")
    lines = human[3].split("Previous actions:\n")[1].splitlines()
    assert len(lines) == 3  # steps 0, 1 and 2: curation dropped 2 as a target, not from the past
    assert lines[0].startswith("Step 1: ") and "Go" in lines[0]
    assert lines[1].startswith("Step 2: ") and "红鞋" in lines[1]
    assert lines[2] == "Step 3: scroll down"
    assert human[5].count("\nStep ") == 5
    for text in human.values():  # one image slot, whatever the task or typed text says
        assert text.startswith("<image>\nTask: Add red shoes") and text.count("<image>") == 1


def test_zh_prompts_and_thoughts_are_chinese():
    traj, steps, samples = samples_of("zh")
    assert len(samples) == 10
    for s in samples:
        j = s["json"]
        system, human = j["conversations"][0]["value"], j["conversations"][1]["value"]
        assert is_chinese(system.split("{")[0]), system  # the prose before the JSON format
        assert human.startswith("<image>\n任务：把红鞋加入购物车")
        assert "历史操作" in human
        if j["mode"] == "reason":
            thought = from_gui_libra(gpt(s), W, H)[1]
            assert thought.startswith("观察：") and is_chinese(thought)


def test_left_out_steps_and_trajectories_are_counted():
    traj, steps = trajectory("zh")
    cots = {s.index: cot(s, "zh") for s in steps}
    del cots[1]  # no CoT
    cots[3] = cot(
        steps[2], "zh", observation="The page lists red shoes", reflection="ok", plan="swipe left"
    )  # English thought in a zh task
    cots[4] = cot(steps[3], "zh", parsed=False)
    cots[5] = cot(
        steps[4], "zh", answer={"action_type": "Click", "point_2d": [1, 1], "value": "None"}
    )  # disagrees with the recording
    align = {0: AlignmentResult(0.1, 10, None, None, False, "match_rate 0.10 < 0.3")}
    skipped: list[dict] = []
    out = build_samples(
        traj, steps, cots, {}, alignment=align, language="zh", require_chinese_thought=True, skipped=skipped
    )
    assert out == []
    assert {s["index"]: s["reason"] for s in skipped} == {
        0: "misaligned",
        1: "missing_cot",
        3: "thought_not_chinese",
        4: "cot_unparsed",
        5: "cot_answer_mismatch",
    }
    # Whole trajectories: another language, or outside 3-50 steps.
    for lang, n, reason in (("en", 6, "other_language"), ("zh", 2, "too_short"), ("zh", 51, "too_long")):
        traj, steps = trajectory(lang, num_steps=n)
        skipped = []
        assert (
            build_samples(
                traj, steps[:n], {s.index: cot(s, lang) for s in steps}, {}, language="zh", skipped=skipped
            )
            == []
        )
        assert [(s["index"], s["reason"]) for s in skipped] == [(None, reason)]


def test_checked_alignment_is_carried_and_checks_report_it():
    traj, steps = trajectory()
    cots = {s.index: cot(s, "en") for s in steps}
    align = {s.index: AlignmentResult(0.8, 10, (0.4, 0.25, 0.6, 0.35), True, True, None) for s in steps}
    images = {s.index: png(s.index) for s in steps}
    samples = build_samples(traj, steps, cots, images, alignment=align, recorded=recorded(steps))
    assert samples[0]["json"]["alignment"] == {
        "match_rate": 0.8,
        "box": [0.4, 0.25, 0.6, 0.35],
        "point_in_box": True,
        "checked": True,
    }
    stats = summarise(samples)
    assert stats["alignment"] == {"checked_steps": 5, "point_in_box": 5, "mean_match_rate": 0.8}
    checks = set_checks(stats, language="en", skipped_steps={"misaligned": 5})
    assert checks["alignment_rate"]["passed"] and "0.500" in checks["alignment_rate"]["detail"]
    assert not set_checks(stats, skipped_steps={"misaligned": 6})["alignment_rate"]["passed"]
    assert not set_checks(stats, language="zh")["language"]["passed"]
    # An unbalanced mix fails its check.
    assert not set_checks(summarise(samples[:-1]))["mix_1_to_1"]["passed"]


@pytest.mark.parametrize("mode", ["reason", "direct"])
def test_system_prompt_rejects_unknown_language(mode):
    with pytest.raises(ValueError, match="language"):
        system_prompt(mode, "fr")
