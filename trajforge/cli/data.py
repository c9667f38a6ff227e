"""The data commands: stats, convert, verify, export, validate, catalog, view, import."""

from __future__ import annotations

import json
import sys
import tarfile
import time
from contextlib import contextmanager
from pathlib import Path

import typer

from schemas.errors import SchemaError
from trajforge.cli.output import fail
from trajforge.config import data_root

app = typer.Typer()


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
        fail(str(err))
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
        fail(f"{set_dir}: {err}")
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
        fail(str(err))
    for p in problems:
        typer.echo(p, err=True)
    if problems:
        fail(f"{len(problems)} problem(s) in {shard_dir}")
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
        fail(f"no raw store at {raw}")
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
        fail(str(err))
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
        fail(str(err))
    for p in report.problems[:MAX_SHOWN]:
        typer.echo(str(p), err=True)
    if len(report.problems) > MAX_SHOWN:
        typer.echo(f"... and {len(report.problems) - MAX_SHOWN} more", err=True)
    if not report.ok:
        fail(report.summary())
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
        fail(f"no data root at {root}")
    # A query alone reuses an up-to-date catalog; without one we always rebuild.
    if rebuild or query is None or is_stale(root, db):
        try:
            res = build_catalog(root, db)
        except (duckdb.Error, OSError) as err:
            fail(f"cannot build the catalog {db}: {err}")
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
        fail(f"query failed on {db}: {str(err).splitlines()[0]}")
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
        fail(f"the viewer is not available: {err}")
    try:
        index = viewer.build_site(shard_dir, out, limit=limit)
    except (SchemaError, ValueError, OSError) as err:
        fail(str(err))
    typer.echo(f"viewer: {index}")
    if not serve:
        return
    try:
        server, url = viewer.serve(Path(index).parent, port=port)
    except OSError as err:  # port in use, no permission
        fail(f"cannot serve {Path(index).parent}: {err}")
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
        fail(f"unknown format {fmt!r}; known: {', '.join(sorted(IMPORTERS))}")
    size = None
    if screen_size is not None:
        try:
            w, h = (int(v) for v in screen_size.lower().split("x"))
            if w <= 0 or h <= 0:
                raise ValueError
            size = (w, h)
        except ValueError:
            fail(f"--screen-size {screen_size!r} is not WIDTHxHEIGHT, e.g. 1080x2400")
    raw = (raw or (data or data_root()) / "raw").resolve()
    try:
        result = import_path(fmt, path, RawStore(raw), quarantine_path=quarantine, screen_size=size)
    except (SchemaError, OSError) as err:
        fail(str(err))
    typer.echo(
        f"imported {result.imported} ({result.steps} steps) into {raw / result.collection}; "
        f"already there: {result.skipped}; quarantined: {result.quarantined}"
    )
    if result.tasks_path is not None:
        typer.echo(f"tasks table: {result.tasks_path}")
    if result.quarantined:
        typer.echo(f"quarantined: {result.quarantined} (see {result.quarantine_path})", err=True)
