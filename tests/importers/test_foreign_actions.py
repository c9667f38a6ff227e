"""What foreign data needs: canonical key names, right clicks, scroll amounts, and
AgentNetBench's ground truth (real records from /work/shared/samples)."""

from __future__ import annotations

import json

import pytest

from schemas.actions import SCROLL_NOTCH_PX, ActionType
from schemas.errors import SchemaError
from schemas.keys import canonical_key
from trajforge.importers import import_path
from trajforge.importers.agentnet import parse_code, parse_ground_truth
from trajforge.importers.guiact import _action as guiact_action

from .conftest import SAMPLES, by_episode, libra, load

BENCH = SAMPLES / "opencua_agentnet" / "agentnetbench_sample_data"
OVERLEAF, GOODREADS = "s_5473959e0f6e21f7", "s_df0fd37049f470c2"


def _bench(store):
    result = import_path("agentnet", BENCH, store)
    assert (result.imported, result.quarantined) == (2, 0)
    trajs, steps = load(store, "agentnet")
    return (
        {k: by_episode(trajs, "agentnet", k) for k in (OVERLEAF, GOODREADS)},
        {k: steps[by_episode(trajs, "agentnet", k).trajectory_id] for k in (OVERLEAF, GOODREADS)},
    )


def test_agentnetbench_reads_the_ground_truth_not_the_code(store):
    rec = json.loads((BENCH / f"{OVERLEAF}.json").read_text())
    step5 = next(s for s in rec["steps"] if s["step_num"] == 5)
    # The real record disagrees with itself: the code types a stray quote.
    assert step5["action"].endswith("help me polish this: '\")")
    assert step5["ground_truth_actions"][0]["params"]["text"] == "help me polish this: "
    _, steps = _bench(store)
    typed = [s.action.text for s in steps[OVERLEAF] if s.action.type == ActionType.TYPE]
    assert typed == ["help me polish this: "]
    # The goodreads scroll: moveTo + scroll {position, amount: -3} -> 3 notches down there.
    [scroll] = [s.action for s in steps[GOODREADS] if s.action.type == ActionType.SCROLL]
    assert (scroll.direction, scroll.amount, scroll.x, scroll.y) == ("down", 3, 0.7792, 0.4648)


def test_agentnetbench_keeps_step_numbers_and_alternatives(store):
    trajs, steps = _bench(store)
    overleaf, goodreads = trajs[OVERLEAF].task.params, trajs[GOODREADS].task.params
    assert overleaf["step_nums"] == [1, 2, 3, 5, 6, 7, 8, 9, 10, 11]
    assert len(overleaf["step_nums"]) == len(steps[OVERLEAF])
    assert goodreads["step_nums"] == [2, 3, 4, 6, 7, 9, 10] and "alternative_options" not in goodreads
    rec = json.loads((BENCH / f"{OVERLEAF}.json").read_text())
    step5 = next(s for s in rec["steps"] if s["step_num"] == 5)
    assert overleaf["alternative_options"] == {"5": step5["alternative_options"]}
    # Kept verbatim: the alternative to typing at step 5 is a click in the chat box.
    assert overleaf["alternative_options"]["5"][0][0]["type"] == "click"


def test_agentnetbench_step_without_ground_truth_reads_its_code(tmp_path, store):
    rec = json.loads((BENCH / f"{GOODREADS}.json").read_text())
    for s in rec["steps"]:
        if s["step_num"] == 3:
            del s["ground_truth_actions"]
            s["action"] = "pyautogui.hotkey(keys=['ctrl', 'F'])"
    (tmp_path / "t.json").write_text(json.dumps(rec))
    import_path("agentnet", tmp_path / "t.json", store)
    _, steps = load(store, "agentnet")
    [st] = steps.values()
    assert st[1].action.type == ActionType.KEY and st[1].action.text == "ctrl+f"


def test_ground_truth_errors_name_the_field():
    with pytest.raises(SchemaError) as info:
        parse_ground_truth([{"type": "click", "params": {"position": {"x": 2.0, "y": 0.1}}}])
    assert info.value.field.startswith("ground_truth_actions")
    with pytest.raises(SchemaError) as info:
        parse_ground_truth([{"params": {}}])
    assert info.value.field == "ground_truth_actions[0]"


@pytest.mark.parametrize(
    "code, want",
    [
        ("pyautogui.hotkey(keys=['ctrl', 'F'])", [("key", "ctrl+f")]),
        ("pyautogui.hotkey('shift', 'ctrl', 't')", [("key", "ctrl+shift+t")]),
        ("pyautogui.hotkey('command', 'v')", [("key", "meta+v")]),
        ("pyautogui.hotkey('win')", [("key", "meta")]),
        ("pyautogui.press('Return')", [("key", "enter")]),
        ("pyautogui.press(keys=['enter'])", [("key", "enter")]),
        ("pyautogui.press(['down', 'down', 'enter'])", [("key", "down"), ("key", "down"), ("key", "enter")]),
        ("pyautogui.press('tab', presses=2)", [("key", "tab"), ("key", "tab")]),
        ("pyautogui.press('home')", [("key", "move_home")]),  # the keyboard's Home key
        ("pyautogui.press('esc')", [("key", "escape")]),
        ("pyautogui.press('pagedown')", [("key", "pagedown")]),
        ("pyautogui.rightClick(x=0.5, y=0.25)", [("right_click", None)]),
        ("pyautogui.click(x=0.5, y=0.25, button='right')", [("right_click", None)]),
    ],
)
def test_agentnet_code_keys_and_right_clicks(code, want):
    actions, _ = parse_code(code)
    assert [(a.type.value, a.text) for a in actions] == want
    for a in actions:
        if a.type == ActionType.KEY:
            assert canonical_key(a.text) == a.text
        if a.type == ActionType.RIGHT_CLICK:
            assert (a.x, a.y) == (0.5, 0.25)


@pytest.mark.parametrize(
    "code, want",
    [
        ("pyautogui.scroll(-5)", ("down", 5, None)),
        ("pyautogui.scroll(2.5)", ("up", 2.5, None)),
        ("pyautogui.moveTo(x=0.4, y=0.6)\npyautogui.scroll(-3)", ("down", 3, (0.4, 0.6))),
        ("pyautogui.scroll(-1, x=0.2, y=0.3)", ("down", 1, (0.2, 0.3))),
        ("pyautogui.hscroll(-4)", ("left", 4, None)),
    ],
)
def test_agentnet_scroll_amounts_are_kept(code, want):
    [a], _ = parse_code(code)
    point = None if a.x is None else (a.x, a.y)
    assert (a.direction, a.amount, point) == want


def test_right_click_exports_as_its_own_action(store):
    raw = SAMPLES / "opencua_agentnet" / "cot_raw_example" / "raw_example.jsonl"
    import_path("agentnet", raw, store, screen_size=(1920, 1080))
    _, steps = load(store, "agentnet")
    [st] = steps.values()
    assert st[1].action.type == ActionType.RIGHT_CLICK
    assert libra(st[1])["action_type"] == "RightClick"
    assert libra(st[1])["point_2d"] == [round(0.9553 * 1920), round(0.5117 * 1080)]


def test_guiact_keys_are_canonical_and_scrolls_keep_their_size():
    enter, _, _ = guiact_action({"name": "enter"}, 1280, 720, "a")
    copy, _, _ = guiact_action({"name": "copy"}, 1280, 720, "a")
    assert (enter.text, copy.text) == ("enter", "ctrl+c")
    scroll, _, _ = guiact_action(
        {"name": "scroll", "scroll": {"related": {"down": 0.5, "right": 0}}}, 1280, 720, "a"
    )
    assert (scroll.direction, scroll.amount) == ("down", 0.5 * 720 / SCROLL_NOTCH_PX)
    scroll, _, _ = guiact_action(
        {"name": "scroll", "scroll": {"absolute": {"down": 0, "right": -250}}}, 1280, 720, "a"
    )
    assert (scroll.direction, scroll.amount) == ("left", 2.5)


@pytest.mark.parametrize(
    "fmt, path, kw",
    [
        ("agentnet", BENCH, {}),
        ("aitz", SAMPLES / "aitz", {}),
        ("android_control", SAMPLES / "android_control", {"screen_size": (1080, 2400)}),
        (
            "gui_odyssey",
            SAMPLES / "gui_odyssey" / "derived_osatlas_gui_odyssey_test.jsonl",
            {"screen_size": (1080, 2400)},
        ),
        ("guiact", SAMPLES / "guiact", {"screen_size": (1280, 720)}),
    ],
)
def test_imported_keys_are_canonical(store, fmt, path, kw):
    import_path(fmt, path, store, **kw)
    _, steps = load(store, fmt)
    keys = [s.action.text for st in steps.values() for s in st if s.action.type == ActionType.KEY]
    assert all(canonical_key(k) == k for k in keys), keys
