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

`GuiEnv` (trajforge/envs/gui_env.py) plays on the crawl's own episode code
(crawlers.env_episode.EnvEpisode): the same start, setup, guard, recording and
verification; `record_to` writes every episode to the raw store as a crawl
does. The spaces are in trajforge/envs/spaces.py, the text answers in
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

from crawlers.device_pool import PoolError
from schemas.environment import Environment
from schemas.model_profiles import ModelProfile

from .answers import action_from_dict, parse_answer
from .gui_env import ENV_FAILED, ByReference, GuiEnv
from .recording import EpisodeRecorder
from .remote import RemoteEnv, RemoteEnvError
from .rewards import RewardWeights
from .sources import SANDBOX, EnvFactory, browser_pool, env_factories, source_tasks

ENV_ID = "trajforge/GuiEnv-v0"
SANDBOX_ID = "trajforge/Sandbox-v0"
# Arguments that hold live objects: a re-make from the spec shares them.
_LIVE = ("env", "pool", "runtime", "judge", "guard", "record_to")

__all__ = [
    "ENV_FAILED",
    "ENV_ID",
    "SANDBOX",
    "SANDBOX_ID",
    "EnvFactory",
    "EpisodeRecorder",
    "GuiEnv",
    "PoolError",
    "RemoteEnv",
    "RemoteEnvError",
    "RewardWeights",
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
) -> GuiEnv:
    """A GuiEnv over `env_file` (a YAML environment file or an Environment); `overrides`
    are GuiEnv's other arguments (tasks, max_steps, device, policy_id, alpha, beta,
    gamma, env, pool, ...). Its `spec` is the registered one, with these arguments."""
    kwargs = {
        "env_file": env_file,
        "task_id": task_id,
        "profile": profile,
        "record_to": record_to,
        **overrides,
    }
    env = GuiEnv(**kwargs)
    env.spec = _spec(ENV_ID, kwargs)
    return env


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
) -> GuiEnv:
    """A GuiEnv over the sandbox at `server_url`: its own environment
    (sandbox.environment.sandbox_environment: the /start page, the template's state
    verifier) and runtime, playing `tasks` or the catalog's (sandbox.tasks.build_catalog
    of `apps`, `languages`, `per_template` tasks per template from `catalog_seed`)."""
    from sandbox.environment import sandbox_environment
    from sandbox.episode import sandbox_runtime
    from sandbox.tasks import build_catalog

    if tasks is None:
        tasks = build_catalog(per_template, languages=languages, seed=catalog_seed, apps=apps)
    environment = sandbox_environment(server_url, distraction_rate)
    runtime = sandbox_runtime(server_url, distraction_rate)
    env = GuiEnv(environment, tasks=list(tasks), runtime=runtime, **overrides)
    spec_kwargs = {
        "server_url": server_url,
        "tasks": list(tasks),
        "distraction_rate": distraction_rate,
        **overrides,
    }
    env.spec = _spec(SANDBOX_ID, spec_kwargs)
    return env


def _spec(env_id: str, kwargs: dict) -> gymnasium.envs.registration.EnvSpec:
    shared = {k: (ByReference(v) if k in _LIVE and v is not None else v) for k, v in kwargs.items()}
    return dataclasses.replace(gymnasium.spec(env_id), kwargs=shared)


def _register() -> None:
    registered = gymnasium.registry
    if ENV_ID not in registered:
        gymnasium.register(id=ENV_ID, entry_point="trajforge.envs.gui_env:GuiEnv", nondeterministic=True)
    if SANDBOX_ID not in registered:
        gymnasium.register(id=SANDBOX_ID, entry_point="trajforge.envs:make_sandbox", nondeterministic=True)


_register()
