"""What a GuiEnv plays on: a source of leased envs, opened for every platform in one place.

A GuiEnv plays on a source the caller hands it (a pool: WebEnvPool, DevicePool,
RayEnvPool; or `OneEnv(env)` for one live env: a WebEnv, a MobileEnv on an Appium
phone), or on an env of its own that crawlers.env_source.open_env_source (the crawl's
too) starts at the first reset from plain `Launch` settings: a headless Chromium
allowed only the environment's origins (web, mobile_web, the sandbox), or for a
`platform: desktop` file a DesktopEnv of its own (its own Xvfb, accessibility bus
and app; crawlers/desktop_env.py).
`open_episode` opens an episode on a fresh lease, retried as a crawl retries.
"""

from __future__ import annotations

import logging
from contextlib import ExitStack
from dataclasses import dataclass

from crawlers.crawl_driver import RetryPolicy
from crawlers.device_pool import PoolError
from crawlers.env_runtime import EnvironmentRuntime, SetupError, StartPageError
from crawlers.env_source import close_episode_quietly
from crawlers.episode import EnvEpisode, EpisodeContext
from crawlers.pool_slots import EnvSource
from crawlers.web_env import BrowserCrashed
from schemas.environment import Environment
from schemas.observation import Observation
from schemas.records import Task

log = logging.getLogger(__name__)

# The platforms an env of its own can play; the others run on an Appium device.
LAUNCHED = ("web", "mobile_web", "desktop")


@dataclass(frozen=True)
class Launch:
    """How a GuiEnv starts an env of its own: `headless`, the screenshots'
    `image_format`, and how long one step may take (`step_timeout_s`)."""

    headless: bool = True
    image_format: str = "png"
    step_timeout_s: float = 10.0


def require_launchable(environment: Environment) -> None:
    """An environment a GuiEnv can start an env of its own for (crawlers.env_source)."""
    if environment.platform not in LAUNCHED:
        raise ValueError(
            f"environment '{environment.name}': platform {environment.platform} runs on an "
            f"Appium device; pass env= (a MobileEnv) or pool= (a DevicePool)"
        )


def open_episode(
    source: EnvSource, runtime: EnvironmentRuntime, task: Task, ctx: EpisodeContext, retries: int
) -> tuple[EnvEpisode, Observation, ExitStack, int]:
    """The episode opened on a fresh lease of `source`, retried (`retries` times) on a lost
    browser or a start page that did not load; (episode, first observation, the lease to
    give back, attempts it took)."""

    def attempt(n: int) -> tuple[EnvEpisode, Observation, ExitStack, int]:
        stack = ExitStack()
        env = stack.enter_context(source.lease())
        try:
            episode = EnvEpisode(env, runtime, task, ctx)
            obs = episode.open()
        except BaseException as e:
            close_episode_quietly(env)
            stack.__exit__(type(e), e, e.__traceback__)
            raise
        return episode, obs, stack, n + 1

    retry = RetryPolicy(retries, fatal=(PoolError,), retry_on=(BrowserCrashed, StartPageError, SetupError))
    opened, error = retry.run(
        attempt,
        what=f"{runtime.name} task {task.task_id}",
        on_retry=lambda message: log.warning("reset: retrying after %s", message),
    )
    if error is not None:
        raise error
    return opened
