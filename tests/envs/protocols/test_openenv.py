"""OpenEnv on `trajforge serve`: OpenEnv's own client (openenv-core's GenericEnvClient, in
.venv-rl, scripts/setup_rl.sh) plays the served tiny app over the WebSocket contract, with
the rewards `make()` gives the same actions in process."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.envs.protocols.conftest import REPO, RL_PYTHON, TASK
from trajforge.store.raw import RawStore

pytestmark = pytest.mark.slow

CLIENT = REPO / "tests/envs/protocols/openenv_client.py"


@pytest.fixture(scope="module")
def played(served_tiny, scripted):
    if not RL_PYTHON.exists():
        pytest.fail(f"{RL_PYTHON} is missing: run scripts/setup_rl.sh")
    spec = {
        "base_url": served_tiny["url"] + "/openenv/tiny",
        "bad_url": served_tiny["url"] + "/openenv/nosuch",
        "task_id": TASK,
        "episodes": scripted["episodes"],
    }
    run = subprocess.run(
        [str(RL_PYTHON), str(CLIENT)], input=json.dumps(spec), capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout)


def test_openenv_client_gets_make_rewards_for_the_same_actions(played, scripted):
    for name, expected in scripted["rewards"].items():
        episode = played["episodes"][name]
        assert episode["rewards"] == expected, name
        assert episode["dones"][-1] is True and not any(episode["dones"][:-1]), name
    assert scripted["rewards"]["add"] == [1.0] and sum(scripted["rewards"]["idle"]) == 0.0
    assert [played["episodes"][n]["outcome"] for n in ("add", "idle")] == ["success", "failure"]


def test_async_openenv_clients_play_at_once_with_the_same_rewards(played, scripted):
    assert played["concurrent"] == scripted["rewards"]


def test_openenv_reset_observation_and_state(played, scripted):
    episode = played["episodes"]["add"]
    assert episode["reset_reward"] is None and episode["reset_done"] is False
    assert episode["screenshot"] == ["png", 800, 600] and episode["png"] == "89504e470d0a1a0a"
    assert episode["instruction"] == "Press Add once"
    state = played["episodes"]["idle"]["state"]
    assert (
        state["env"] == "tiny"
        and state["task_id"] == TASK
        and state["step_count"] == len(scripted["episodes"]["idle"])
    )
    assert state["episode_id"] and state["session_id"]


def test_openenv_errors_arrive_as_openenv_errors(played):
    assert "episode has ended" in played["step_after_end"]
    assert "no environment 'nosuch'" in played["unknown_env"] and "VALIDATION_ERROR" in played["unknown_env"]


def test_openenv_episodes_are_recorded_under_the_policy_it_named(played, served_tiny):
    trajs = list(RawStore(served_tiny["data"] / "raw").iter_trajectories("gym/tiny"))
    mine = sorted(t.outcome for t in trajs if t.source_name.endswith(":agent:openenv-test"))
    assert mine == ["failure", "success"]
    assert {t.task.task_id for t in trajs} == {TASK}
