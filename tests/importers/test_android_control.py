"""AndroidControl: UI-S1's converted episodes, OS-Atlas lines, and the native action JSON."""

from __future__ import annotations

import json

import pytest

from trajforge.importers import import_path

from .conftest import SAMPLES, by_episode, libra, load, quarantined, with_bad_file

TRAIN = SAMPLES / "android_control" / "derived_uis1_android_control_train_example.first2.jsonl"
# AndroidControl stores a size per screenshot and UI-S1 drops it: the test states one (the
# coordinates in these lines reach y=2337, so a 1080x2400 phone).
SCREEN = (1080, 2400)


def test_android_control_samples(store):
    result = import_path("android_control", SAMPLES / "android_control", store, screen_size=SCREEN)
    assert (result.imported, result.steps, result.quarantined) == (4, 23, 0)
    trajs, steps = load(store, "android_control")
    zoho = steps[by_episode(trajs, "android_control", "0").trajectory_id]
    assert [s.action.type.value for s in zoho] == ["open_app", "wait", "tap", "done"]
    assert (zoho[0].action.text, zoho[1].action.duration_ms, zoho[3].action.text) == (
        "Zoho Meeting",
        2000,
        "success",
    )
    # click [540.0, 389.835] px -> 540/1080 = 0.5, 389.835/2400 = 0.16243;
    # bbox [360, 327, 695, 466] -> (0.33333, 0.13625, 0.64352, 0.19417).
    tap = zoho[2]
    assert (tap.action.x, tap.action.y) == pytest.approx((0.5, 0.1624313))
    assert tap.target.bbox == pytest.approx((360 / 1080, 327 / 2400, 695 / 1080, 466 / 2400))
    assert libra(tap)["point_2d"] == [540, 390]  # 389.835 -> 390
    assert tap.screenshot == "" and (tap.width, tap.height) == SCREEN
    # swipe [540, 600] -> [540, 1800]: (0.5, 0.25) -> (0.5, 0.75); GUI-Libra: start px, "down".
    swipe = steps[by_episode(trajs, "android_control", "20").trajectory_id][3]
    assert (swipe.action.x, swipe.action.y, swipe.action.x2, swipe.action.y2) == (0.5, 0.25, 0.5, 0.75)
    assert (libra(swipe)["point_2d"], libra(swipe)["value"]) == ([540, 600], "down")
    # The evaluation line has no episode_id: it comes from the screenshot name 8193_0.png.
    ev = steps[by_episode(trajs, "android_control", "8193").trajectory_id]
    assert len(ev) == 11 and ev[0].action.type.value == "back"
    assert ev[0].action.description == "go back"
    # OS-Atlas line: LONG_PRESS <point>[[108,272]]</point> on the 0-1000 grid -> (0.108, 0.272).
    atlas = steps[by_episode(trajs, "android_control", "episode_140").trajectory_id]
    assert [s.action.type.value for s in atlas] == ["open_app", "long_press", "tap"]
    assert (atlas[1].action.x, atlas[1].action.y) == pytest.approx((0.108, 0.272))
    assert libra(atlas[1], "grid1000")["point_2d"] == [108, 272]
    assert libra(atlas[1])["point_2d"] == [117, 653]  # 0.108*1080 = 116.6, 0.272*2400 = 652.8


def test_native_episode_json(tmp_path, store):
    """The TFRecord's fields dumped to JSON: actions are JSON strings, pixels of each screenshot."""
    ep = {
        "episode_id": 7,
        "goal": "Open Zoho Meeting",
        "screenshot_widths": [1080, 1080, 1080],
        "screenshot_heights": [2400, 2400, 2400],
        "step_instructions": ["open", "tap"],
        "actions": [
            json.dumps({"action_type": "open_app", "app_name": "Zoho Meeting"}),
            json.dumps({"action_type": "click", "x": 270, "y": 600}),
        ],
    }
    (tmp_path / "ep.json").write_text(json.dumps(ep))
    result = import_path("android_control", tmp_path / "ep.json", store)
    assert (result.imported, result.steps) == (1, 2)
    _, steps = load(store, "android_control")
    [st] = steps.values()
    # click (270, 600) px of 1080x2400 -> (0.25, 0.25)
    assert (st[1].action.type.value, st[1].action.x, st[1].action.y) == ("tap", 0.25, 0.25)


def _line(**change) -> str:
    ep = json.loads(TRAIN.read_text().splitlines()[0])
    ep["steps"][2]["action_content"].update(change)
    return json.dumps(ep)


@pytest.mark.parametrize(
    "content, field",
    [
        (TRAIN.read_text().splitlines()[0][:200], "json"),  # truncated line
        (json.dumps({"steps": []}), "goal"),  # missing field
        (_line(coordinate="540,389"), "coordinate"),  # wrong type
        (_line(coordinate=[float("nan"), 389.0]), "coordinate"),  # NaN (json.dumps writes NaN)
        (_line(action="fling"), "action"),  # unknown action
    ],
)
def test_android_control_bad_records(tmp_path, store, content, field):
    folder = with_bad_file(tmp_path, TRAIN, "bad.jsonl", content + "\n")
    result = import_path("android_control", folder, store, screen_size=SCREEN)
    assert (result.imported, result.quarantined) == (2, 1)
    [q] = quarantined(result)
    assert q["source"].endswith("bad.jsonl") and q["record"] and field in q["field"], q
