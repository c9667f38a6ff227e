"""The `trajforge` command: crawl an environment, export shards, count, validate, catalog, view.

Bad input (a missing folder, a broken manifest or shard) ends with a one-line
error on stderr and exit code 2, never a traceback. `trajforge crawl` exits
with 3 when every episode it played errored (the causes are on stderr).

Each command imports its stage inside its function, on purpose: `trajforge stats`
must not pay for Playwright, Appium, DuckDB, fsspec or torch, which other commands
import. The CLI is the top of the package graph, so none of these hides a cycle.
"""

from __future__ import annotations

import json
import logging
import sys
import tarfile
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path

import typer

from schemas.errors import SchemaError
from trajforge.config import data_root

app = typer.Typer(
    help="trajforge: GUI-agent trajectories to training data.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
)

EXIT_BAD_INPUT = 2
EXIT_ALL_ERRORED = 3  # crawl: every episode played errored


def _fail(message: str) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(EXIT_BAD_INPUT)


@contextmanager
def _set_folder(shard_dir: str):
    """A shard folder, or a set at an fsspec URL (s3://...) fetched to a temporary one."""
    from trajforge.store.object_store import is_url

    if not is_url(shard_dir):
        yield Path(shard_dir)
        return
    from trajforge.publish.remote import fetched_set

    with fetched_set(shard_dir) as folder:
        yield folder


@app.command()
def stats(
    shard_dir: str = typer.Argument(..., help="a shard folder (with manifest.json) or its s3:// URL"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
) -> None:
    """Count trajectories, steps, languages, actions... in exported shards."""
    from trajforge.read.stats import format_table, shard_stats

    try:
        with _set_folder(shard_dir) as folder:
            result = shard_stats(folder)
    except (SchemaError, tarfile.TarError, OSError) as err:
        _fail(str(err))
    typer.echo(json.dumps(result, ensure_ascii=False, sort_keys=True) if as_json else format_table(result))


@app.command()
def convert(
    set_dir: Path = typer.Argument(..., metavar="SET_DIR", help="a set's shard folder"),
    to: str = typer.Option(..., "--to", help="llamafactory, swift, verl, easyr1, trl or hf-parquet"),
    out: Path = typer.Option(..., "--out", help="output folder (replaced atomically)"),
    profile: str | None = typer.Option(None, help="model profile; must be the set's"),
) -> None:
    """Convert a reasoning / Chinese / grounding set to a trainer's format."""
    from trajforge.convert import convert as convert_set

    try:
        result = convert_set(set_dir, to, out, profile=profile)
    except (SchemaError, ValueError, OSError) as err:
        _fail(f"{set_dir}: {err}")
    typer.echo(
        f"{result['samples']} samples to {out} ({to}); per split {result['per_split']}; "
        f"{result['inexpressible_count']} the format cannot express (listed in the manifest)"
    )


@app.command()
def verify(shard_dir: Path = typer.Argument(..., help="a shard folder (with manifest.json)")) -> None:
    """Check every shard's size and sha256 against the manifest."""
    from trajforge.publish.shards import verify as verify_shards

    try:
        problems = verify_shards(shard_dir)
    except (SchemaError, OSError) as err:
        _fail(str(err))
    for p in problems:
        typer.echo(p, err=True)
    if problems:
        _fail(f"{len(problems)} problem(s) in {shard_dir}")
    typer.echo(f"ok: {shard_dir}")


@app.command()
def export(
    data: Path | None = typer.Option(None, help="data root; default $TRAJFORGE_DATA or ./data"),
    raw: Path | None = typer.Option(None, help="raw store; default <data>/raw"),
    dataset: str = typer.Option("sandbox", help="dataset name"),
    out: str | None = typer.Option(
        None, help="shard folder or s3:// URL (published, manifest last); default <data>/shards/<dataset>"
    ),
    collection: list[str] | None = typer.Option(None, help="collections to export (repeatable); default all"),
    max_samples: int = typer.Option(1000, help="most samples per shard"),
    max_bytes: int = typer.Option(500_000_000, help="most bytes per shard"),
    split_seed: str = typer.Option("v1", help="seed of the train/val/test assignment"),
    resolution: str = typer.Option("native", help="image resolution profile: native, 1120, 448 or qwen"),
    progress: bool = typer.Option(True, help="show a progress bar on stderr"),
) -> None:
    """Export the raw store to WebDataset shards split by trajectory."""
    from trajforge.publish.export import export_shards
    from trajforge.store.raw import RawStore

    root = (data or data_root()).resolve()
    raw = (raw or root / "raw").resolve()
    from trajforge.publish.remote import shard_destination
    from trajforge.store.object_store import is_url

    out = out if out and is_url(out) else Path(out or root / "shards" / dataset).resolve()
    if not raw.is_dir():
        _fail(f"no raw store at {raw}")
    store = RawStore(raw)
    bar = None
    if progress:
        from tqdm import tqdm

        total = sum(t.num_steps for t in store.iter_trajectories(collection or None))
        bar = tqdm(total=total, unit="step", desc=f"export {dataset}", file=sys.stderr)
    try:
        with shard_destination(out) as folder:  # a URL: written locally, then published
            result = export_shards(
                store,
                folder,
                dataset=dataset,
                collections=collection or None,
                max_samples_per_shard=max_samples,
                max_bytes_per_shard=max_bytes,
                split_seed=split_seed,
                resolution=resolution,
                progress=None if bar is None else bar.update,
            )
    except (SchemaError, ValueError, OSError) as err:
        _fail(str(err))
    finally:
        if bar is not None:
            bar.close()
    rate = result.samples / result.seconds if result.seconds else 0.0
    typer.echo(
        f"exported {result.samples} steps of {result.trajectories} trajectories to "
        f"{result.shards} shards ({result.bytes / 1e6:.1f} MB) in {out} "
        f"[{result.seconds:.1f} s, {rate:.0f} steps/s, version {result.manifest['version']}]"
    )
    if result.skipped:
        typer.echo(f"quarantined: {result.skipped} (see {out}/quarantine.jsonl)", err=True)


MAX_SHOWN = 50  # problems printed by validate; the rest are counted


@app.command()
def validate(
    shard_dir: str = typer.Argument(..., help="a shard folder (with manifest.json) or its s3:// URL"),
    images: bool = typer.Option(True, help="check each image's header and format"),
) -> None:
    """Check shards against the manifest and every sample against the schema."""
    from trajforge.read.validate import validate as run_validate

    try:
        with _set_folder(shard_dir) as folder:
            report = run_validate(folder, images=images)
        report.shard_dir = shard_dir  # name what the user gave, not the temporary copy
    except (SchemaError, OSError) as err:
        _fail(str(err))
    for p in report.problems[:MAX_SHOWN]:
        typer.echo(str(p), err=True)
    if len(report.problems) > MAX_SHOWN:
        typer.echo(f"... and {len(report.problems) - MAX_SHOWN} more", err=True)
    if not report.ok:
        _fail(report.summary())
    typer.echo(report.summary())


@app.command()
def catalog(
    data: Path | None = typer.Option(None, help="data root; default $TRAJFORGE_DATA or ./data"),
    db: Path | None = typer.Option(None, help="database file; default <data>/catalog.duckdb"),
    query: str | None = typer.Option(None, "--query", "-q", help="SQL to run on the catalog"),
    rebuild: bool = typer.Option(False, help="rebuild even when the catalog is up to date"),
    as_json: bool = typer.Option(False, "--json", help="query rows as JSON lines"),
) -> None:
    """Build the DuckDB catalog (trajectories, steps, shards) and query it."""
    import duckdb

    from trajforge.read.duckdb_catalog import build_catalog, catalog_path, is_stale
    from trajforge.read.duckdb_catalog import query as run_query

    root = (data or data_root()).resolve()
    db = (db or catalog_path(root)).resolve()
    if not root.is_dir():
        _fail(f"no data root at {root}")
    # A query alone reuses an up-to-date catalog; without one we always rebuild.
    if rebuild or query is None or is_stale(root, db):
        try:
            res = build_catalog(root, db)
        except (duckdb.Error, OSError) as err:
            _fail(f"cannot build the catalog {db}: {err}")
        for p in res.problems:
            typer.echo(f"warning: {p}", err=True)
        if query is None:
            typer.echo(
                f"catalog {res.path}: trajectories/steps from {res.source}, "
                f"{len(res.datasets)} dataset(s), {res.shards} shards "
                f"[{res.seconds:.2f} s]"
            )
    if query is None:
        return
    try:
        cols, rows = run_query(db, query)
    except duckdb.Error as err:
        _fail(f"query failed on {db}: {str(err).splitlines()[0]}")
    if as_json:
        for r in rows:
            typer.echo(json.dumps(dict(zip(cols, r)), ensure_ascii=False, default=str))
        return
    typer.echo("\t".join(cols))
    for r in rows:
        typer.echo("\t".join("" if v is None else str(v) for v in r))


@app.command()
def view(
    shard_dir: Path = typer.Argument(..., help="a shard folder (with manifest.json)"),
    out: Path | None = typer.Option(None, help="site folder; default chosen by the viewer"),
    limit: int | None = typer.Option(None, help="most trajectories to show"),
    serve: bool = typer.Option(False, "--serve", help="serve the site on localhost"),
    port: int = typer.Option(0, help="port for --serve; 0 picks a free one"),
) -> None:
    """Build a static HTML viewer of the trajectories (and optionally serve it)."""
    try:
        from trajforge.read import viewer  # imported here: jinja2/pillow only when viewing
    except ImportError as err:
        _fail(f"the viewer is not available: {err}")
    try:
        index = viewer.build_site(shard_dir, out, limit=limit)
    except (SchemaError, ValueError, OSError) as err:
        _fail(str(err))
    typer.echo(f"viewer: {index}")
    if not serve:
        return
    try:
        server, url = viewer.serve(Path(index).parent, port=port)
    except OSError as err:  # port in use, no permission
        _fail(f"cannot serve {Path(index).parent}: {err}")
    typer.echo(f"serving {url} (Ctrl-C to stop)")
    try:  # the server runs in a daemon thread: keep the command alive until Ctrl-C
        while True:  # short sleeps: a signal is handled within a second, whatever the load
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()


@app.command("import")
def import_(
    fmt: str = typer.Argument(
        ...,
        metavar="FORMAT",
        help="aitz, android_control, gui_odyssey, mind2web, guiact, "
        "agentnet, os_genesis, autoglm or android_world",
    ),
    path: Path = typer.Argument(..., metavar="PATH", help="a file or folder of the dataset's records"),
    data: Path | None = typer.Option(None, help="data root; default $TRAJFORGE_DATA or ./data"),
    raw: Path | None = typer.Option(None, help="raw store; default <data>/raw"),
    quarantine: Path | None = typer.Option(
        None, help="quarantine JSONL; default <raw>/import/<format>/quarantine.jsonl"
    ),
    screen_size: str | None = typer.Option(
        None, help="WIDTHxHEIGHT of the screenshots, for records that state none"
    ),
) -> None:
    """Import a public GUI-agent dataset into the raw store (collection import/<format>)."""
    from trajforge.importers import IMPORTERS, import_path
    from trajforge.store.raw import RawStore

    if fmt not in IMPORTERS:
        _fail(f"unknown format {fmt!r}; known: {', '.join(sorted(IMPORTERS))}")
    size = None
    if screen_size is not None:
        try:
            w, h = (int(v) for v in screen_size.lower().split("x"))
            if w <= 0 or h <= 0:
                raise ValueError
            size = (w, h)
        except ValueError:
            _fail(f"--screen-size {screen_size!r} is not WIDTHxHEIGHT, e.g. 1080x2400")
    raw = (raw or (data or data_root()) / "raw").resolve()
    try:
        result = import_path(fmt, path, RawStore(raw), quarantine_path=quarantine, screen_size=size)
    except (SchemaError, OSError) as err:
        _fail(str(err))
    typer.echo(
        f"imported {result.imported} ({result.steps} steps) into {raw / result.collection}; "
        f"already there: {result.skipped}; quarantined: {result.quarantined}"
    )
    if result.tasks_path is not None:
        typer.echo(f"tasks table: {result.tasks_path}")
    if result.quarantined:
        typer.echo(f"quarantined: {result.quarantined} (see {result.quarantine_path})", err=True)


@app.command()
def crawl(
    env_file: Path = typer.Argument(..., metavar="ENV_FILE", help="an environment file (YAML)"),
    tasks: Path | None = typer.Option(None, help="a JSONL or Parquet task file (replaces the file's tasks)"),
    policy: str = typer.Option("random_walk", help="oracle, random_walk, replay or agent"),
    episodes: int | None = typer.Option(None, help="exploration episodes (or the first N tasks)"),
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
    from crawlers.crawl_report import all_errored, error_lines, progress_line
    from crawlers.env_crawl import ENV_POLICIES, EnvCrawl, crawl_environment
    from schemas.environment import EnvironmentFileError, load_environment
    from trajforge.store.raw import RawStore

    if policy not in ENV_POLICIES:
        _fail(f"--policy {policy!r}: expected one of {', '.join(ENV_POLICIES)}")
    if not verbose:  # the progress lines name every retry and error; tracebacks on request
        logging.getLogger("crawlers.crawl_driver").setLevel(logging.CRITICAL)
    try:
        environment = load_environment(env_file, tasks_file=tasks)
    except EnvironmentFileError as err:
        _fail(str(err))
    store = RawStore((data or data_root()).resolve() / "raw")
    backend = judge = None
    if vlm_config is not None:
        backend, judge = _vlm_from(vlm_config, store)
    replay = _recorded_actions(store, replay_from) if replay_from else None
    if policy == "replay" and replay is None and not any("actions" in t.params for t in environment.tasks):
        _fail("--policy replay needs --replay-from COLLECTION or tasks with params.actions")
    try:
        with ExitStack() as stack:
            pool = None
            if appium or devices_file or appium_url:
                pool = stack.enter_context(_device_pool(environment, devices_file, appium_url, image_format))
            how = EnvCrawl(
                policy=policy,
                seed=seed,
                episodes=episodes,
                max_steps=max_steps,
                retries=retries,
                retry_errors=retry_errors,
                judge=judge,
                backend=backend,
                replay=replay,
                image_format=image_format,
            )
            stats = crawl_environment(
                environment,
                how,
                store=store,
                collection=collection or f"env/{environment.name}",
                pool=pool,
                progress=lambda event: _to_stderr(progress_line(event, environment.name)),
            )
    except ValueError as err:
        _fail(str(err))
    typer.echo(json.dumps(stats.summary(), sort_keys=True))
    for line in error_lines(stats):
        _to_stderr(line)
    if all_errored(stats):
        _to_stderr(f"error: every episode errored ({stats.error}); exit code {EXIT_ALL_ERRORED}")
        raise typer.Exit(EXIT_ALL_ERRORED)


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
        _fail("--max-sessions must be >= 1 and --idle-timeout > 0")
    try:
        with served_envs(
            sources, record_to=record_to, max_steps=max_steps, ray_address=ray_address, sessions=max_sessions
        ) as envs:
            app = create_app(envs, max_sessions=max_sessions, idle_timeout=idle_timeout)
            sock = socket.create_server((host, port))  # bound here: --port 0 names its port
            server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
            _to_stderr(f"serving {', '.join(envs)} on http://{host}:{sock.getsockname()[1]} (Ctrl-C stops)")
            server.run(sockets=[sock])
    except (OSError, ValueError) as err:
        _fail(str(err))


@app.command()
def train(
    kind: str = typer.Argument(..., metavar="sft|rl", help="supervised fine-tuning or RL"),
    engine: str = typer.Option("builtin", help="builtin, trl, swift, llamafactory, verl or easyr1"),
    set_dir: Path = typer.Option(..., "--set", help="a reasoning or grounding set (a shard folder)"),
    model: str = typer.Option(
        ..., help="a local model directory, or `tiny` (the offline random-weight model)"
    ),
    out: Path = typer.Option(..., help="where the configs, the converted data and the checkpoint go"),
    gpus: int = typer.Option(1, help="GPUs per node (0: CPU)"),
    nodes: int = typer.Option(1, help="nodes"),
    max_steps: int | None = typer.Option(None, help="optimiser steps; default the engine's"),
    option: list[str] = typer.Option(
        [], "--option", help="an engine field, KEY=VALUE (JSON value; repeatable)"
    ),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="print the exact command and configuration; run nothing"
    ),
) -> None:
    """Train on a set with one of the engines labs use (docs/training.md).

    Exit code: the engine's own when it fails (its output is on the terminal).
    """
    import subprocess

    from training.engines import EngineError, TrainRequest, plan

    options = {}
    for item in option:
        key, sep, value = item.partition("=")
        if not sep or not key:
            _fail(f"--option {item!r}: expected KEY=VALUE")
        try:
            options[key] = json.loads(value)
        except json.JSONDecodeError:
            options[key] = value
    try:
        if not (set_dir / "manifest.json").is_file():
            raise EngineError(f"--set {set_dir}: no manifest.json (not a shard set)")
        request = TrainRequest(kind, set_dir.resolve(), model, out.resolve(), gpus, nodes, max_steps, options)
        launch = plan(engine, request)
    except EngineError as err:
        _fail(str(err))
    from trajforge.convert import ConvertError, converted, ensure_converted

    if dry_run:
        typer.echo(launch.describe(request.out), nl=False)
        for c in launch.conversions:
            done = converted(c.set_dir, c.format, c.out)
            typer.echo(f"# {c.out}: {'holds this version of the set' if done else 'would be converted'}")
        return
    launch.write(request.out)
    try:
        for c in launch.conversions:
            if ensure_converted(c.set_dir, c.format, c.out) is not None:
                _to_stderr(f"converted {c.set_dir} to {c.format} under {c.out}")
        launch.prepare()
    except ConvertError as err:
        _fail(str(err))
    except (OSError, ValueError) as err:
        _fail(f"engine {engine}: preparing the run: {err}")
    import os

    code = subprocess.call(launch.argv, cwd=launch.cwd, env={**os.environ, **launch.env})
    if code != 0:
        _to_stderr(f"error: engine {engine} exited with {code}")
        raise typer.Exit(code)


def _to_stderr(line: str | None) -> None:
    """A line on stderr above the progress bar (tqdm's, on a terminal)."""
    if line is not None:
        from tqdm import tqdm

        tqdm.write(line, file=sys.stderr)


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
        _fail(f"--replay-from {collection!r}: no trajectories in {store.root / collection}")
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
    from trajforge.vlm.backends import backend_from_config

    try:
        backend = backend_from_config(json.loads(config_path.read_text()))
    except (OSError, ValueError, KeyError) as err:
        _fail(f"--vlm-config {config_path}: {err}")
    return backend, episode_judge(backend, store.blobs)


if __name__ == "__main__":
    app()
