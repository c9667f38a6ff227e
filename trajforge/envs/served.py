"""What `trajforge serve` offers: environment files (and the embedded sandbox) by name.

Each source is an environment file's path, or `sandbox` for the embedded sandbox
(started on loopback for as long as the server runs). Every session opens its
own GuiEnv (its own browser, or a context in a Chromium it shares:
`contexts_per_browser`, crawlers/shared_browser.py); with `record_to`, every episode of every session
is recorded into that data root's raw store, the session's policy id in its
`source_name`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import gymnasium

from crawlers.shared_browser import default_contexts_per_browser
from sandbox.environment import sandbox_environment
from sandbox.server import SandboxServer
from schemas.environment import load_environment
from trajforge.envs.compose import make, make_sandbox
from trajforge.envs.server import ServedEnv
from trajforge.envs.sources import SANDBOX

DEFAULT_POLICY = "server"


@contextmanager
def served_envs(
    sources: list[str],
    *,
    record_to: Path | None = None,
    max_steps: int | None = None,
    ray_address: str | None = None,
    sessions: int = 8,
    tasks_file: Path | None = None,
    shared_driver: bool = True,
) -> Iterator[dict[str, ServedEnv]]:
    """{name: ServedEnv} for `sources`; the sandbox (if asked for) runs until the exit.

    `tasks_file` (a synthesised or hand-written task file) replaces the tasks of the one
    environment file in `sources`.

    With `ray_address`, each environment's sessions play on a RayEnvPool of
    `sessions` actors on that cluster (browsers on the nodes that declare the
    `browser` resource, desktop sessions on those that declare `desktop`) instead
    of a browser (or desktop session) in this process per session.

    `shared_driver`: when web sessions share Chromiums ($TRAJFORGE_CONTEXTS_PER_BROWSER
    N > 1) in this process, up to N of them also share a worker thread, hence one
    Playwright driver and one Chromium (trajforge/envs/sessions.py, thread groups);
    their calls then take turns. Desktop and Appium sessions, and sessions on Ray
    actors, keep a thread each.
    """
    per_thread = default_contexts_per_browser() if shared_driver and ray_address is None else 1
    files = [s for s in sources if s != SANDBOX]
    if tasks_file is not None and len(files) != 1:
        raise ValueError(
            f"--tasks {tasks_file}: serve exactly one environment file with it, got {len(files)}"
        )
    with ExitStack() as stack:
        envs: dict[str, ServedEnv] = {}
        for source in sources:
            if source == SANDBOX:
                url = stack.enter_context(SandboxServer()).url
                pool = _ray_pool(stack, sandbox_environment(url), ray_address, sessions)
                served = _served(
                    lambda policy, profile, url=url, pool=pool: _sandbox(
                        url, pool, record_to, max_steps, policy, profile
                    ),
                    per_thread,
                )
            else:
                path = Path(source)
                if not path.is_file():
                    raise FileNotFoundError(f"environment file {path} does not exist")
                pool = _ray_pool(stack, load_environment(path, tasks_file=tasks_file), ray_address, sessions)
                served = _served(
                    lambda policy, profile, path=path, pool=pool: _file(
                        path, pool, record_to, max_steps, policy, profile, tasks_file
                    ),
                    per_thread,
                )
            if served.name in envs:
                raise ValueError(f"two environments are named {served.name!r} ({source}): names must differ")
            envs[served.name] = served
        yield envs


def _ray_pool(stack: ExitStack, environment, address: str | None, size: int):
    if address is None:
        return None
    from crawlers.allowlist import Allowlist
    from crawlers.ray_pool import DesktopEnvFactory, RayEnvPool  # Ray: only when a cluster is named

    if environment.platform == "desktop":  # actors on the nodes that declare `desktop`
        pool = RayEnvPool(size, address=address, factory=DesktopEnvFactory(environment))
    else:
        pool = RayEnvPool(size, address=address, request_filter=Allowlist(environment.origins()))
    stack.callback(pool.close)
    return pool


def _served(open_env, per_thread: int = 1) -> ServedEnv:
    # A GuiEnv launches nothing before its first reset: this probe only reads the file.
    probe = open_env(None, None)
    try:
        gui = probe.unwrapped
        environment = gui.environment
        width, height = gui.screen_size
        return ServedEnv(
            name=environment.name,
            open=open_env,
            platform=environment.platform,
            description=environment.description or "",
            tasks=tuple(t.task_id for t in gui.tasks),
            screen=(height, width),
            # Only browsers in this process share threads (and their drivers).
            sessions_per_thread=per_thread if environment.platform in ("web", "mobile_web") else 1,
        )
    finally:
        probe.close()


# A served env's captured PNG travels as is (decode_screenshots=False): no need to decode it.
def _file(
    path: Path, pool, record_to, max_steps, policy: str | None, profile: str | None, tasks_file: Path | None
) -> gymnasium.Env:
    return make(
        path,
        tasks_file=tasks_file,
        profile=profile,
        pool=pool,
        record_to=record_to,
        max_steps=max_steps,
        policy_id=policy or DEFAULT_POLICY,
        decode_screenshots=False,
    )


def _sandbox(url: str, pool, record_to, max_steps, policy: str | None, profile: str | None) -> gymnasium.Env:
    return make_sandbox(
        url,
        profile=profile,
        languages=("en", "zh"),
        pool=pool,
        record_to=record_to,
        max_steps=max_steps,
        policy_id=policy or DEFAULT_POLICY,
        decode_screenshots=False,
    )
