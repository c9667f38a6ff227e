"""The Gym API over environment files: any app a crawl can play, as a gymnasium.Env.

    import trajforge.envs as tf_envs

    env = tf_envs.make("examples/environments/tiddlywiki.yaml", profile="qwen2.5-vl")
    obs, info = env.reset(seed=0, options={"task_id": "open-control-panel"})
    obs, reward, terminated, truncated, info = env.step({"type": "tap", "x": 512, "y": 300})
    obs, reward, terminated, truncated, info = env.step('<answer>{"action_type": "Click", ...}</answer>')
    env.close()

or through gymnasium, once this package is imported:

    gymnasium.make("trajforge/GuiEnv-v0", env_file="examples/environments/datasette.yaml")
    gymnasium.make("trajforge/Sandbox-v0", server_url="http://127.0.0.1:8000")

`make` composes a `GuiEnv` (trajforge/envs/gui_env.py: plain settings, the
task chosen at reset) with gymnasium wrappers (trajforge/envs/wrappers.py):
`ShapedReward` (the shaped reward terms), `RecordEpisodes` (`record_to` writes
every episode to the raw store as a crawl does) and `PlayTask` (`task_id`).
GuiEnv plays on the crawl's own episode code (crawlers.episode.EnvEpisode):
the same start, setup, guard and verification; what it plays on is opened in
trajforge/envs/launch.py, its observations built in trajforge/envs/observations.py.
Read a GuiEnv's attributes through `env.unwrapped`. The spaces are in trajforge/envs/spaces.py, the text answers in
trajforge/envs/answers.py, the reward and its shaped terms in
trajforge/envs/rewards.py. A GUI is not pixel-deterministic: the registered
specs say `nondeterministic=True` (see GuiEnv's docstring).

`RemoteEnv` (trajforge/envs/remote.py) is the same interface over the
environment server (`trajforge serve`, trajforge/envs/server.py):
docs/rl-environments.md.

For RL loops (training.rollouts, training.online, training.evaluate):
`env_factories` (trajforge/envs/sources.py) turns a config's environment names
(files, or "sandbox") into factories of GuiEnvs, `browser_pool` gives N browsers
to play on at once (`PoolError`: none can be leased), and an `EpisodeRecorder` (trajforge/envs/recording.py) is one
raw store shared by many envs, each episode routed to a collection by its verdict.

This package sits above crawlers/, sandbox/ and synthesis/ (its reward terms)
and below training/, which plays environments through it.
"""

from __future__ import annotations

import gymnasium

from crawlers.device_pool import PoolError

from .answers import action_from_dict, parse_answer
from .compose import ENV_ID, SANDBOX_ID, make, make_sandbox
from .gui_env import ENV_FAILED, GuiEnv
from .launch import Launch
from .recording import EpisodeRecorder
from .remote import RemoteEnv, RemoteEnvError
from .rewards import RewardWeights
from .sources import SANDBOX, EnvFactory, browser_pool, env_factories, source_tasks
from .wrappers import PlayTask, RecordEpisodes, ShapedReward

__all__ = [
    "ENV_FAILED",
    "ENV_ID",
    "SANDBOX",
    "SANDBOX_ID",
    "EnvFactory",
    "EpisodeRecorder",
    "GuiEnv",
    "Launch",
    "PlayTask",
    "PoolError",
    "RecordEpisodes",
    "RemoteEnv",
    "RemoteEnvError",
    "RewardWeights",
    "ShapedReward",
    "action_from_dict",
    "browser_pool",
    "env_factories",
    "make",
    "make_sandbox",
    "parse_answer",
    "source_tasks",
]


def _register() -> None:
    registered = gymnasium.registry
    if ENV_ID not in registered:
        gymnasium.register(id=ENV_ID, entry_point="trajforge.envs:make", nondeterministic=True)
    if SANDBOX_ID not in registered:
        gymnasium.register(id=SANDBOX_ID, entry_point="trajforge.envs:make_sandbox", nondeterministic=True)


_register()
