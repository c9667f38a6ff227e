"""VLM CoT: the prompt (fixed system text, data quoted, EN/ZH), lenient parsing, the
recorded action always in the answer, batching; StepCoT rows; the language check."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from filters.judge import DATA_CLOSE, DATA_OPEN
from synthesis.cot import StepItem, VLMCoT, generate_cot, parse_cot
from synthesis.language import cjk_ratio, is_chinese
from synthesis.prompts import SYSTEM_COT, history_text
from synthesis.step_cot import COT_SCHEMA, StepCoT
from tests.vlm.helpers import screenshot

from . import INJECTION, ScriptedBackend, make_traj, user_text

GOOD_JSON = (
    'Sure.\n{"observation": "The product page is open.", "reflection": "First step.", '
    '"plan": "Add it to the cart.", "action": {"description": "Tap Add to cart", "type": "Click", '
    '"target": "Add to cart", "value": "None", "point_2d": [1, 1]}}'
)


@pytest.mark.parametrize(
    "raw, expected",
    [
        (GOOD_JSON, ("The product page is open.", "First step.", "Add it to the cart.", "Tap Add to cart")),
        (
            '{"观察": "商品页已打开", "反思": "这是第一步", "计划": "加入购物车"}',
            ("商品页已打开", "这是第一步", "加入购物车", ""),
        ),
        (
            "**Observation:** a cart page\n**Reflection**: the tap worked\nPlan: pay now\nAction: tap Pay",
            ("a cart page", "the tap worked", "pay now", ""),
        ),
        (
            "观察：页面显示购物车\n反思：上一步生效了\n计划：去结算\n<answer>{}</answer>",
            ("页面显示购物车", "上一步生效了", "去结算", ""),
        ),
        ("<observation>o</observation><reflection>r</reflection><plan>p</plan>", ("o", "r", "p", "")),
        # A JSON object missing a part, with the sections written out after it.
        ('{"observation": "x"}\nObservation: a\nReflection: b\nPlan: c', ("a", "b", "c", "")),
    ],
)
def test_parse_well_formed(raw, expected):
    p = parse_cot(raw)
    assert p.parsed and (p.observation, p.reflection, p.plan, p.description) == expected


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "I cannot help with that.",
        '{"observation": "o", "plan": "p"}',
        '{"observation": "o", "reflection": ',
        "Observation: only this",
    ],
)
def test_parse_malformed_is_not_parsed(raw):
    assert not parse_cot(raw).parsed


def test_vlm_cot_prompt_answer_and_batching():
    en_traj, en_steps = make_traj("en")
    zh_traj, zh_steps = make_traj("zh", tid="t-zh")
    img = screenshot(80, 60, "s")
    items = [StepItem(en_traj, en_steps, k, img) for k in range(5)] + [StepItem(zh_traj, zh_steps, 2, b"")]

    def answer(req, _):
        key = req.key
        if key == "t-en#1":
            return "garbage <|im_end|>"
        return GOOD_JSON.replace("Tap Add to cart", f"described {key}")

    backend = ScriptedBackend(answer)
    cots = VLMCoT(backend, batch_size=4, max_new_tokens=99).generate_many(items)
    assert [len(c["requests"]) for c in backend.calls] == [4, 2]
    assert all(c["max_new_tokens"] == 99 and c["n"] == 1 and c["temperature"] == 0.0 for c in backend.calls)
    assert [(c.trajectory_id, c.index) for c in cots] == [(i.step.trajectory_id, i.step.index) for i in items]
    assert all(c.backend == "scripted-vlm" for c in cots)

    # The answer's type, value and point are the recording's, whatever the model wrote.
    sel = cots[2]
    assert sel.parsed and sel.answer == {
        "action_description": "described t-en#2",
        "action_type": "Select",
        "value": "L",
        "point_2d": [80, 175],
    }
    assert sel.thought == (
        "Observation: The product page is open.\nReflection: First step.\nPlan: Add it to the cart."
    )
    # Unparseable: counted as parsed=False, the raw text kept, no invented thought.
    bad = cots[1]
    assert not bad.parsed and bad.raw == "garbage <|im_end|>"
    assert (bad.observation, bad.reflection, bad.plan) == ("", "", "")
    assert (
        bad.answer["point_2d"] == [90, 220]
        and bad.answer["action_description"] == 'Tap the button "Add to cart"'
    )

    # The prompt: fixed system text, page text quoted as data between the markers.
    reqs = backend.calls[0]["requests"]
    first = reqs[0]
    assert first.messages[0] == {"role": "system", "content": SYSTEM_COT["en"]}
    text = user_text(first)
    assert text.count(DATA_OPEN) == 1 and text.count(DATA_CLOSE) == 1
    assert INJECTION not in text and "<|im_end|>" not in text
    block = text[text.index(DATA_OPEN) + len(DATA_OPEN) : text.index(DATA_CLOSE)]
    data = json.loads(block)
    assert INJECTION in data["page_text"]  # escaped, and still the same text as data
    assert data["task"] == "Add the blue shirt in size L to the cart" and data["history"] == []
    assert data["action_taken"]["type"] == "Click" and data["action_taken"]["point_2d"] == [90, 220]
    assert data["action_taken"]["target"] == 'the button "Add to cart"'
    assert [p["type"] for p in first.messages[1]["content"]] == ["text", "text", "image", "text"]
    assert first.messages[1]["content"][2]["image"] == img
    later = json.loads(user_text(reqs[3]).split(DATA_OPEN)[1].split(DATA_CLOSE)[0])
    assert later["history"] == history_text(en_steps, 3, "en")
    # A zh task is prompted in Chinese; without a screenshot the request is text only.
    zh_req = backend.calls[1]["requests"][1]
    assert zh_req.messages[0]["content"] == SYSTEM_COT["zh"] and is_chinese(SYSTEM_COT["zh"])
    assert "请为这一步写出思考过程" in user_text(zh_req)
    assert all(p["type"] == "text" for p in zh_req.messages[1]["content"])


def test_generate_cot_streams_with_a_backend_and_needs_images():
    traj, steps = make_traj("en")
    backend = ScriptedBackend(lambda r, _: GOOD_JSON)
    seen = []
    cots = list(
        generate_cot(
            [(traj, steps), (traj, steps[:2])],
            backend,
            batch_size=3,
            load_image=lambda s: seen.append(s.index) or b"\x89PNG\r\n\x1a\nfake",
        )
    )
    assert len(cots) == 7 and [len(c["requests"]) for c in backend.calls] == [3, 3, 1]
    assert seen == [0, 1, 2, 3, 4, 0, 1]
    with pytest.raises(ValueError, match="load_image"):
        list(generate_cot([(traj, steps)], backend))


def test_history_uses_positions_and_rows_round_trip():
    traj, steps = make_traj("zh", tid="gaps", indices=(0, 3, 4, 9, 12))
    assert history_text(steps, 3, "zh") == [
        "第1步：点击“加入购物车”按钮",
        "第2步：点击“加入购物车”按钮",
        "第3步：在“尺码”下拉框中选择“L”",
    ]
    assert history_text(steps, 0, "en") == []
    with pytest.raises(ValueError, match="upto"):
        history_text(steps, 6, "en")
    from synthesis.template_cot import TemplateCoT

    cot = TemplateCoT().generate(traj, steps, 3)
    assert cot.index == 9
    table = pa.Table.from_pylist([cot.to_row()], schema=COT_SCHEMA)
    assert StepCoT.from_row(table.to_pylist()[0]) == cot


def test_is_chinese_by_cjk_share_of_letters():
    assert is_chinese("观察：当前页面是购物车。计划：点击“Checkout”按钮。")
    assert not is_chinese("Observation: the cart shows “加入购物车”. Plan: tap it.")
    assert not is_chinese("") and not is_chinese("12345 !!")
    assert cjk_ratio("点击按钮 OK", ignore_quoted=False) == pytest.approx(4 / 6)
    assert is_chinese("点击按钮 OK", min_ratio=0.6) and not is_chinese("点击按钮 OK", min_ratio=0.7)
    assert not is_chinese("I don't know 好", min_ratio=0.2)  # an apostrophe is not a quote
    with pytest.raises(ValueError):
        is_chinese("好", min_ratio=1.5)
