"""`trajforge serve`: environments over HTTP for any RL trainer; `trajforge envs tasks`:
the RL task file of what a server serves (`python -m training.engines.env_tasks`)."""

from __future__ import annotations

from pathlib import Path

import typer

from trajforge.cli.output import fail, to_stderr

app = typer.Typer()  # its commands sit at the top level (`trajforge serve`)
group = typer.Typer(
    name="envs", help="What a running environment server offers to RL trainers.", no_args_is_help=True
)
app.add_typer(group)


@app.command()
def serve(
    sources: list[str] = typer.Argument(
        ..., metavar="ENV_FILE...", help="environment files (YAML), or `sandbox` for the embedded sandbox"
    ),
    port: int = typer.Option(8700, help="the port (0: any free one; the chosen port is printed)"),
    host: str = typer.Option("127.0.0.1", help="the address to listen on"),
    max_sessions: int = typer.Option(8, help="sessions open at once (each its own browser); more get 429"),
    idle_timeout: float = typer.Option(300.0, help="seconds a session may sit idle before it is reaped"),
    max_steps: int | None = typer.Option(None, help="steps per episode; default each file's"),
    record_to: Path | None = typer.Option(
        None, help="a data root: every episode of every session is recorded into its raw store"
    ),
    ray_address: str | None = typer.Option(
        None, help="a Ray cluster: sessions play on browser actors there (nodes with the `browser` resource)"
    ),
    tasks: Path | None = typer.Option(
        None, help="a task file (.jsonl / .parquet) that replaces the one ENV_FILE's tasks"
    ),
    contexts_per_browser: int = typer.Option(
        1,
        help="web sessions per Chromium: each its own context (storage, cookies, permissions apart); "
        "a crash of a shared Chromium fails all of its sessions (env_failed)",
    ),
    shared_driver: bool = typer.Option(
        True,
        help="with --contexts-per-browser N > 1: the N web sessions of a Chromium also share one "
        "thread and Playwright driver (~80 MB less a session); their calls take turns",
    ),
    warm_pool: bool = typer.Option(
        True,
        help="prepare a session's announced next episode on a spare environment (a second browser); "
        "off with --ray-address",
    ),
) -> None:
    """Serve environments over HTTP for any RL trainer (docs/rl-environments.md).

    POST /v1/sessions, /v1/sessions/{id}/step and /reset, DELETE /v1/sessions/{id},
    GET /v1/envs, /v1/health and /metrics (Prometheus).
    """
    import socket

    import uvicorn

    from trajforge.envs.served import served_envs
    from trajforge.envs.server import create_app

    if max_sessions < 1 or idle_timeout <= 0:
        fail("--max-sessions must be >= 1 and --idle-timeout > 0")
    if contexts_per_browser < 1:
        fail("--contexts-per-browser must be >= 1")
    import os

    from crawlers.shared_browser import ENV_VAR

    os.environ[ENV_VAR] = str(contexts_per_browser)  # every WebEnv the sessions launch reads it
    try:
        with served_envs(
            sources,
            record_to=record_to,
            max_steps=max_steps,
            ray_address=ray_address,
            sessions=max_sessions,
            tasks_file=tasks,
            shared_driver=shared_driver,
        ) as envs:
            app = create_app(
                envs, max_sessions=max_sessions, idle_timeout=idle_timeout, warm=warm_pool and not ray_address
            )
            sock = socket.create_server((host, port))  # bound here: --port 0 names its port
            server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
            to_stderr(f"serving {', '.join(envs)} on http://{host}:{sock.getsockname()[1]} (Ctrl-C stops)")
            server.run(sockets=[sock])
    except (OSError, ValueError) as err:
        fail(str(err))


@group.command()
def tasks(
    url: str = typer.Argument(..., metavar="URL", help="the environment server (trajforge serve)"),
    out: Path = typer.Argument(..., metavar="OUT", help="the parquet file to write"),
    episodes: int = typer.Option(1, help="rows per task (seeds seed, seed+1, ...)"),
    seed: int = typer.Option(0, help="the first episode's seed"),
    env: list[str] | None = typer.Option(None, help="only this environment (repeatable)"),
) -> None:
    """Write verl's RL dataset: one row per episode of every task the server serves (docs/rl-environments.md)."""
    import httpx

    from training.engines.env_tasks import main

    argv = [url, str(out), "--episodes", str(episodes), "--seed", str(seed)]
    try:
        main(argv + [a for name in env or () for a in ("--env", name)])
    except (httpx.HTTPError, ValueError, OSError) as err:
        fail(f"{url}: {err}")
