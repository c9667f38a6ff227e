"""training.engines.verl_agent_loop.GuiAgentLoop, run by verl 0.9 itself in .venv-trainers.

`trajforge serve` (a subprocess of this .venv) serves two environments over the tiny
app; tests/envs/verl_rollout.py (in .venv-trainers) writes the RL parquet with
training.engines.env_tasks, reads it with verl's RLHFDataset, and runs verl's AgentLoopWorker
over it: the loop is named by an agent_loop_config_path YAML, hydra-instantiated per
episode, and its AgentLoopOutputs are padded into verl's DataProto. The model server
behind verl's LLMServerClient is the tiny Qwen2-VL's `generate` on CPU (random
weights: every answer is a format failure, so each episode runs to the environment's
max_steps and its outcome is the verifier's verdict on the untouched page).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.convert.trainer_venvs import TRAINERS, run_in_venv
from tests.envs.serving import REPO, serve, tiny_env_file
from tests.vlm.helpers import tiny_model_path
from trajforge.store.raw import RawStore

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).with_name("verl_rollout.py")
MAX_STEPS = 3
TOKENS_PER_TURN = 24  # verl_rollout.MAX_TOKENS_PER_TURN


@pytest.fixture(scope="module")
def verl_model(tmp_path_factory) -> Path:
    """The tiny Qwen2-VL with the image processor's own preprocessor_config.json, which
    verl's AutoProcessor needs (tests/convert/conftest.py's full_checkpoint)."""
    path = tmp_path_factory.mktemp("verl-model") / "tiny-qwen2vl"
    shutil.copytree(tiny_model_path(), path)
    image = json.loads((path / "processor_config.json").read_text())["image_processor"]
    (path / "preprocessor_config.json").write_text(json.dumps(image, indent=2))
    return path


@pytest.fixture(scope="module")
def rollout(tiny_url, verl_model, tmp_path_factory):
    """verl's rollout of one episode on each environment; what the server recorded."""
    root = tmp_path_factory.mktemp("verl-loop")
    press = tiny_env_file(root, tiny_url, name="tiny", max_steps=MAX_STEPS)
    # Untouched page = success: the model's noise (nothing executes) earns a reward of 1.
    idle = tiny_env_file(
        root,
        tiny_url,
        name="idle",
        task="Leave the counter at 0",
        max_steps=MAX_STEPS,
        verdict="(() => { const n = +(document.body.dataset.n || 0); "
        "return {done: false, success: n === 0, reason: 'pressed ' + n}; })()",
    )
    data, work = root / "data", root / "work"
    work.mkdir()
    with serve(press, idle, record_to=data) as served:
        got = run_in_venv(
            TRAINERS, SCRIPT.read_text(), REPO, served.url, str(verl_model), str(work), timeout=600
        )
    trajectories = {
        t.trajectory_id: t
        for name in ("tiny", "idle")
        for t in RawStore(data / "raw").iter_trajectories(f"gym/{name}")
    }
    return got, trajectories


def test_verl_plays_each_row_through_the_named_loop(rollout):
    got, trajectories = rollout
    assert got["rows"] == 2 and len(got["episodes"]) == 2
    assert {e["extra_info"]["env"] for e in got["episodes"]} == {"tiny", "idle"}
    for e in got["episodes"]:
        assert e["agent_name"] == "trajforge_gui"
        extra = e["raw"]["extra_fields"]
        assert extra["env"] == e["extra_info"]["env"] and extra["episode_end"] == "truncated"
        assert extra["env_steps"] == MAX_STEPS == extra["format_failures"]
        assert extra["trajectory_id"] in trajectories
    assert {"prompts", "responses", "response_mask", "rm_scores", "rollout_log_probs"} <= set(
        got["batch_keys"]
    )


def test_generated_ids_are_kept_verbatim_and_only_they_are_trained_on(rollout):
    got, _ = rollout
    for e in got["episodes"]:
        raw = e["raw"]
        prompt, response, mask = raw["prompt_ids"], raw["response_ids"], raw["response_mask"]
        assert len(mask) == len(response) == len(raw["response_logprobs"]) > 0
        ids = prompt + response
        # The model server's generations for this episode: their prompt is a prefix of it,
        # and what they generated follows that prefix.
        calls = [
            c for c in e["calls"] if ids[len(c["prompt_ids"]) :][: len(c["token_ids"])] == c["token_ids"]
        ]
        assert len(calls) == MAX_STEPS and calls[0]["prompt_ids"] == prompt
        generated = [0] * len(response)
        for c in calls:
            start = len(c["prompt_ids"]) - len(prompt)
            assert response[start : start + len(c["token_ids"])] == c["token_ids"]  # verbatim
            generated[start : start + len(c["token_ids"])] = [1] * len(c["token_ids"])
        assert mask == generated  # 1 exactly on the model's tokens, 0 on the observations
        assert sum(mask) == MAX_STEPS * TOKENS_PER_TURN
        # Masked tokens are the observations: a user turn with one screenshot after every
        # answer but the last, none of the model's own.
        observed = [t for t, m in zip(response, mask, strict=True) if m == 0]
        vision, pad = e["vision_start"], e["image_pad"]
        assert observed.count(vision) == MAX_STEPS - 1
        assert prompt.count(vision) == 1 and all(t != pad for t, m in zip(response, mask, strict=True) if m)


def test_images_are_the_screenshots_at_the_environments_frame(rollout):
    got, _ = rollout
    for e in got["episodes"]:
        raw, batch = e["raw"], e["batch"]
        shots = raw["extra_fields"]["screenshots"]
        # One screenshot per observation fed: the first and one after each step but the last.
        assert shots == MAX_STEPS == len(raw["image_sizes"]) == len(batch["image_grid_thw"])
        assert raw["image_sizes"] == [[812, 588]] * shots  # qwen2.5-vl's frame of 800x600
        assert [c["images"] for c in e["calls"] if len(c["prompt_ids"]) > len(raw["prompt_ids"])] == list(
            range(2, shots + 1)
        )
        ids = raw["prompt_ids"] + raw["response_ids"]
        assert ids.count(e["vision_start"]) == shots


def test_reward_is_the_environments_episode_reward(rollout):
    got, trajectories = rollout
    rewards = {}
    for e in got["episodes"]:
        raw, batch = e["raw"], e["batch"]
        traj = trajectories[raw["extra_fields"]["trajectory_id"]]
        assert traj.source == "rollout" and traj.source_name.endswith(":agent:verl:verl-loop-test")
        # No answer parsed: nothing ran, so no step was recorded; the verdict is on the page.
        assert traj.num_steps == 0 and traj.outcome == raw["extra_fields"]["outcome"]
        assert raw["reward_score"] == traj.reward
        # verl puts the score on the last response token of the padded batch.
        last = max(i for i, a in enumerate(batch["response_attention"]) if a)
        assert batch["rm_scores"][last] == traj.reward and sum(batch["rm_scores"]) == traj.reward
        assert batch["num_turns"] == raw["num_turns"] == 2 * MAX_STEPS
        rewards[e["extra_info"]["env"]] = traj.reward
    assert rewards == {"tiny": 0.0, "idle": 1.0}


def test_the_padded_batch_is_the_raw_output(rollout):
    got, _ = rollout
    for e in got["episodes"]:
        raw, batch = e["raw"], e["batch"]
        n = len(raw["response_ids"])
        assert (
            batch["responses"][:n] == raw["response_ids"]
            and batch["response_mask"][:n] == raw["response_mask"]
        )
        assert sum(batch["response_attention"]) == n and not any(batch["response_mask"][n:])
        assert [t for t, a in zip(batch["prompts"], batch["prompt_attention"], strict=True) if a] == raw[
            "prompt_ids"
        ]
        assert batch["position_ids_shape"][0] == 4  # Qwen2-VL's text + 3-D rope positions


DOC_CONFIG = """
import json, os, re, sys
import verl
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
doc = open(sys.argv[1], encoding="utf-8").read()
block = re.search(r"<!-- verl-config -->\\s*```yaml\\n(.*?)```", doc, re.S).group(1)
with initialize_config_dir(config_dir=os.path.join(os.path.dirname(verl.__file__), "trainer", "config"), version_base=None):
    cfg = compose(config_name="ppo_trainer")
assert OmegaConf.is_struct(cfg)
merged = OmegaConf.merge(cfg, OmegaConf.create(block))  # struct: a key verl does not have raises
rollout = merged.actor_rollout_ref.rollout
print(json.dumps({"default": rollout.agent.default_agent_loop, "path": rollout.agent.agent_loop_config_path,
                  "prompt_length": rollout.prompt_length, "response_length": rollout.response_length}))
"""


def test_the_documented_verl_config_has_only_verls_keys(tmp_path):
    got = run_in_venv(TRAINERS, DOC_CONFIG, tmp_path, str(REPO / "docs" / "rl-environments.md"))
    assert got["default"] == "trajforge_gui" and got["path"] == "agent_loop.yaml"
    assert (got["prompt_length"], got["response_length"]) == (4096, 16384)  # rollout follows data
