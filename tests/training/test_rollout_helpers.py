"""The pieces the rollout loops share: the reasoning set's prompt turn by turn
(training/gui_prompt.py) and the RL dataset of environment episodes (training/engines/env_tasks.py)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from schemas.set_prompt import system_prompt
from training.engines.env_tasks import env_task_rows
from training.gui_prompt import GuiPrompt


def reset(language="en"):
    obs = {"screenshot": np.zeros((600, 800, 3), dtype=np.uint8), "instruction": "Add <milk>"}
    info = {
        "profile": {"name": "qwen2.5-vl", "frame": [812, 588], "coords": "pixels"},
        "task": {"language": language, "task_id": "t"},
    }
    return obs, info


def test_the_prompt_is_the_sets_at_the_frame_with_the_executed_actions():
    obs, info = reset()
    prompt = GuiPrompt.from_reset(obs, info)
    assert prompt.system() == system_prompt("direct", "en", "pixels")
    image, parts = prompt.observation_parts(obs["screenshot"])
    assert image.size == (812, 588) and parts[0] == {"type": "image", "image": image}
    assert (
        parts[1]["text"] == "Task: Add \\u003cmilk\\u003e\nScreenshot: 812x588 pixels\nPrevious actions: none"
    )
    # A step whose answer did not parse, or that the guard refused, ran nothing: no line.
    assert prompt.record({"executed": False, "action": None, "format_error": "no JSON"}) is None
    tap = {"type": "tap", "x": 0.5, "y": 0.25}
    line = prompt.record(
        {
            "executed": True,
            "action": tap,
            "target": {"role": "button", "name": "Add", "bbox": [380, 130, 420, 170]},
        }
    )
    assert line == 'Step 1: tap the button "Add"'
    assert (
        prompt.record({"executed": True, "action": tap, "target": None}) == "Step 2: tap at (406, 147)"
    )  # frame px
    assert prompt.human_text().endswith(
        'Previous actions:\nStep 1: tap the button "Add"\nStep 2: tap at (406, 147)'
    )


def test_the_prompt_speaks_the_tasks_language():
    obs, info = reset("zh")
    prompt = GuiPrompt.from_reset(obs, info, mode="reason")
    assert prompt.system() == system_prompt("reason", "zh", "pixels")
    prompt.record({"executed": True, "action": {"type": "wait"}})
    assert prompt.human_text().startswith("任务：") and prompt.history == ["第1步：等待页面加载"]
    with pytest.raises(ValueError, match="language"):
        GuiPrompt.from_reset(obs, info, language="fr")


def test_env_task_rows_cover_every_task_and_read_back(tmp_path):
    envs = [{"name": "tw", "tasks": ["a", "b"]}, {"name": "tiny", "tasks": []}]
    rows = env_task_rows(envs, episodes=2, seed=5)
    assert [(r["extra_info"]["env"], r["extra_info"]["task_id"], r["extra_info"]["seed"]) for r in rows] == [
        ("tw", "a", 5), ("tw", "a", 6), ("tw", "b", 5), ("tw", "b", 6), ("tiny", None, 5), ("tiny", None, 6),
    ]  # fmt: skip
    assert [r["extra_info"]["index"] for r in rows] == list(range(6))
    assert {r["agent_name"] for r in rows} == {"trajforge_gui"} and rows[0]["data_source"] == "trajforge/tw"
    assert env_task_rows(envs, only=["tiny"])[0]["extra_info"]["env"] == "tiny"
    with pytest.raises(ValueError, match="serves no"):
        env_task_rows(envs, only=["nope"])
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "t.parquet")
    back = pq.read_table(tmp_path / "t.parquet").to_pylist()
    assert back[4]["extra_info"] == {"index": 4, "env": "tiny", "task_id": None, "seed": 5}
    assert back[0]["prompt"][0]["role"] == "user"
