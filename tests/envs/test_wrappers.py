"""The wrappers make() composes around a GuiEnv: ShapedReward's terms (on a scripted env,
no browser), a spec that re-makes the same composition from plain settings, and recording
only where RecordEpisodes is (live, on the tiny app)."""

from __future__ import annotations

import copy

import gymnasium
import pytest

import trajforge.envs as tf_envs
from trajforge.envs import GuiEnv, RecordEpisodes, ShapedReward
from trajforge.envs.wrappers import PlayTask
from trajforge.store.raw import RawStore

EXAMPLE = "examples/environments/tiddlywiki.yaml"


def _info(**given) -> dict:
    """A GuiEnv step's info: an executed action that changed the screen, unless `given` says."""
    info = {"action": {"type": "tap"}, "thought": None, "format_error": None, "executed": True}
    return {**info, "error": None, "guard": None, "screen_changed": True, **given}


class _Scripted(gymnasium.Env):
    """Returns the scripted (reward, terminated, info) of each step."""

    observation_space = gymnasium.spaces.Discrete(1)
    action_space = gymnasium.spaces.Discrete(1)

    def __init__(self, steps: list[tuple[float, bool, dict]]):
        self.steps = list(steps)

    def reset(self, *, seed=None, options=None):
        return 0, {}

    def step(self, action):
        reward, terminated, info = self.steps.pop(0)
        return 0, reward, terminated, False, info


def test_shaped_reward_reports_each_term_and_the_episode_and_returns_the_verifiers_reward():
    reflect = "<reflection>the tap missed, tap the button itself</reflection><answer>...</answer>"
    env = ShapedReward(
        _Scripted(
            [
                (0.0, False, _info(action=None, executed=False, format_error="no answer")),
                (0.0, False, _info(screen_changed=False)),  # went wrong: nothing changed
                (0.0, False, _info()),  # reflected, and corrected it
                (1.0, True, _info(guard="blocked:payment", executed=False, outcome="success")),
            ]
        ),
        alpha=0.5,
        beta=0.25,
    )
    env.reset()
    parts = [env.step(a)[4]["reward_parts"] for a in ("bad", "tap", reflect)]
    assert [p["format"] for p in parts] == [-0.5, 0.0, 0.0]
    assert [p["reflection"] for p in parts] == [0.0, 0.0, 0.25]
    assert [p["shaped"] for p in parts] == [-0.5, 0.0, 0.25]
    _, reward, _, _, info = env.step("done")
    assert reward == 1.0  # the verifier's: the terms are reported beside it
    assert info["reward_parts"]["invalid"] == -2.0 and info["reward_parts"]["shaped"] == 1.0 - 2.0
    assert info["reward_parts"]["weights"] == {"alpha": 0.5, "beta": 0.25, "gamma": 2.0}
    ending = info["episode_reward_parts"]
    assert (ending["success"], ending["format_ok"], ending["reflection_ok"], ending["invalid"]) == (
        True,
        False,
        True,
        True,
    )


def test_shaped_reward_without_reflection_never_earns_beta():
    reflect = "<reflection>that did nothing</reflection>"
    env = ShapedReward(
        _Scripted([(0.0, False, _info(screen_changed=False)), (0.0, False, _info())]), reflection=False
    )
    env.reset()
    env.step("tap")
    assert env.step(reflect)[4]["reward_parts"]["reflection"] == 0.0


def test_a_spec_holds_plain_settings_and_remakes_the_same_composition(tmp_path):
    live_pool = object()  # a live source: given to the env, never put in its spec
    env = tf_envs.make(
        EXAMPLE,
        task_id="open-control-panel",
        alpha=0.5,
        image_format="jpeg",
        pool=live_pool,
        record_to=tmp_path,
    )
    try:
        assert isinstance(env, RecordEpisodes) and env.unwrapped._source is live_pool
        kwargs = env.spec.kwargs
        assert "pool" not in kwargs and kwargs["record_to"] == tmp_path and kwargs["alpha"] == 0.5
        assert copy.deepcopy(kwargs) == kwargs
        again = gymnasium.make(env.spec)
        try:
            shaped = again.env.env.env  # OrderEnforcing(PassiveEnvChecker(RecordEpisodes(ShapedReward
            assert isinstance(shaped, ShapedReward) and shaped.weights.alpha == 0.5
            assert isinstance(shaped.env, PlayTask) and shaped.env.task_id == "open-control-panel"
            assert again.unwrapped._launch.image_format == "jpeg" and again.unwrapped._source is None
        finally:
            again.close()
    finally:
        env.close()


def test_an_unknown_task_id_fails_at_make():
    with pytest.raises(ValueError, match="no task 'nope'"):
        tf_envs.make(EXAMPLE, task_id="nope")


def _press_add(env) -> dict:
    _, info = env.reset(seed=0)
    (x0, y0, x1, y1) = next(
        e["bbox"] for e in info["elements"] if e["role"] == "button" and e["name"] == "Add"
    )
    _, reward, terminated, _, info = env.step({"type": "tap", "x": (x0 + x1) / 2, "y": (y0 + y1) / 2})
    assert (reward, terminated, info["outcome"]) == (1.0, True, "success")
    return info


@pytest.mark.slow
def test_a_gui_env_records_only_inside_record_episodes(tiny_file, tmp_path):
    env = GuiEnv(tiny_file)
    recording = None
    try:
        info = _press_add(env)
        assert info["recorded"] is False and env.recorder is None and "reward_parts" not in info
        assert env.last_trajectory.trajectory_id == info["trajectory_id"]
        recording = RecordEpisodes(env, tmp_path, collection="mine", policy_id="mine-v1")
        info = _press_add(recording)
        assert info["recorded"] is True
    finally:
        (recording or env).close()
    (traj,) = RawStore(tmp_path / "raw").iter_trajectories("mine")
    assert traj.trajectory_id == info["trajectory_id"] and traj.source_name == "tiny:agent:mine-v1"
