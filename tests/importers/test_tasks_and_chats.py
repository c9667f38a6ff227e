"""AndroidWorld's task catalog, OS-Genesis (instructions and training lines), Open-AutoGLM chats."""

from __future__ import annotations

import base64
import hashlib
import json

import pytest

from trajforge.importers import import_path
from trajforge.importers.tasks_table import read_tasks

from .conftest import SAMPLES, libra, load, quarantined, with_bad_file

META = SAMPLES / "android_world" / "task_metadata.sample.json"
GENESIS_PNG = SAMPLES / "os_genesis" / "samples_af1b33be-9107-4e99-8376-01605912487c.png"
CHAT = SAMPLES / "open_autoglm" / "constructed_conversation.json"


def test_android_world_tasks_table(store):
    result = import_path("android_world", SAMPLES / "android_world", store)
    assert (result.imported, result.steps, result.quarantined) == (3, 0, 0)
    rows = {r["template_id"]: r for r in read_tasks(result.tasks_path)}
    assert {k: (r["difficulty"], r["optimal_steps"]) for k, r in rows.items()} == {
        "AudioRecorderRecordAudioWithFileName": ("easy", 10),  # "10" (a string) -> 10
        "ContactsAddContact": ("easy", 5),
        "SimpleCalendarAddOneEvent": ("hard", 17),
    }
    c = rows["ContactsAddContact"]
    assert (c["instruction"], c["app"], c["tags"]) == (
        "Create a new contact for {name}. Their number is {number}.",
        "Contacts",
        ["data_entry", "parameterized"],
    )
    again = import_path("android_world", SAMPLES / "android_world", store)
    assert (again.imported, again.skipped) == (0, 3) and len(read_tasks(result.tasks_path)) == 3


def _meta(**change) -> list[dict]:
    entries = json.loads(META.read_text())
    entries[1].update(change)
    return entries[1:2]


@pytest.mark.parametrize(
    "content, field",
    [
        (META.read_text()[:120], "json"),
        (json.dumps([{k: v for k, v in _meta()[0].items() if k != "difficulty"}]), "difficulty"),
        (json.dumps(_meta(optimal_steps="five")), "optimal_steps"),
        (json.dumps(_meta(tags=[None])), "tags"),
        (json.dumps(_meta(difficulty="extreme")), "difficulty"),
    ],
)
def test_android_world_bad_entries(tmp_path, store, content, field):
    folder = with_bad_file(tmp_path, META, "bad.json", content)
    result = import_path("android_world", folder, store)
    assert (result.imported, result.quarantined) == (3, 1)
    [q] = quarantined(result)
    assert q["source"].endswith("bad.json") and q["field"] == field


def genesis_line(action: dict) -> str:
    """A training line as OS-Genesis' eval code reads it (no released line was available)."""
    return json.dumps(
        {
            "image": GENESIS_PNG.name,
            "conversations": [
                {"from": "human", "value": "<image>\nGoal: Create a new note titled 'Grocery List'."},
                {"from": "gpt", "value": "actions:\n" + json.dumps(action)},
            ],
        }
    )


def test_os_genesis_instructions_and_training_lines(tmp_path, store):
    folder = with_bad_file(
        tmp_path,
        GENESIS_PNG,
        "train.jsonl",
        genesis_line({"action_type": "click", "x": 540, "y": 1200}) + "\n",
    )
    (folder / "aw_instructions.json").write_text(
        (SAMPLES / "os_genesis" / "aw_instructions.first3.json").read_text()
    )
    result = import_path("os_genesis", folder, store)
    assert (result.imported, result.steps, result.quarantined) == (4, 1, 0)  # 1 trajectory + 3 tasks
    tasks = read_tasks(result.tasks_path)
    assert [(t["template_id"], t["episode_id"], t["step_id"]) for t in tasks][0] == (
        "TasksDueOnDate",
        "13f59898-5868-4be3-9c4f-c84ce0d50911",
        7,
    )
    trajs, steps = load(store, "os_genesis")
    [traj] = trajs.values()
    assert traj.task.task_id == "os_genesis:af1b33be-9107-4e99-8376-01605912487c"  # name.split("_")[1]
    [st] = steps[traj.trajectory_id]
    # click (540, 1200) px of the 1080x2400 screenshot -> (0.5, 0.5)
    assert (st.action.type.value, st.action.x, st.action.y, st.width, st.height) == (
        "tap",
        0.5,
        0.5,
        1080,
        2400,
    )
    assert st.screenshot == hashlib.sha256(GENESIS_PNG.read_bytes()).hexdigest()
    assert libra(st)["point_2d"] == [540, 1200]


@pytest.mark.parametrize(
    "content, field",
    [
        (genesis_line({"action_type": "click", "x": 540, "y": 1200})[:80], "json"),
        (json.dumps({"image": GENESIS_PNG.name}), "conversations"),
        (genesis_line({"action_type": "click", "x": "540", "y": 1200}), "action.x"),
        (genesis_line({"action_type": "click", "x": float("nan"), "y": 1200}), "action.x"),
        (genesis_line({"action_type": "teleport"}), "action.action_type"),
    ],
)
def test_os_genesis_bad_lines(tmp_path, store, content, field):
    folder = with_bad_file(
        tmp_path,
        GENESIS_PNG,
        "train.jsonl",
        genesis_line({"action_type": "navigate_back"}) + "\n" + content + "\n",
    )
    result = import_path("os_genesis", folder, store)
    assert (result.imported, result.quarantined) == (1, 1)
    [q] = quarantined(result)
    assert q["record"] == "line 2" and field in q["field"], q


def test_autoglm_conversation(store):
    result = import_path("autoglm", SAMPLES / "open_autoglm", store)
    # The truncated sample's image is not valid base64: quarantined, naming the message.
    assert (result.imported, result.steps, result.quarantined) == (1, 3, 1)
    assert quarantined(result)[0]["field"] == "messages[1].image_url"
    trajs, steps = load(store, "autoglm")
    [traj] = trajs.values()
    assert (traj.task.instruction, traj.outcome) == ("Open the chrome browser.", "success")
    st = steps[traj.trajectory_id]
    assert [s.action.type.value for s in st] == ["open_app", "tap", "done"]
    assert st[0].action.text == "京东" and st[0].thought.startswith("用户想要比较")
    # element=[500,100] on the 0-999 grid -> (0.5, 0.1); 270x600 px -> (135, 60)
    assert (st[1].action.x, st[1].action.y) == (0.5, 0.1)
    assert libra(st[1])["point_2d"] == [135, 60]
    assert [(s.width, s.height) for s in st] == [(270, 600)] * 3  # step 3 has no image


def test_autoglm_data_url_and_bad_action(tmp_path, store):
    png = (SAMPLES / "open_autoglm" / "sample_messages_en_screenshot.270x600.png").read_bytes()
    conv = json.loads(CHAT.read_text())
    conv["messages"][1]["content"][0]["image_url"]["url"] = (
        "data:image/png;base64," + base64.b64encode(png).decode()
    )
    bad = json.loads(json.dumps(conv))
    bad["id"] = "bad"
    bad["messages"][4]["content"] = '<answer>do(action="Pinch", element=[1,2])</answer>'
    (tmp_path / "chats.jsonl").write_text(json.dumps(conv) + "\n" + json.dumps(bad) + "\n")
    result = import_path("autoglm", tmp_path / "chats.jsonl", store)
    assert (result.imported, result.quarantined) == (1, 1)
    assert quarantined(result)[0]["field"] == "messages[4].action"
    [st] = load(store, "autoglm")[1].values()
    assert st[0].screenshot == hashlib.sha256(png).hexdigest()
