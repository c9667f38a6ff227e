"""The inside of a RayEnvPool slot: a Ray actor holding one env (a WebEnv browser or an
Appium MobileEnv), and the driver-side proxy that plays an episode through it.

The actor runs its methods one at a time on one thread (Ray's default for a sync
actor), which is what Playwright's sync API needs: the browser is launched on
the first call and driven from the same thread after. The proxy (`RemoteEnv`)
has the env's interface (reset, observe, step, is_alive, restart,
close_episode, its attributes, and `page` for the environment's JavaScript), so
the episode loop, the policy and the Recorder run unchanged on the driver; each
call is one actor hop. An error the env raised comes back as itself
(BrowserCrashed, StartPageError, ...); an actor that died (its node lost) or
stopped answering is ActorLost, a BrowserCrashed, so the crawl replays the
episode whole on a fresh lease.

Ray is imported here only; nothing imports this module unless a Ray pool is used.
"""

from __future__ import annotations

import os

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

from .web_env import BrowserCrashed

_MISSING = "__trajforge_missing__"


class ActorLost(BrowserCrashed):
    """The Ray actor holding the env is gone (its node died) or did not answer in time."""


class EnvActor:
    """One env in a Ray worker process, made by `factory()` on the first call."""

    def __init__(self, factory):
        self._factory = factory
        self._env = None

    def _live(self):
        if self._env is None:
            self._env = self._factory()
        return self._env

    def where(self) -> dict:
        ctx = ray.get_runtime_context()
        return {"node_id": ctx.get_node_id(), "pid": os.getpid()}

    def launch(self) -> bool:
        self._live()
        return True

    def call(self, name: str, args: tuple, kwargs: dict):
        return getattr(self._live(), name)(*args, **kwargs)

    def get(self, name: str):
        value = getattr(self._live(), name, _MISSING)
        return _MISSING if callable(value) else value

    def has_page(self) -> bool:
        from .env_page import web_page

        return web_page(self._live()) is not None

    def page_call(self, name: str, args: tuple, kwargs: dict):
        from .env_page import web_page

        return getattr(web_page(self._live()), name)(*args, **kwargs)

    def shutdown(self) -> None:
        if self._env is not None:
            try:
                self._env.close()
            finally:
                self._env = None


_REMOTE = None


def remote_actor_class():
    """EnvActor as a Ray actor class (made once: ray.remote pickles the class)."""
    global _REMOTE
    if _REMOTE is None:
        _REMOTE = ray.remote(EnvActor)
    return _REMOTE


def get(ref, timeout_s: float | None):
    """`ray.get`, with the env's own error raised as itself and a lost actor as ActorLost."""
    try:
        return ray.get(ref, timeout=timeout_s)
    except RayTaskError as e:
        cause = getattr(e, "cause", None)
        if isinstance(cause, BaseException):
            raise cause from None
        raise
    except RayActorError as e:  # ActorDiedError, ActorUnavailableError: node or process lost
        raise ActorLost(
            f"the Ray actor holding the env was lost: {type(e).__name__}: "
            f"{str(e).splitlines()[0] if str(e) else ''}"
        ) from e
    except GetTimeoutError as e:
        raise ActorLost(f"the Ray actor did not answer within {timeout_s:.0f}s") from e


# run_command: a desktop session's `command` verifier runs in the actor, on its node.
_ENV_METHODS = {"reset", "observe", "step", "is_alive", "restart", "close_episode", "run_command"}


class RemotePage:
    """The env's page (or an Appium DriverPage) in the actor: evaluate, wait_for_*."""

    def __init__(self, actor, timeout_s: float | None):
        self._actor, self._timeout_s = actor, timeout_s

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return lambda *a, **kw: get(self._actor.page_call.remote(name, a, kw), self._timeout_s)


class RemoteEnv:
    """The driver's handle on a slot's env: every call is a call on its actor."""

    driver = None  # the page, if any, is reached through `page` (RemotePage)

    def __init__(self, actor, timeout_s: float | None, slot_name: str):
        self._actor, self._timeout_s, self.slot_name = actor, timeout_s, slot_name
        self._page = None
        self.calls = 0  # env calls made through the actor (each one hop)

    @property
    def page(self):
        if self._page is None:
            has = get(self._actor.has_page.remote(), self._timeout_s)
            self._page = RemotePage(self._actor, self._timeout_s) if has else False
        return self._page or None

    def close(self) -> None:  # the pool owns the actor's env; an episode never closes it
        pass

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        self.calls += 1
        if name in _ENV_METHODS:
            return lambda *a, **kw: get(self._actor.call.remote(name, a, kw), self._timeout_s)
        value = get(self._actor.get.remote(name), self._timeout_s)
        if isinstance(value, str) and value == _MISSING:
            raise AttributeError(f"the env in {self.slot_name} has no attribute {name!r}")
        return value
