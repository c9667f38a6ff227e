"""`trajforge crawl`: an environment file's tasks (or an exploration) into the raw store."""

from __future__ import annotations

import json
import logging
from contextlib import ExitStack, contextmanager, nullcontext
from pathlib import Path

import typer

from trajforge.cli.output import EXIT_ALL_ERRORED, fail, to_stderr
from trajforge.config import data_root

app = typer.Typer()


# typer reads one parameter per option: the 18 stay, and meet in one EnvCrawl below.
@app.command()
def crawl(
    env_file: Path = typer.Argument(..., metavar="ENV_FILE", help="an environment file (YAML)"),
    tasks: Path | None = typer.Option(None, help="a JSONL or Parquet task file (replaces the file's tasks)"),
    policy: str | None = typer.Option(
        None,
        help="oracle, random_walk, frontier (coverage-guided exploration), replay or agent; "
        "default random_walk (frontier when the file's explore.policy says so)",
    ),
    episodes: int | None = typer.Option(None, help="exploration episodes (or the first N tasks)"),
    minutes: float | None = typer.Option(
        None, min=0.001, help="a time budget: no episode starts after it (default the file's explore.minutes)"
    ),
    seed: int = typer.Option(0, help="the crawl seed (ids, devices, the walk)"),
    max_steps: int | None = typer.Option(
        None, help="steps per episode; default the file's max_steps / explore.max_steps"
    ),
    data: Path | None = typer.Option(None, help="data root; default $TRAJFORGE_DATA or ./data"),
    collection: str | None = typer.Option(None, help="raw-store collection; default env/<name>"),
    replay_from: str | None = typer.Option(
        None, help="with --policy replay: a collection whose trajectories (same task ids) are played back"
    ),
    vlm_config: Path | None = typer.Option(
        None, help="a JSON VLM backend config, for --policy agent and judge verifiers"
    ),
    image_format: str = typer.Option("png", help="png or jpeg"),
    appium: bool = typer.Option(
        False, help="play on phones through a local Appium server (Chromium phones of the file's devices)"
    ),
    devices_file: Path | None = typer.Option(
        None, help="an Appium capabilities file of real devices (docs/device_farm.md); implies --appium"
    ),
    appium_url: str | None = typer.Option(None, help="an Appium server already running"),
    retries: int = typer.Option(
        2,
        min=0,
        help="times a task is tried again after a failed attempt (browser lost, start page or wait_for failed)",
    ),
    retry_errors: bool = typer.Option(
        False,
        "--retry-errors",
        help="play again the tasks whose stored episode is an error (the new episode replaces it)",
    ),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="log each failed attempt with its traceback"),
) -> None:
    """Crawl an environment file's tasks (or explore it) into the raw store: resumable, stable ids.

    Progress (a line per episode) and the causes of errored episodes go to stderr,
    the figures (one JSON line) to stdout. Exit code 3 when every episode errored.
    """
    from crawlers.env_crawl import ENV_POLICIES, EnvCrawl
    from trajforge.store.raw import RawStore

    if policy is not None and policy not in ENV_POLICIES:
        fail(f"--policy {policy!r}: expected one of {', '.join(ENV_POLICIES)}")
    if not verbose:  # the progress lines name every retry and error; tracebacks on request
        logging.getLogger("crawlers.crawl_driver").setLevel(logging.CRITICAL)
    environment = _environment(env_file, tasks)
    if policy is None:
        explore = environment.explore
        policy = "frontier" if explore is not None and explore.policy == "frontier" else "random_walk"
    store = RawStore((data or data_root()).resolve() / "raw")
    backend, judge = _vlm_from(vlm_config, store) if vlm_config is not None else (None, None)
    replay = _recorded_actions(store, replay_from) if replay_from else None
    if policy == "replay" and replay is None and not any("actions" in t.params for t in environment.tasks):
        fail("--policy replay needs --replay-from COLLECTION or tasks with params.actions")
    how = EnvCrawl(  # the crawl's one configuration: every option that shapes it lands here
        policy=policy,
        seed=seed,
        episodes=episodes,
        minutes=minutes,
        max_steps=max_steps,
        retries=retries,
        retry_errors=retry_errors,
        judge=judge,
        backend=backend,
        replay=replay,
        image_format=image_format,
    )
    on_phones = appium or devices_file or appium_url
    pool = _device_pool(environment, devices_file, appium_url, image_format) if on_phones else nullcontext()
    _report(_run(environment, how, store, collection or f"env/{environment.name}", pool))


def _environment(env_file: Path, tasks: Path | None):
    """The environment file, its tasks replaced by the task file's when one is given."""
    from schemas.environment import EnvironmentFileError, load_environment

    try:
        return load_environment(env_file, tasks_file=tasks)
    except EnvironmentFileError as err:
        fail(str(err))


def _run(environment, how, store, collection: str, pool):
    """The crawl's figures; `pool` opens the phones it plays on (None: the crawl's own browser)."""
    from crawlers.crawl_report import progress_line
    from crawlers.env_crawl import crawl_environment

    try:
        with pool as devices:
            return crawl_environment(
                environment,
                how,
                store=store,
                collection=collection,
                pool=devices,
                progress=lambda event: to_stderr(progress_line(event, environment.name)),
            )
    except ValueError as err:
        fail(str(err))


def _report(stats) -> None:
    """The figures on stdout, the causes of errors on stderr; exit 3 when every episode errored."""
    from crawlers.crawl_report import all_errored, error_lines, summary_lines

    typer.echo(json.dumps(stats.summary(), sort_keys=True))
    for line in [*summary_lines(stats), *error_lines(stats)]:
        to_stderr(line)
    if all_errored(stats):
        to_stderr(f"error: every episode errored ({stats.error}); exit code {EXIT_ALL_ERRORED}")
        raise typer.Exit(EXIT_ALL_ERRORED)


@contextmanager
def _device_pool(environment, devices_file, appium_url, image_format):
    """A DevicePool for the environment: the devices file's phones, or Chromium phones of
    the file's `devices` (default pixel_8), on `appium_url` or a local Appium server."""
    from crawlers.appium_server import AppiumServer
    from crawlers.capabilities import chromium_device, load_devices
    from crawlers.device_pool import DevicePool
    from crawlers.randomise import MOBILE_PROFILES

    if devices_file is not None:
        specs = load_devices(devices_file)
    else:
        names = [n for n in environment.devices if n in MOBILE_PROFILES] or ["pixel_8"]
        specs = [chromium_device(n) for n in names]
    with ExitStack() as stack:
        server = None if appium_url else stack.enter_context(AppiumServer())
        pool = DevicePool(specs, server=server, server_url=appium_url, image_format=image_format)
        with pool:  # closed before the server it uses stops
            yield pool


def _recorded_actions(store, collection: str) -> dict:
    """task id -> the actions of its recorded trajectory (the first one per task)."""
    by_tid, task_of = {}, {}
    for t in store.iter_trajectories(collection):
        task_of.setdefault(t.trajectory_id, t.task.task_id)
    if not task_of:
        fail(f"--replay-from {collection!r}: no trajectories in {store.root / collection}")
    for step in store.iter_steps(collection):
        by_tid.setdefault(step.trajectory_id, []).append(step)
    out = {}
    for tid, steps in by_tid.items():
        task_id = task_of.get(tid)
        if task_id is not None and task_id not in out:
            out[task_id] = [s.action for s in sorted(steps, key=lambda s: s.index)]
    return out


def _vlm_from(config_path: Path, store):
    """(backend, judge callable) from a JSON backend config: the agent's model and the
    episode judge of `judge` verifiers (the curation's VLM judge, one episode at a time)."""
    from filters.judge import episode_judge
    from trajforge.vlm.backend_config import backend_from_config

    try:
        backend = backend_from_config(json.loads(config_path.read_text()))
    except (OSError, ValueError, KeyError) as err:
        fail(f"--vlm-config {config_path}: {err}")
    return backend, episode_judge(backend, store.blobs)
