"""SkyRL-Gym, GEM and OpenRLHF's agent API over `trajforge serve`: each framework's own
classes (skyrl_gym.make, gem.make, OpenRLHF's MultiTurnAgentExecutor and its
AgentInstanceBase contract; .venv-rl, scripts/setup_rl.sh) play the served tiny app
through training/engines/{skyrl_gym_env,gem_env,openrlhf_agent}.py, with model answer
texts whose rewards `make()` gives in process. The model is the only stand-in. The last
test renders the turns with a real processor's chat template (the tiny Qwen2-VL's, .venv)."""

from __future__ import annotations

import json
import socket
import subprocess

import pytest
from PIL import Image

import trajforge.envs as tf_envs
from schemas.converters.gui_libra import to_gui_libra
from tests.envs.protocols.conftest import REPO, RL_PYTHON, TASK, play_in_process
from tests.vlm.helpers import tiny_model_path
from training.engines.gui_episode import chat_text, text_after_answer
from trajforge.envs.answers import action_from_dict
from trajforge.store.raw import RawStore
from trajforge.vlm.transformers_backend import load_processor

pytestmark = pytest.mark.slow

RUNNER = REPO / "tests/envs/protocols/text_frameworks.py"


@pytest.fixture(scope="module")
def answers(tiny_file, scripted) -> dict:
    """The scripted episodes as a model's answer texts (GUI-Libra's, in the env's profile
    frame), one more whose first answer does not parse, and the rewards `make()` gives those texts."""
    env = tf_envs.make(tiny_file)
    try:
        _, info = env.reset(seed=0, options={"task_id": TASK})
        width, height = env.unwrapped.screen_size
        (fw, fh), coords = info["profile"]["frame"], info["profile"]["coords"]

        def text(action: dict) -> str:
            return to_gui_libra(action_from_dict(action, width, height), fw, fh, coords=coords)

        episodes = {name: [text(a) for a in actions] for name, actions in scripted["episodes"].items()}
        episodes["babble"] = ["I would press something.", text({"type": "done"})]
        rewards = {name: play_in_process(env, texts) for name, texts in episodes.items()}
    finally:
        env.close()
    assert rewards["add"] == [1.0] and sum(rewards["idle"]) == 0.0  # a success and a failure
    return {"episodes": episodes, "rewards": rewards, "frame": [fw, fh]}


def run(framework: str, served: dict, answers: dict) -> dict:
    if not RL_PYTHON.exists():
        pytest.fail(f"{RL_PYTHON} is missing: run scripts/setup_rl.sh")
    spec = {
        "url": served["url"],
        "closed_url": f"http://127.0.0.1:{closed_port()}",
        "env": "tiny",
        "task_id": TASK,
        "episodes": answers["episodes"],
    }
    done = subprocess.run(
        [str(RL_PYTHON), str(RUNNER), framework],
        input=json.dumps(spec),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def closed_port() -> int:
    with socket.socket() as s:  # a port just freed, nothing listening: a connection is refused
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def recorded(served: dict, policy: str) -> list:
    trajs = RawStore(served["data"] / "raw").iter_trajectories("gym/tiny")
    return sorted((t.outcome, t.task.task_id) for t in trajs if t.source_name.endswith(f":agent:{policy}"))


def test_skyrl_gym_make_plays_with_make_rewards(served_tiny, answers):
    played = run("skyrl", served_tiny, answers)
    for name, rewards in answers["rewards"].items():
        episode = played[name]
        assert episode["rewards"] == rewards, name
        assert episode["dones"][-1] is True and not any(episode["dones"][:-1]), name
        assert episode["next"][-1] == []  # no observation after the end
    first = played["idle"]["first"]
    assert [m["role"] for m in first] == ["system", "user"]
    assert first[1]["content"][0] == {"type": "image", "size": answers["frame"]}
    assert "Press Add once" in first[1]["content"][1]["text"]
    after_wait = played["idle"]["next"][0][0]["content"]  # the next turn: screenshot, history
    assert after_wait[0]["type"] == "image" and "Step 1" in after_wait[1]["text"]
    assert played["add"]["metadata"]["outcome"] == "success" and played["add"]["metadata"]["trajectory_id"]
    assert played["babble"]["metadata"]["outcome"] == "failure"
    # max_turns spent: SkyRL's episode ends, the server records the deleted one as a failure.
    cut = played["max_turns_1"]
    assert cut["done"] is True and cut["reward"] == answers["rewards"]["idle"][0]
    assert recorded(served_tiny, "skyrl-test") == [("failure", TASK)] * 3 + [("success", TASK)]


def test_gem_make_plays_with_make_rewards(served_tiny, answers):
    played = run("gem", served_tiny, answers)
    for name, rewards in answers["rewards"].items():
        episode = played[name]
        assert episode["rewards"] == rewards, name
        assert episode["terminated"][-1] is True and not any(episode["truncated"]), name
        assert "Press Add once" in episode["obs"]
        assert episode["image"] == answers["frame"] and episode["render"] == answers["frame"][::-1] + [3]
    assert [played[n]["outcome"] for n in ("add", "idle", "babble")] == ["success", "failure", "failure"]
    assert played["add"]["env_instruction"]  # the set's system turn, for the first prompt
    assert "GEM env config: no `env`" in played["no_env"]
    assert played["unreachable"] == ["EnvFailed", "unreachable"]
    assert recorded(served_tiny, "gem-test") == [("failure", TASK)] * 2 + [("success", TASK)]


def test_openrlhf_executor_and_agent_instance_get_make_rewards(served_tiny, answers):
    played = run("openrlhf", served_tiny, answers)
    for name, rewards in answers["rewards"].items():
        episode = played[name]
        assert episode["rewards"] == rewards, name  # AgentInstance reset/step, step by step
        assert episode["reward"] == sum(rewards) == episode["scores"], name  # the executor's sum
        assert episode["turns"] == len(rewards), name
        assert episode["images"] == [answers["frame"]]  # the reset's screenshot, as the first image
    assert played["add"]["extra_logs"] == {"success": 1.0}
    first, second = played["idle"]["prompts"]
    assert "Press Add once" in first and first.count("<image>") == 1
    assert second.startswith(first + answers["episodes"]["idle"][0])  # the model's text, then feedback
    assert second.count("<image>") == 2 and "Step 1" in second[len(first) :]
    assert recorded(served_tiny, "openrlhf-test") == [("failure", TASK)] * 2 + [("success", TASK)]
    assert recorded(served_tiny, "openrlhf-instance") == [("failure", TASK)] * 2 + [("success", TASK)]


def test_turns_in_a_token_stream_are_the_chat_templates_conversation():
    """OpenRLHF's executor builds one stream: the first turns, then each answer and the text
    after it. With a real processor (the tiny Qwen2-VL's) that stream is what its chat
    template makes of the whole conversation, image placeholders included."""
    processor = load_processor(tiny_model_path())
    image = Image.new("RGB", (28, 28))
    first = [
        {"role": "system", "content": "Act."},
        {
            "role": "user",
            "content": [{"type": "image", "image": image}, {"type": "text", "text": "Task: add"}],
        },
    ]
    later = [{"type": "image", "image": image}, {"type": "text", "text": "Step 1: pressed"}]
    answer = '<answer>{"action_type": "Wait"}</answer>'
    stream = chat_text(processor, first) + answer + text_after_answer(processor, later)
    whole = [*first, {"role": "assistant", "content": answer}, {"role": "user", "content": later}]
    assert stream == processor.apply_chat_template(whole, tokenize=False, add_generation_prompt=True)
    assert stream.count("<|image_pad|>") == 2 and stream.endswith("<|im_start|>assistant\n")
