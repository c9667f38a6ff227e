"""The pieces the rollout loops share: the one prompt builder, turn by turn
(training/gui_prompt.py) and the RL dataset of environment episodes (training/engines/env_tasks.py)."""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from schemas.actions import Action
from schemas.model_profiles import model_profile
from schemas.records import Element, Step
from schemas.resolution import resize_image
from schemas.set_prompt import system_prompt
from synthesis.prompts import executed_history
from training.agent import TextAgent
from training.engines.env_tasks import env_task_rows
from training.gui_prompt import GuiPrompt, PromptSettings
from trajforge.envs.observations import element_info


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


def _recorded(index, action, target=None, guard=None):
    return Step(
        trajectory_id="t", index=index, screenshot="", width=800, height=600,
        action=action, target=target, guard=guard,
    )  # fmt: skip


def test_the_history_is_the_one_the_set_trains_on():
    """The lines a policy sees live are the lines synthesis writes for the same recorded
    steps (synthesis.prompts.executed_history), a role-less named target included."""
    obs, info = reset()
    prompt = GuiPrompt.from_reset(obs, info)
    steps = [
        _recorded(
            0, Action(type="tap", x=0.5, y=0.25), Element(role="", name="Save", bbox=(0.4, 0.2, 0.6, 0.3))
        ),
        _recorded(1, Action(type="type", text="milk", x=0.1, y=0.1), Element(role="textbox", name="Item")),
        _recorded(2, Action(type="scroll", direction="down")),
    ]
    for s in steps:
        target = element_info(s.target, (800, 600)) if s.target else None
        prompt.record({"executed": True, "action": s.action.model_dump(mode="json"), "target": target})
    profile = model_profile("qwen2.5-vl")
    assert prompt.history == executed_history(steps, 3, "en", profile)
    assert prompt.history[0] == 'Step 1: tap the element "Save"'


def test_the_screenshot_is_resized_as_the_set_writer_resizes_it():
    rng = np.random.default_rng(0)
    shot = rng.integers(0, 256, size=(600, 800, 3), dtype=np.uint8)
    obs, info = reset()
    obs["screenshot"] = shot
    framed = GuiPrompt.from_reset(obs, info).framed(shot)
    buf = io.BytesIO()
    Image.fromarray(shot).save(buf, format="PNG")
    written = Image.open(io.BytesIO(resize_image(buf.getvalue(), "png", (812, 588))))
    assert np.array_equal(np.asarray(framed), np.asarray(written.convert("RGB")))


class _Echo:
    """A backend that keeps the requests it was asked."""

    model_id = "echo"

    def __init__(self):
        self.requests = []

    def generate(self, requests, max_new_tokens, temperature=0.0, seed=None):
        self.requests += requests
        return ["<answer>{}</answer>"] * len(requests)


def test_the_agent_prompt_lists_the_last_actions_that_ran_with_the_budget():
    obs, info = reset()
    obs["url"] = "http://app/list"
    info["max_steps"] = 12
    info["elements"] = [{"role": "button", "name": "Add", "bbox": [400, 150, 480, 180]}]
    backend = _Echo()
    agent = TextAgent(backend, PromptSettings(prompt="agent", history_len=2), episode="ep-1")
    agent(obs, info)
    for k in range(3):
        agent(obs, {**info, "executed": True, "action": {"type": "wait", "description": f"wait {k}"}})
    agent(obs, {**info, "executed": False, "action": {"type": "tap", "x": 0.1, "y": 0.1}})  # guard refused
    last = backend.requests[-1]
    text = "".join(p.get("text", "") for p in last.messages[1]["content"])
    assert '- button \\"Add\\" [box=406,147,487,176]' in text  # in the 812 x 588 frame
    assert '"2. wait 1"' in text and '"3. wait 2"' in text and "wait 0" not in text
    assert last.metadata == {
        "task_id": "t", "step": 4, "width": 812, "height": 588, "prompt": "agent",
        "coords": "pixels", "episode": "ep-1",
    }  # fmt: skip
    with pytest.raises(ValueError, match="prompt"):
        PromptSettings(prompt="chat")


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
