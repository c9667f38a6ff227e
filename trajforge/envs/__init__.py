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

import dataclasses
from pathlib import Path
from typing import Any

import gymnasium
from gymnasium.envs.registration import EnvSpec

from crawlers.device_pool import PoolError
from crawlers.env_runtime import EnvironmentRuntime
from crawlers.env_source import OneEnv
from schemas.environment import Environment, load_environment
from schemas.model_profiles import ModelProfile

from .answers import action_from_dict, parse_answer
from .gui_env import ENV_FAILED, GuiEnv
from .launch import Launch
from .recording import EpisodeRecorder
from .remote import RemoteEnv, RemoteEnvError
from .rewards import RewardWeights
from .sources import SANDBOX, EnvFactory, browser_pool, env_factories, source_tasks
from .wrappers import PlayTask, RecordEpisodes, ShapedReward

ENV_ID = "trajforge/GuiEnv-v0"
SANDBOX_ID = "trajforge/Sandbox-v0"
# make()'s arguments that are not settings but live objects: given to the env, never
# put in its spec (gymnasium deep-copies a spec's kwargs; a re-make plays on its own).
_LIVE = ("env", "pool", "judge", "guard")
_SOURCE = ("headless", "image_format", "step_timeout_s")
_SHAPING = ("alpha", "beta", "gamma", "reflection")

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


def make(
    env_file: str | Path | Environment,
    *,
    task_id: str | None = None,
    profile: str | ModelProfile | None = None,
    record_to: str | Path | None = None,
    **overrides: Any,
) -> gymnasium.Env:
    """A GuiEnv over `env_file` (a YAML environment file or an Environment), composed with
    its wrappers: PlayTask (`task_id`: the task every reset plays unless its options name
    another), ShapedReward (`alpha`, `beta`, `gamma`, `reflection`: info["reward_parts"]),
    RecordEpisodes (`record_to`, `collection`, `policy_id`: every episode recorded;
    `record_to` a data root, a RawStore or a shared EpisodeRecorder; without it
    `collection` and `policy_id` name nothing). `overrides` are GuiEnv's settings
    (tasks, max_steps, device, screen_size, retries, render_mode,
    decode_screenshots, guard) and where it plays: `env` (one live env) or `pool` (a
    source of leases), else an env of its own started with `headless`, `image_format`,
    `step_timeout_s`; `tasks_file` replaces the file's tasks; `judge` judges `judge`
    verifiers. Read the GuiEnv's attributes through `.unwrapped`.

    Its `spec` is the registered one with the plain settings only: the live objects
    (env, pool, judge, guard, a record_to that is not a path) are not in it, so a
    re-make from the spec (gymnasium.make(env.spec)) plays on a browser of its own,
    judged by the default guard, and records only into a data root."""
    settings = {"task_id": task_id, "profile": profile, "record_to": record_to, **overrides}
    tasks_file = settings.pop("tasks_file", None)
    environment = env_file
    if not isinstance(env_file, Environment):
        environment = load_environment(env_file, tasks_file=tasks_file)
    judge = settings.pop("judge", None)
    given = EnvironmentRuntime(environment, judge=judge) if judge is not None else environment
    spec = {"env_file": env_file, **({"tasks_file": tasks_file} if tasks_file else {}), **settings}
    return _compose(given, _spec(ENV_ID, spec), **settings)


def make_sandbox(
    server_url: str,
    *,
    tasks: list | None = None,
    apps: list[str] | None = None,
    languages: tuple[str, ...] = ("en",),
    per_template: int = 1,
    catalog_seed: int = 0,
    distraction_rate: float = 0.0,
    **overrides: Any,
) -> gymnasium.Env:
    """A GuiEnv over the sandbox at `server_url`, composed as make() composes one: its own
    environment and runtime (sandbox.episode.sandbox_runtime: the /start page, the
    template's state verifier), playing `tasks` or the catalog's (sandbox.tasks.build_catalog
    of `apps`, `languages`, `per_template` tasks per template from `catalog_seed`);
    `overrides` as make()'s (its spec, too, holds plain settings only)."""
    from sandbox.episode import sandbox_runtime
    from sandbox.tasks import build_catalog

    if tasks is None:
        tasks = build_catalog(per_template, languages=languages, seed=catalog_seed, apps=apps)
    spec = {"server_url": server_url, "tasks": list(tasks), "distraction_rate": distraction_rate, **overrides}
    runtime = sandbox_runtime(server_url, distraction_rate)
    return _compose(runtime, _spec(SANDBOX_ID, spec), tasks=list(tasks), **overrides)


def _compose(
    environment: Environment | EnvironmentRuntime,
    spec: EnvSpec,
    *,
    task_id: str | None = None,
    record_to: Any = None,
    collection: str | None = None,
    policy_id: str = "gym",
    **settings: Any,
) -> gymnasium.Env:
    """The GuiEnv of `settings` (its source among them), wrapped as make() says."""
    shaping = {k: settings.pop(k) for k in _SHAPING if k in settings}
    settings["source"] = _source(settings.pop("env", None), settings.pop("pool", None), settings)
    env: gymnasium.Env = GuiEnv(environment, **settings)
    env.spec = spec
    if task_id is not None:
        env = PlayTask(env, task_id)
    env = ShapedReward(env, **shaping)
    if record_to is not None:
        env = RecordEpisodes(env, record_to, collection, policy_id)
    return env


def _source(env: Any, pool: Any, settings: dict) -> Any:
    """Where the GuiEnv plays: the caller's env or pool, or Launch settings for its own."""
    launch = Launch(**{k: settings.pop(k) for k in _SOURCE if k in settings})
    if env is not None and pool is not None:
        raise ValueError("GuiEnv: give env= or pool=, not both")
    if env is not None:
        return OneEnv(env)
    return pool if pool is not None else launch


def _spec(env_id: str, kwargs: dict) -> EnvSpec:
    """The registered spec with `kwargs`' plain settings (live objects left out)."""
    plain = {k: v for k, v in kwargs.items() if k not in _LIVE and v is not None}
    if not isinstance(plain.get("record_to"), (str, Path, type(None))):
        del plain["record_to"]
    return dataclasses.replace(gymnasium.spec(env_id), kwargs=plain)


def _register() -> None:
    registered = gymnasium.registry
    if ENV_ID not in registered:
        gymnasium.register(id=ENV_ID, entry_point="trajforge.envs:make", nondeterministic=True)
    if SANDBOX_ID not in registered:
        gymnasium.register(id=SANDBOX_ID, entry_point="trajforge.envs:make_sandbox", nondeterministic=True)


_register()
