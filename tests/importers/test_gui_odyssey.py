"""GUI-Odyssey: OS-Atlas's converted steps (real) and a native episode built to the spec."""

from __future__ import annotations

import json

import pytest

from trajforge.importers import import_path

from .conftest import SAMPLES, by_episode, libra, load, quarantined, with_bad_file

ATLAS = SAMPLES / "gui_odyssey" / "derived_osatlas_gui_odyssey_test.jsonl"


def test_osatlas_steps_of_one_episode(store):
    result = import_path("gui_odyssey", ATLAS, store, screen_size=(1080, 2400))
    assert (result.imported, result.steps, result.quarantined) == (1, 3, 0)
    trajs, steps = load(store, "gui_odyssey")
    traj = by_episode(trajs, "gui_odyssey", "9187342439395422")  # from <ep>_<step>.png
    st = steps[traj.trajectory_id]
    # CLICK <point>[[683,321]]</point>, [[749,810]], [[348,232]] on the 0-1000 grid.
    assert [(s.action.type.value, s.action.x, s.action.y) for s in st] == [
        ("tap", 0.683, 0.321),
        ("tap", 0.749, 0.810),
        ("tap", 0.348, 0.232),
    ]
    assert [libra(s, "grid1000")["point_2d"] for s in st] == [[683, 321], [749, 810], [348, 232]]
    assert libra(st[0])["point_2d"] == [738, 770]  # 0.683*1080 = 737.6, 0.321*2400 = 770.4


def native(**step_change) -> dict:
    """A native episode as introduction.md and format_converter.py describe it (no record exists)."""
    steps = [
        {
            "step": 0,
            "screenshot": "ep1_0.png",
            "action": "CLICK",
            "info": [[683, 321], [683, 321]],
            "sam2_bbox": [600, 300, 760, 340],
            "low_level_instruction": "open the app",
        },
        {"step": 1, "screenshot": "ep1_1.png", "action": "TEXT", "info": "Todoist", "sam2_bbox": []},
        {"step": 2, "screenshot": "ep1_2.png", "action": "SCROLL", "info": [[500, 800], [500, 200]]},
        {"step": 3, "screenshot": "ep1_3.png", "action": "CLICK", "info": "KEY_HOME"},
        {"step": 4, "screenshot": "ep1_4.png", "action": "COMPLETE", "info": "", "ps": "done"},
    ]
    steps[0].update(step_change)
    return {
        "episode_id": "ep1",
        "device_info": {"w": 1080, "h": 2400, "device_name": "Pixel 7 Pro"},
        "task_info": {"instruction": "Share a note", "app": ["Todoist", "Gmail"]},
        "step_length": 5,
        "steps": steps,
    }


def test_native_episode(tmp_path, store):
    (tmp_path / "ep1.json").write_text(json.dumps(native()))
    result = import_path("gui_odyssey", tmp_path, store)
    assert (result.imported, result.steps) == (1, 5)
    trajs, steps = load(store, "gui_odyssey")
    [traj] = trajs.values()
    assert (traj.device.viewport_width, traj.device.viewport_height, traj.app) == (
        1080,
        2400,
        "Todoist, Gmail",
    )
    st = steps[traj.trajectory_id]
    assert [s.action.type.value for s in st] == ["tap", "type", "swipe", "home", "done"]
    # info[0] = [683, 321] -> (0.683, 0.321); sam2_bbox /1000; TEXT (not TYPE) carries the text.
    assert (st[0].action.x, st[0].action.y) == (0.683, 0.321)
    assert st[0].target.bbox == (0.6, 0.3, 0.76, 0.34)
    assert st[1].action.text == "Todoist"
    assert (st[2].action.y, st[2].action.y2) == (0.8, 0.2)
    assert libra(st[0])["point_2d"] == [738, 770]


@pytest.mark.parametrize(
    "content, field",
    [
        (json.dumps(native())[:150], "json"),  # truncated
        (json.dumps({**native(), "task_info": {}}), "task_info.instruction"),  # missing field
        (json.dumps(native(info=[683, 321])), "steps[0].info"),  # wrong type: a point, not a list of points
        (json.dumps(native(info=[[float("nan"), 321]])), "steps[0].info"),  # NaN
        (json.dumps(native(action="PINCH")), "steps[0].action"),  # unknown action
    ],
)
def test_gui_odyssey_bad_records(tmp_path, store, content, field):
    folder = with_bad_file(tmp_path, ATLAS, "bad.json", content)
    result = import_path("gui_odyssey", folder, store, screen_size=(1080, 2400))
    assert (result.imported, result.quarantined) == (1, 1)
    [q] = quarantined(result)
    assert q["source"].endswith("bad.json") and q["record"] and field in q["field"], q
