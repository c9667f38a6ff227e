"""GUIAct: quoted native web-multi records, OS-Atlas lines, prediction files, built records."""

from __future__ import annotations

import json

import pytest

from trajforge.importers import import_path

from .conftest import SAMPLES, by_episode, libra, load, quarantined, with_bad_file

QUOTED = SAMPLES / "guiact" / "quoted_native_web_multi_records.json"


def test_guiact_samples(store):
    result = import_path("guiact", SAMPLES / "guiact", store, screen_size=(1280, 720))
    # 2 quoted records, 3 OS-Atlas web-single steps, 1 smartphone episode (3 steps);
    # the 5 results-file entries are model predictions: quarantined, not imported.
    assert (result.imported, result.steps, result.quarantined) == (6, 8, 5)
    assert {q["field"] for q in quarantined(result)} == {"pred"}
    trajs, steps = load(store, "guiact")
    rec = by_episode(trajs, "guiact", "record_02472")  # uid_record_02472_step_04
    assert (rec.platform, rec.task.language) == ("web", "zh")
    [answer] = steps[rec.trajectory_id]
    # image_size of the record, not the stated screen_size
    assert (answer.action.type.value, answer.width, answer.height) == ("answer", 1280, 598)
    assert answer.action.text.startswith("第一条为了营造")
    assert libra(answer)["action_type"] == "Answer"
    phone = by_episode(trajs, "guiact", "record_10270193012375700035")
    assert phone.platform == "android"
    # CLICK <point>[[503,981]]</point> -> (0.503, 0.981)
    first = steps[phone.trajectory_id][0]
    assert (first.action.x, first.action.y) == (0.503, 0.981)
    assert libra(first, "grid1000")["point_2d"] == [503, 981]


def native(**action) -> list[dict]:
    """Records in the native schema (convert_to_sft_instructions.py); positions as GUIAct writes them."""
    return [
        {
            "uid": "uid_record_00001_step_01",
            "image_id": "uid_record_00001_step_01",
            "image_size": {"width": 1280, "height": 598},
            "question": "Find the book",
            "actions_history": "step 0: click",
            "logs": "",
            "thoughts": "",
            "actions_label": [
                {
                    "name": "click",
                    "element": {
                        "related": "<box>0.1, 0.2, 0.3, 0.4</box>",
                        "absolute": "<box>128, 120, 384, 239</box>",
                    },
                },
                {"name": "input", "text": "mockingbird"},
                {"name": "enter"},
            ],
        },
        {
            "uid": "uid_record_00001_step_00",
            "image_id": "uid_record_00001_step_00",
            "image_size": {"width": 1280, "height": 598},
            "question": "Find the book",
            "actions_history": "",
            "logs": "",
            "thoughts": "",
            "actions_label": [{"name": "scroll", "scroll": {"related": {"down": 0.5, "right": 0.0}}}],
        },
        {
            "uid": "uid_episode_42_step_00",
            "image_id": "uid_episode_42_step_00",
            "image_size": {"width": 1080, "height": 2400},
            "question": "What is the capital of Brazil?",
            "actions_history": [],
            "logs": [],
            "thoughts": "",
            "actions_label": {"name": "tap", "point": {"related": "<point>0.503, 0.981</point>", **action}},
        },
    ]


def test_native_records(tmp_path, store):
    (tmp_path / "data.json").write_text(json.dumps(native()))
    result = import_path("guiact", tmp_path, store)
    assert (result.imported, result.steps, result.quarantined) == (2, 5, 0)
    trajs, steps = load(store, "guiact")
    web = steps[by_episode(trajs, "guiact", "record_00001").trajectory_id]
    # step_00 (scroll down) sorts before step_01, whose 3 actions share its screenshot
    assert [s.action.type.value for s in web] == ["scroll", "tap", "type", "key"]
    # element box (0.1, 0.2, 0.3, 0.4) -> centre (0.2, 0.3) -> 1280x598 px (256, 179.4 -> 179)
    assert (web[1].action.x, web[1].action.y) == pytest.approx((0.2, 0.3))
    assert web[1].target.bbox == (0.1, 0.2, 0.3, 0.4)
    assert libra(web[1])["point_2d"] == [256, 179]
    phone = steps[by_episode(trajs, "guiact", "episode_42").trajectory_id]
    # a single dict for actions_label; related point 0.503, 0.981 -> 1080x2400 px (543, 2354)
    assert libra(phone[0])["point_2d"] == [543, 2354]


@pytest.mark.parametrize(
    "records, field",
    [
        (json.dumps(native())[:300], "json"),  # truncated
        (json.dumps([{k: v for k, v in native()[2].items() if k != "question"}]), "question"),
        (json.dumps([{**native()[2], "actions_label": "tap"}]), "actions_label"),  # wrong type
        (json.dumps(native(related="<point>nan, 0.981</point>")[2:]), "point.related"),  # NaN
        (json.dumps([{**native()[2], "actions_label": [{"name": "shake"}]}]), "name"),  # unknown
    ],
)
def test_guiact_bad_records(tmp_path, store, records, field):
    folder = with_bad_file(tmp_path, QUOTED, "bad.json", records)
    result = import_path("guiact", folder, store)
    assert (result.imported, result.quarantined) == (2, 1)
    [q] = quarantined(result)
    assert q["source"].endswith("bad.json") and q["record"] and field in q["field"], q
