"""What `trajforge.envs.make` composes around a GuiEnv, as gymnasium composes wrappers.

- `PlayTask(env, task_id)`: every reset plays `task_id` unless its options name
  another (or ask to explore): `make(task_id=...)`.
- `ShapedReward(env, alpha, beta, gamma, reflection)`: the shaped terms of each
  step in info["reward_parts"] and, when the episode ends, the whole episode's in
  info["episode_reward_parts"] (trajforge/envs/rewards.py). The reward returned
  stays the verifier's: the trainer decides whether to add the terms.
- `RecordEpisodes(env, record_to, collection, policy_id)`: every episode of the
  GuiEnv inside, recorded into a raw store (trajforge/envs/recording.py) as
  played by `policy_id`. A GuiEnv without it records nothing.

Read a GuiEnv's attributes through `env.unwrapped` (gymnasium 1.x wrappers do
not forward attribute reads).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym

from trajforge.store.raw import RawStore

from .answers import reflection_of
from .recording import EpisodeRecorder
from .rewards import RewardWeights, episode_parts, step_parts


class PlayTask(gym.Wrapper):
    """Every reset plays `task_id` (a task of the env's; an unknown id fails here)
    unless reset's options name another task or ask to explore."""

    def __init__(self, env: gym.Env, task_id: str):
        super().__init__(env)
        env.unwrapped.task_named(task_id)
        self.task_id = task_id

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        options = dict(options or {})
        if options.get("task_id") is None:
            options["task_id"] = self.task_id
        return self.env.reset(seed=seed, options=options)


class ShapedReward(gym.Wrapper):
    """The shaped terms of composite_reward beside the verifier's reward (module docstring):
    alpha (format), beta (reflection), gamma (invalid action) default to composite_reward's;
    `reflection=False` never earns beta."""

    def __init__(
        self,
        env: gym.Env,
        alpha: float | None = None,
        beta: float | None = None,
        gamma: float | None = None,
        reflection: bool = True,
    ):
        super().__init__(env)
        given = {"alpha": alpha, "beta": beta, "gamma": gamma}
        self.weights = RewardWeights(**{k: float(v) for k, v in given.items() if v is not None})
        self.reflection = reflection
        self._begin()

    def _begin(self) -> None:
        self._previous: dict | None = None  # the info of the episode's last step taken
        self._format_failures = self._reflections = self._blocked = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        self._begin()
        return self.env.reset(seed=seed, options=options)

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = self.env.step(action)
        format_ok = info["format_error"] is None
        self._format_failures += not format_ok
        reflected = False
        if info["action"] is not None:  # the action was taken (guarded, executed or final)
            said = action if isinstance(action, str) else info["thought"]
            reflected = self.reflection and _corrects(self._previous, info, reflection_of(said))
            self._reflections += reflected
            self._blocked += info["guard"] is not None
            self._previous = info
        info["reward_parts"] = step_parts(
            reward, format_ok=format_ok, reflection=reflected, invalid=bool(info["guard"]), w=self.weights
        )
        if "outcome" in info:  # the episode ended
            info["episode_reward_parts"] = episode_parts(
                success=info["outcome"] == "success",
                format_ok=self._format_failures == 0,
                reflection=self._reflections > 0,
                invalid=self._blocked > 0,
                w=self.weights,
            )
        return obs, reward, terminated, truncated, info


class RecordEpisodes(gym.Wrapper):
    """Every episode of the GuiEnv inside recorded, as source "rollout", policy "agent",
    source_name "<environment source>:agent:<policy_id>", with its screenshots and the
    guard's audit log.

    record_to: a data root (its raw store, <record_to>/raw), a RawStore, or an
    EpisodeRecorder shared with other envs (one writer per collection for envs on many
    threads, a collection chosen per episode; it stays open when this env closes).
    collection: where episodes go (default "gym/<environment>"; not with a recorder).
    policy_id: who plays (a checkpoint's id), also in the trajectory's id.
    """

    def __init__(
        self,
        env: gym.Env,
        record_to: str | Path | RawStore | EpisodeRecorder,
        collection: str | None = None,
        policy_id: str = "gym",
    ):
        super().__init__(env)
        self.collection = collection or f"gym/{env.unwrapped.environment.name}"
        self._owns_recorder = not isinstance(record_to, EpisodeRecorder)
        if isinstance(record_to, EpisodeRecorder):
            self.recorder = record_to
        elif isinstance(record_to, RawStore):
            self.recorder = EpisodeRecorder(record_to, self.collection)
        else:
            self.recorder = EpisodeRecorder(RawStore(Path(record_to) / "raw"), self.collection)
        self.store = self.recorder.store
        self.policy_id = policy_id
        env.unwrapped.record_with(self.recorder, policy_id)

    def close(self) -> None:
        """Close the env (its episode in play is recorded), then commit what the store holds."""
        try:
            self.env.close()
        finally:
            if self._owns_recorder:
                self.recorder.close()


def _corrects(previous: dict | None, step: dict, reflection: str | None) -> bool:
    """A reflection that corrected something: after a step that went wrong, this step's
    answer reflects and its action ran without error and changed the screen."""
    if reflection is None or previous is None or not step["executed"]:
        return False
    went_wrong = previous["error"] is not None or previous["screen_changed"] is False
    return went_wrong and step["error"] is None and bool(step["screen_changed"])
