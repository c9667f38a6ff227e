"""make() and make_sandbox(): a GuiEnv composed with its wrappers (PlayTask, ShapedReward,
RecordEpisodes) from make()'s documented arguments, with a spec of plain settings."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import gymnasium
from gymnasium.envs.registration import EnvSpec

from crawlers.env_runtime import EnvironmentRuntime
from crawlers.env_source import OneEnv
from schemas.environment import Environment, load_environment
from schemas.model_profiles import ModelProfile

from .gui_env import GuiEnv
from .launch import Launch
from .wrappers import PlayTask, RecordEpisodes, ShapedReward

ENV_ID = "trajforge/GuiEnv-v0"
SANDBOX_ID = "trajforge/Sandbox-v0"
# make()'s arguments that are not settings but live objects: given to the env, never
# put in its spec (gymnasium deep-copies a spec's kwargs; a re-make plays on its own).
_LIVE = ("env", "pool", "judge", "guard")
_SOURCE = ("headless", "image_format", "step_timeout_s")
_SHAPING = ("alpha", "beta", "gamma", "reflection")


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
    `step_timeout_s`; `tasks=FILE` (a .jsonl, .json or .parquet task file, also
    `tasks_file=`) replaces the file's tasks; `judge` judges `judge`
    verifiers. Read the GuiEnv's attributes through `.unwrapped`.

    Its `spec` is the registered one with the plain settings only: the live objects
    (env, pool, judge, guard, a record_to that is not a path) are not in it, so a
    re-make from the spec (gymnasium.make(env.spec)) plays on a browser of its own,
    judged by the default guard, and records only into a data root."""
    settings = {"task_id": task_id, "profile": profile, "record_to": record_to, **overrides}
    if _is_task_file(settings.get("tasks")):  # tasks=FILE: a task file replaces the file's tasks
        settings["tasks_file"] = str(settings.pop("tasks"))
    tasks_file = settings.pop("tasks_file", None)
    environment = env_file
    if isinstance(env_file, Environment) and tasks_file:
        raise ValueError(
            f"tasks={tasks_file}: a task file replaces an environment file's tasks, not an Environment's"
        )
    if not isinstance(env_file, Environment):
        environment = load_environment(env_file, tasks_file=tasks_file)
    judge = settings.pop("judge", None)
    given = EnvironmentRuntime(environment, judge=judge) if judge is not None else environment
    spec = {"env_file": env_file, **({"tasks_file": tasks_file} if tasks_file else {}), **settings}
    return _compose(given, _spec(ENV_ID, spec), **settings)


def _is_task_file(tasks: Any) -> bool:
    return isinstance(tasks, Path) or (
        isinstance(tasks, str) and Path(tasks).suffix in (".jsonl", ".json", ".parquet")
    )


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
