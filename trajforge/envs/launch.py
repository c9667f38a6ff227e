"""What a GuiEnv plays on: a source of leased envs, opened for every platform in one place.

A GuiEnv plays on a source the caller hands it (a pool: WebEnvPool, DevicePool,
RayEnvPool; or `OneEnv(env)` for one live env: a WebEnv, a MobileEnv on an Appium
phone), or on an env of its own that `open_source` starts at the first reset from
plain `Launch` settings: a headless Chromium allowed only the environment's origins
(web, mobile_web, the sandbox), or for a `platform: desktop` file a DesktopEnv
of its own (its own Xvfb, accessibility bus and app; crawlers/desktop_env.py).
`open_episode` opens an episode on a fresh lease, retried as a crawl retries.
"""

from __future__ import annotations

import logging
from contextlib import ExitStack
from dataclasses import dataclass

from crawlers.allowlist import Allowlist
from crawlers.crawl_episode import EpisodeContext
from crawlers.crawl_tasks import OneEnv, RetryPolicy, close_episode_quietly
from crawlers.device_pool import PoolError
from crawlers.env_episode import EnvEpisode
from crawlers.env_runtime import EnvironmentRuntime, SetupError, StartPageError
from crawlers.pool_slots import EnvSource
from crawlers.web_env import BrowserCrashed, WebEnv
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


def open_source(environment: Environment, launch: Launch):
    """(a source of leases on an env started for `environment`, that env: its owner closes it)."""
    if environment.platform == "desktop":
        from crawlers.desktop_env import DesktopEnv  # python-xlib: the `desktop` extra

        env = DesktopEnv(environment, image_format=launch.image_format, step_timeout_s=launch.step_timeout_s)
    elif environment.platform in LAUNCHED:
        env = WebEnv.launch(
            headless=launch.headless,
            image_format=launch.image_format,
            step_timeout_s=launch.step_timeout_s,
            request_filter=Allowlist(environment.origins()),
        )
    else:
        raise ValueError(
            f"environment '{environment.name}': platform {environment.platform} runs on an "
            f"Appium device; pass env= (a MobileEnv) or pool= (a DevicePool)"
        )
    return OneEnv(env), env


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
