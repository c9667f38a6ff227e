"""What an environment's episodes play on: one function opens it for every platform.

`open_env_source` gives an `EnvSource` (crawlers/pool_slots.py: leases of
envs, one per attempt) for an environment file: the caller's pool, the
caller's env, or an env of its own (a DesktopEnv for a desktop file, a
headless Chromium allowed only the file's origins for web, mobile_web and the
sandbox), closed when the block ends. Crawls and the Gym API
(trajforge.envs) open theirs through it. `OneEnv` makes one env a source.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from schemas.environment import Environment

from .allowlist import Allowlist
from .episode import CrawlEnv, env_platform
from .pool_slots import EnvPool, EnvSource
from .web_env import BrowserCrashed, WebEnv


class OneEnv:
    """One env as a source of leases: restarted when it died, its episode closed after."""

    def __init__(self, env: CrawlEnv):
        self.env = env
        self.platform = env_platform(env)

    @contextmanager
    def lease(self) -> Iterator[CrawlEnv]:
        if not self.env.is_alive():  # died after the previous episode's last action
            self.env.restart()
        try:
            yield self.env
        except BrowserCrashed:
            self.env.restart()
            raise

    def slot_name(self, env: CrawlEnv) -> None:
        return None

    def device_of(self, env: CrawlEnv):
        raise TypeError("one env has no device spec: give the episode its device")


def close_episode_quietly(env: CrawlEnv) -> None:
    try:
        env.close_episode()
    except Exception:  # the browser may be gone; restart() already handled it
        pass


@contextmanager
def open_env_source(
    environment: Environment,
    *,
    env: CrawlEnv | None = None,
    pool: EnvPool | None = None,
    headless: bool = True,
    image_format: str = "png",
    step_timeout_s: float = 10.0,
    extra_origins: Sequence[str] = (),
) -> Iterator[EnvSource]:
    """What `environment`'s episodes play on, for the block.

    `pool` (a WebEnvPool, DevicePool or RayEnvPool) or `env` (a WebEnv, a
    MobileEnv on an Appium phone, a DesktopEnv; its own request filter) is used
    as is and stays open. Otherwise an env of its own, closed after the block:
    for a desktop file a DesktopEnv (its own Xvfb, accessibility bus and app);
    for web and mobile_web (the sandbox's too) a Chromium allowed to reach only
    the environment's origins and `extra_origins`. A native app (android, ios)
    plays on an Appium device: give `env` or `pool`.
    """
    if env is not None and pool is not None:
        raise ValueError("give env= or pool=, not both")
    if pool is not None:
        yield pool
        return
    if env is not None:
        yield OneEnv(env)
        return
    own: CrawlEnv
    if environment.platform == "desktop":
        from .desktop_env import DesktopEnv  # python-xlib: the `desktop` extra

        own = DesktopEnv(environment, image_format=image_format, step_timeout_s=step_timeout_s)
    elif environment.platform in ("web", "mobile_web"):
        own = WebEnv.launch(
            headless=headless,
            image_format=image_format,
            step_timeout_s=step_timeout_s,
            request_filter=Allowlist([*environment.origins(), *extra_origins]),
        )
    else:
        raise ValueError(
            f"environment '{environment.name}': platform {environment.platform} runs on an "
            f"Appium device; pass env= (a MobileEnv) or pool= (a DevicePool)"
        )
    try:
        yield OneEnv(own)
    finally:
        own.close()  # a desktop's X server, bus and apps too: nothing left running
