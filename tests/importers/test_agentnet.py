"""OpenCUA AgentNet: the raw CoT-input JSONL and AgentNetBench task files (real)."""

from __future__ import annotations

import hashlib
import json

import pytest

from trajforge.importers import import_path
from trajforge.importers.agentnet import parse_code

from .conftest import SAMPLES, by_episode, libra, load, quarantined, with_bad_file

RAW = SAMPLES / "opencua_agentnet" / "cot_raw_example" / "raw_example.jsonl"
BENCH = SAMPLES / "opencua_agentnet" / "agentnetbench_sample_data"


def test_raw_trajectory_needs_a_stated_size_then_imports(store):
    # The raw format has normalised coordinates and no size; its images are not in the samples.
    first = import_path("agentnet", RAW, store)
    assert (first.imported, first.quarantined) == (0, 1)
    assert "screen_size" in quarantined(first)[0]["reason"]
    result = import_path("agentnet", RAW, store, screen_size=(1920, 1080))
    assert (result.imported, result.steps) == (1, 15)
    trajs, steps = load(store, "agentnet")
    traj = by_episode(trajs, "agentnet", "task_example_0")
    assert traj.outcome == "success"  # computer.terminate(status='success')
    st = steps[traj.trajectory_id]
    kinds = [s.action.type.value for s in st]
    assert kinds[:6] == ["tap", "right_click", "tap", "swipe", "tap", "scroll"]
    assert kinds[-1] == "done" and kinds.count("tap") == 11
    assert (st[0].action.x, st[0].action.y) == (0.9722, 0.9701)
    # pyautogui.rightClick(x=0.9553, y=0.5117): its own action, not a long press
    assert (st[1].action.x, st[1].action.y) == (0.9553, 0.5117)
    # moveTo(0.4546, 0.2682) + dragTo(0.4107, 0.2773) -> one swipe
    a = st[3].action
    assert (a.x, a.y, a.x2, a.y2) == (0.4546, 0.2682, 0.4107, 0.2773)
    # moveTo(0.396, 0.7839) + scroll(-3) -> scroll down there
    assert (st[5].action.direction, st[5].action.x, st[5].action.y) == ("down", 0.396, 0.7839)
    assert st[5].action.amount == 3  # wheel notches
    # 1920x1080 px: 0.9722*1920 = 1866.6 -> 1867, 0.9701*1080 = 1047.7 -> 1048
    assert libra(st[0])["point_2d"] == [1867, 1048]


def test_agentnetbench_tasks(store):
    result = import_path("agentnet", BENCH, store)
    assert (result.imported, result.steps, result.quarantined) == (2, 17, 0)
    trajs, steps = load(store, "agentnet")
    goodreads = by_episode(trajs, "agentnet", "s_df0fd37049f470c2")
    # meta_info.screen_resolution; step_num starts at 2 (steps dropped): outcome unknown
    assert (goodreads.device.viewport_width, goodreads.device.viewport_height) == (1920, 1080)
    assert goodreads.outcome == "unknown" and goodreads.device.name == "desktop-windows"
    st = steps[goodreads.trajectory_id]
    png = BENCH / "images" / "s_df0fd37049f470c2_2.png"
    assert st[0].screenshot == hashlib.sha256(png.read_bytes()).hexdigest()
    assert (st[0].width, st[0].height) == (1280, 720)  # the screenshot is smaller than the screen
    # click(x=0.3271, y=0.2694) on the 1280x720 image: 418.7 -> 419, 193.97 -> 194
    assert libra(st[0])["point_2d"] == [419, 194]
    assert st[1].action.text == "george orwell"
    overleaf = steps[by_episode(trajs, "agentnet", "s_5473959e0f6e21f7").trajectory_id]
    # No meta_info: the size is abs_bbox / rel_bbox = 12.91/0.010652 = 1212, 15.68/0.020686 = 758.
    assert (overleaf[0].width, overleaf[0].height) == (1212, 758)
    assert [s.action.text for s in overleaf if s.action.type.value == "key"] == [
        "ctrl+c",
        "ctrl+v",
        "enter",
        "ctrl+c",
        "ctrl+v",
    ]
    # rel_bbox [x, y, w, h] -> (x, y, x + w, y + h)
    assert overleaf[0].target.bbox == pytest.approx((0.3211716, 0.4659631, 0.3318234, 0.4866491))


def test_several_calls_in_one_step():
    actions, status = parse_code("pyautogui.click(x=0.1, y=0.2)\npyautogui.write(message='hi')")
    assert [a.type.value for a in actions] == ["tap", "type"] and status is None
    actions, _ = parse_code(
        "pyautogui.moveTo(x=0.5, y=0.5)\npyautogui.mouseDown()\n"
        "pyautogui.moveTo(x=0.6, y=0.7)\npyautogui.mouseUp()"
    )
    assert [(a.type.value, a.x, a.y, a.x2, a.y2) for a in actions] == [("swipe", 0.5, 0.5, 0.6, 0.7)]


def _line(code: str) -> str:
    rec = json.loads(RAW.read_text())
    rec["task_id"] = "bad"
    rec["traj"][4]["value"]["code"] = code
    return json.dumps(rec)


@pytest.mark.parametrize(
    "content, field",
    [
        (RAW.read_text()[:300], "json"),  # truncated
        (json.dumps({"task_id": "bad", "traj": []}), "instruction"),  # missing field
        (_line("pyautogui.click(x='0.2', y=0.3)"), "code.click.x"),  # wrong type
        (_line("pyautogui.click(x=float('nan'), y=0.3)"), "code"),  # NaN (not a literal)
        (_line("pyautogui.click(x=1e999, y=0.3)"), "code.click.x"),  # inf
        (_line("pyautogui.launchRocket()"), "code"),  # unknown call
    ],
)
def test_agentnet_bad_records(tmp_path, store, content, field):
    folder = with_bad_file(tmp_path, RAW, "bad.jsonl", content + "\n")
    result = import_path("agentnet", folder, store, screen_size=(1920, 1080))
    assert (result.imported, result.quarantined) == (1, 1)
    [q] = quarantined(result)
    assert q["source"].endswith("bad.jsonl") and q["record"] and field in q["field"], q
