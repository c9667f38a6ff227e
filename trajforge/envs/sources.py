"""Environments by name, for a trainer's or an evaluator's config: a file, or the sandbox.

A config names what its rollouts play as a list of sources: each an environment
file's path, or `sandbox` for the embedded sandbox (the one at `server_url`, or
one started on loopback for as long as the block runs). `env_factories` turns
them into `EnvFactory`s, each making GuiEnvs of one environment that play a
fixed list of its tasks (`factory(record_to=..., policy_id=...)`: the RL loop adds
what it decides). The sandbox's phone apps play on a phone, its other apps on a
desktop, as its crawl plays them: they come as two factories, since one Gym env
has one screen size. `source_tasks` lists a source's tasks without starting
anything; `browser_pool` is N browsers (or N Ray actors) that may reach the
factories' origins, for rollouts played at once.

Trainers reach environments only through here and `trajforge.envs.make` (DESIGN:
training imports no sandbox and no crawler internals).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from schemas.environment import load_environment
from schemas.records import Task

SANDBOX = "sandbox"


@dataclass(frozen=True)
class EnvFactory:
    """Makes GuiEnvs of one environment that play `tasks`: `factory(**more)` calls
    `make(tasks=[...], **kwargs, **more)` (what the caller adds wins)."""

    name: str
    make: Callable[..., Any]
    tasks: tuple[Task, ...]
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    origins: tuple[str, ...] = ()  # what its envs may reach (a pool's allowlist)

    def __call__(self, **more: Any):
        return self.make(tasks=list(self.tasks), **{**self.kwargs, **more})


def source_tasks(
    source: str | Path, *, languages: Sequence[str] = ("en",), catalog_seed: int = 0
) -> list[Task]:
    """The tasks of `source` in `languages`: the sandbox's catalog (one task per template and
    language, seeds from `catalog_seed`), or an environment file's tasks."""
    if str(source) == SANDBOX:
        from sandbox.tasks import build_catalog

        return build_catalog(1, tuple(languages), seed=catalog_seed)
    return [t for t in load_environment(source).as_tasks() if t.language in languages]


@contextmanager
def env_factories(
    sources: Sequence[str | Path],
    *,
    server_url: str | None = None,
    languages: Sequence[str] = ("en",),
    catalog_seed: int = 0,
    devices: Sequence[str] | None = None,
    tasks: Sequence[Task] | None = None,
    **kwargs: Any,
) -> Iterator[list[EnvFactory]]:
    """One EnvFactory per environment of `sources` (two for the sandbox: web and phone apps),
    their tasks those of `source_tasks`, or of `tasks` (Tasks to play instead: the sandbox
    takes those of its templates, a file those of its task ids; a task of neither is an
    error); `devices` names the screen (the first profile of the right family); `kwargs`
    go to every env (trajforge.envs.make / make_sandbox: env, pool, guard, image_format,
    ...). The sandbox runs at `server_url`, else is started for the block."""
    from trajforge.envs.compose import make

    if not sources:
        raise ValueError("env_factories: no environment named (a file's path, or 'sandbox')")
    claimed: set[str] = set()
    with ExitStack() as stack:
        factories: list[EnvFactory] = []
        for source in sources:
            if tasks is None:
                mine = source_tasks(source, languages=languages, catalog_seed=catalog_seed)
            else:
                mine = [t for t in tasks if _belongs(source, t)]
                claimed.update(t.task_id for t in mine)
            if str(source) == SANDBOX:
                url = server_url
                if not url:
                    from sandbox.server import SandboxServer

                    url = stack.enter_context(SandboxServer()).url
                factories += _sandbox_factories(url, mine, devices, kwargs)
                continue
            path = Path(source)
            if not path.is_file():
                raise FileNotFoundError(f"environment file {path} does not exist")
            device = devices[0] if devices else None
            extra = {**kwargs, **({"device": device} if device else {})}
            environment = load_environment(path)
            factories.append(
                EnvFactory(
                    environment.name,
                    functools.partial(make, path),
                    tuple(mine),
                    extra,
                    tuple(environment.origins()),
                )
            )
        unclaimed = [t.task_id for t in tasks or () if t.task_id not in claimed]
        if unclaimed:
            raise ValueError(f"tasks {unclaimed}: of none of the environments {list(map(str, sources))}")
        names = [f.name for f in factories]
        for f in factories:
            if f.name != SANDBOX and names.count(f.name) > 1:
                raise ValueError(f"two environments are named {f.name!r}: names must differ")
        yield factories


def _belongs(source: str | Path, task: Task) -> bool:
    """A task of the sandbox's templates, or one of an environment file's task ids."""
    if str(source) == SANDBOX:
        from sandbox.tasks import TEMPLATES

        return task.template_id in TEMPLATES
    return load_environment(source).task_spec(task.task_id) is not None


def _sandbox_factories(
    url: str, tasks: list[Task], devices: Sequence[str] | None, kwargs: Mapping[str, Any]
) -> list[EnvFactory]:
    """The sandbox's web apps on a desktop-family screen, its phone apps on a phone."""
    from crawlers.randomise import DEVICE_PROFILES, MOBILE_PROFILES
    from sandbox.apps import MOBILE_APPS
    from trajforge.envs.compose import make_sandbox

    out = []
    for family, profiles, default in (("web", DEVICE_PROFILES, None), ("mobile", MOBILE_PROFILES, "pixel_8")):
        mine = tuple(t for t in tasks if (t.app in MOBILE_APPS) == (family == "mobile"))
        if not mine:
            continue
        named = [d for d in devices or () if d in profiles]
        device = named[0] if named else default
        extra = {**kwargs, **({"device": device} if device else {})}
        make = functools.partial(make_sandbox, url)
        if devices and not named:  # an error when one of these tasks is played, not before
            make = functools.partial(
                _no_profile,
                f"devices={list(devices)!r} names no {family} profile "
                f"for the sandbox's {family} apps (expected some of {sorted(profiles)})",
            )
        out.append(EnvFactory(SANDBOX, make, mine, extra, (url.rstrip("/"),)))
    return out


def _no_profile(message: str, **kw: Any):
    raise ValueError(message)


@contextmanager
def browser_pool(size: int, factories: Sequence[EnvFactory], *, ray_address: str | None = None):
    """`size` headless browsers allowed only the factories' origins, for rollouts played at
    once (hand it to the loop as `pool=`): local ones (crawlers' WebEnvPool, one thread each),
    or with `ray_address` Ray actors on nodes with the `browser` resource (RayEnvPool)."""
    from crawlers.allowlist import Allowlist

    origins = sorted({o for f in factories for o in f.origins})
    if ray_address is not None:
        from crawlers.ray_pool import RayEnvPool

        made = RayEnvPool(size, address=ray_address, request_filter=Allowlist(origins))
    else:
        from crawlers.crawl_browser_pool import WebEnvPool

        made = WebEnvPool(size, request_filter=Allowlist(origins))
    with made:
        yield made
