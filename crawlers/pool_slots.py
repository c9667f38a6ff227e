"""What the env pools share (DevicePool for Appium devices, WebEnvPool for browsers,
RayEnvPool for envs in Ray actors): the interface a crawl uses (`EnvSource`,
`EnvPool`), which slot holds an env, what env a slot holds, and how a pool probes,
closes and reports a session that may already be gone."""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future
from contextlib import AbstractContextManager
from typing import Any, Protocol

log = logging.getLogger(__name__)


class EnvSource(Protocol):
    """Where a crawl's attempts get their env: one lease per attempt.

    `platform` is recorded when no lease ever succeeds; `device_of(env)` is the
    DeviceSpec of a leased env (pools of fixed devices; `devices` lists them).
    """

    platform: str

    def lease(self) -> AbstractContextManager[Any]: ...
    def slot_name(self, env) -> str | None: ...
    def device_of(self, env) -> Any: ...


class EnvPool(EnvSource, Protocol):
    """A pool of envs that plays up to `size` episodes at once.

    `submit(fn, *args)` runs `fn` on one of the pool's workers (where `lease()`
    works); `profiles` is None when a lease emulates any profile (the seed draws
    it), else the profile names of the pool's devices (the leased one is the
    episode's).
    """

    size: int
    profiles: list[str] | None

    def submit(self, fn: Callable, *args) -> Future: ...
    def stats(self) -> dict: ...


def env_alive(env) -> bool:
    """`env.is_alive()`, False when asking fails too."""
    try:
        return bool(env.is_alive())
    except Exception:
        return False


def close_quietly(env) -> None:
    """Close `env` (None allowed), logging instead of raising: the browser, the
    session or the server may be gone already."""
    if env is None:
        return
    try:
        env.close()
    except Exception as e:
        log.debug("closing a lost session: %s", e)


def first_line(e: BaseException) -> str:
    """The first line of an error (at most 300 characters), or its type's name."""
    text = str(e).strip()
    return text.splitlines()[0][:300] if text else type(e).__name__


class SlotLookup:
    """Mixin over `self._slots` (objects with `.name` and `.env`), read under
    `self._slot_guard` (the pool's lock or condition)."""

    def slot_name(self, env) -> str:
        """The name of the slot holding `env` ("<device>#<session>", "browser#<n>")."""
        return self._slot_of(env).name

    def env_of(self, slot_name: str):
        """The env a slot holds now (None while it has none)."""
        with self._slot_guard:
            for s in self._slots:
                if s.name == slot_name:
                    return s.env
        raise KeyError(f"no slot named {slot_name!r}; slots: {[s.name for s in self._slots]}")

    def _slot_of(self, env):
        with self._slot_guard:
            for s in self._slots:
                if s.env is env and env is not None:
                    return s
        raise KeyError("that env is not held by this pool (was its lease returned?)")
