"""Evaluation: the reasoning-set prompt of the agent (exactly the set's), and offline step
accuracy with scripted backends whose scores are known by hand."""

from __future__ import annotations

import json

import pytest

from crawlers.agent import AgentPolicy, AgentSettings
from schemas.converters.gui_libra import from_gui_libra
from schemas.model_profiles import DEFAULT_PROFILE
from schemas.observation import Observation
from schemas.records import Task
from synthesis.cot import generate_cot
from synthesis.reasoning_set import answer_text, frame_image, sample_jsons
from tests.export.shard_fixtures import build_store
from training.data import iter_reasoning_samples, render
from training.evaluate import offline_step_accuracy, score_answer
from trajforge.vlm.messages import split_images
from trajforge.vlm.transformers_backend import load_processor


class Replay:
    """Answers each request with the next of `answers`; keeps the requests."""

    model_id = "replay"

    def __init__(self, answers):
        self.answers, self.requests = list(answers), []

    def generate(self, requests, max_new_tokens, **kw):
        self.requests += requests
        return [self.answers.pop(0) for _ in requests]


def _texts(message) -> str:
    content = message["content"]
    return content if isinstance(content, str) else "".join(p["text"] for p in content if p["type"] == "text")


@pytest.mark.parametrize("t", [2, 3])  # an EN trajectory of 4 steps, a ZH one of 5
def test_reasoning_set_prompt_is_the_one_the_set_writes(tmp_path, tiny_model, t):
    built = build_store(tmp_path / "raw", n_traj=4)
    tid = next(k for k, traj in built.trajectories.items() if traj.seed == t)
    traj, recorded = built.trajectories[tid], built.steps[tid]
    processor = load_processor(tiny_model)
    for mode in ("direct", "reason"):
        # Answers in the frame of the set's (default) model profile, as a trained model gives them.
        backend = Replay(
            [answer_text(s.action, s.width, s.height, profile=DEFAULT_PROFILE) for s in recorded]
        )
        agent = AgentPolicy(backend, traj.task, AgentSettings(prompt="reasoning_set", set_mode=mode))
        played = []  # the steps as the runner records what the agent did
        for s in recorded:
            obs = Observation(
                screenshot=built.images[(tid, s.index)],
                image_format=s.image_format,
                width=s.width,
                height=s.height,
                url=s.url,
                a11y_tree=s.a11y_tree,
                elements=s.elements,
            )
            action = agent.act(obs)
            played.append(s.model_copy(update={"action": action, "target": agent.last_target}))
        cots = {c.index: c for c in generate_cot([(traj, played)])}
        samples = [j for _, _, j in sample_jsons(traj, played, cots) if j["mode"] == mode]
        assert len(samples) == len(recorded) == len(backend.requests)
        for req, sample, s in zip(backend.requests, samples, played):
            system, human, gpt = (c["value"] for c in sample["conversations"])
            msgs = req.messages
            assert msgs[0]["content"] == system
            assert _texts(msgs[1]) == human.removeprefix("<image>\n")
            images = [p["image"] for p in msgs[1]["content"] if p["type"] == "image"]
            # the screenshot resized to the profile's frame, byte for byte as the set stores it
            assert images == [frame_image(built.images[(tid, s.index)], s, sample)]
            assert req.metadata["width"] == sample["image"]["width"]
            # Through the chat template: the very prompt SFT trains on (training.data.render).
            chat, _ = split_images(msgs)
            assert (
                processor.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
                == render(processor, system, human.removeprefix("<image>\n"), gpt)[0]
            )
        # A later step lists the earlier ones as the set does: "Step 1: ..." / "第1步：...".
        assert "Step 1: " in _texts(backend.requests[1].messages[1]) or "第1步：" in _texts(
            backend.requests[1].messages[1]
        )


def test_a_backend_that_carries_the_prompt_chooses_it():
    class Trained(Replay):
        prompt, set_mode = "reasoning_set", "reason"

    task = Task(task_id="x", instruction="Go", language="en", app="shop")
    agent = AgentPolicy(Trained([]), task)
    assert (agent.prompt, agent.set_mode) == ("reasoning_set", "reason")
    assert AgentPolicy(Replay([]), task).prompt == "agent"
    with pytest.raises(ValueError, match="coords"):
        AgentPolicy(Trained([]), task, AgentSettings(coords="grid1000"))


class Scripted:
    """Answers each sample (by key) with `answer(sample_json)`."""

    model_id = "scripted"

    def __init__(self, samples: dict, answer):
        self.samples, self.answer = samples, answer

    def generate(self, requests, max_new_tokens, **kw):
        return [self.answer(self.samples[r.key]) for r in requests]


def _with(sample_json: dict, **changes) -> str:
    return "<answer>\n" + json.dumps({**sample_json["answer"], **changes}, ensure_ascii=False) + "\n</answer>"


def test_offline_step_accuracy_with_hand_checked_backends(small_reasoning_set):
    samples = {k: j for k, j, _ in iter_reasoning_samples(small_reasoning_set, "test", mode="direct")}
    n = len(samples)
    with_point = sum(j["action"].get("x") is not None for j in samples.values())
    assert n >= 4 and 0 < with_point < n

    oracle = offline_step_accuracy(
        Scripted(samples, lambda j: j["conversations"][2]["value"]), small_reasoning_set, "test", batch_size=3
    )
    assert (oracle["samples"], oracle["point_samples"]) == (n, with_point)
    for key in ("parse_rate", "type_accuracy", "point_accuracy", "value_accuracy", "step_success"):
        assert oracle[key] == 1.0, key

    def wrong_type(j):
        return _with(
            j,
            action_type="Wait" if j["answer"]["action_type"] != "Wait" else "NavigateBack",
            point_2d=[-100, -100],
            value="None",
        )

    wrong = offline_step_accuracy(Scripted(samples, wrong_type), small_reasoning_set, "test")
    assert (wrong["parse_rate"], wrong["type_accuracy"], wrong["step_success"]) == (1.0, 0.0, 0.0)

    def far_point(j):  # the bottom-right pixel: far from every recorded point
        w, h = j["image"]["width"], j["image"]["height"]
        return (
            _with(j, point_2d=[w - 1, h - 1])
            if j["action"].get("x") is not None
            else j["conversations"][2]["value"]
        )

    far = offline_step_accuracy(Scripted(samples, far_point), small_reasoning_set, "test")
    assert (far["type_accuracy"], far["value_accuracy"], far["point_accuracy"]) == (1.0, 1.0, 0.0)
    assert far["step_success"] == pytest.approx((n - with_point) / n)

    noise = offline_step_accuracy(
        Scripted(samples, lambda j: "I would tap it."), small_reasoning_set, "test", max_samples=2
    )
    assert noise["samples"] == 2 and noise["parse_rate"] == 0.0 and noise["step_success"] == 0.0


def test_score_answer_uses_the_target_box_when_the_sample_has_one():
    sample = {"image": {"width": 100, "height": 100}, "action": {"type": "tap", "x": 0.5, "y": 0.5}}
    text = (
        '<answer>{"action_description": "t", "action_type": "Click", "value": "None", '
        '"point_2d": [58, 50]}</answer>'
    )
    assert from_gui_libra(text, 100, 100)[0].x == pytest.approx(0.58, abs=0.01)
    assert score_answer(text, sample)["point"] is False  # 0.08 away: outside the 0.04 circle
    assert score_answer(text, {**sample, "target_box": [0.4, 0.4, 0.6, 0.6]})["step"] is True
