"""What `trajforge serve` offers: environment files (and the embedded sandbox) by name.

Each source is an environment file's path, or `sandbox` for the embedded sandbox
(started on loopback for as long as the server runs). Every session opens its
own GuiEnv (its own browser); with `record_to`, every episode of every session
is recorded into that data root's raw store, the session's policy id in its
`source_name`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from sandbox.server import SandboxServer
from trajforge.envs import GuiEnv, make, make_sandbox
from trajforge.envs.server import ServedEnv
from trajforge.envs.sources import SANDBOX

DEFAULT_POLICY = "server"


@contextmanager
def served_envs(
    sources: list[str], *, record_to: Path | None = None, max_steps: int | None = None
) -> Iterator[dict[str, ServedEnv]]:
    """{name: ServedEnv} for `sources`; the sandbox (if asked for) runs until the exit."""
    with ExitStack() as stack:
        envs: dict[str, ServedEnv] = {}
        for source in sources:
            if source == SANDBOX:
                url = stack.enter_context(SandboxServer()).url
                served = _served(lambda policy, url=url: _sandbox(url, record_to, max_steps, policy))
            else:
                path = Path(source)
                if not path.is_file():
                    raise FileNotFoundError(f"environment file {path} does not exist")
                served = _served(lambda policy, path=path: _file(path, record_to, max_steps, policy))
            if served.name in envs:
                raise ValueError(f"two environments are named {served.name!r} ({source}): names must differ")
            envs[served.name] = served
        yield envs


def _served(open_env) -> ServedEnv:
    # A GuiEnv launches nothing before its first reset: this probe only reads the file.
    probe = open_env(None)
    try:
        environment = probe.environment
        width, height = probe.screen_size
        return ServedEnv(
            name=environment.name,
            open=open_env,
            platform=environment.platform,
            description=environment.description or "",
            tasks=tuple(t.task_id for t in probe.tasks),
            screen=(height, width),
        )
    finally:
        probe.close()


def _file(path: Path, record_to: Path | None, max_steps: int | None, policy: str | None) -> GuiEnv:
    return make(path, record_to=record_to, max_steps=max_steps, policy_id=policy or DEFAULT_POLICY)


def _sandbox(url: str, record_to: Path | None, max_steps: int | None, policy: str | None) -> GuiEnv:
    return make_sandbox(
        url,
        languages=("en", "zh"),
        record_to=record_to,
        max_steps=max_steps,
        policy_id=policy or DEFAULT_POLICY,
    )
