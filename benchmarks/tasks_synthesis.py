"""Goal tasks synthesised from third-party apps: `trajforge tasks synthesize` per app.

    .venv/bin/python benchmarks/tasks_synthesis.py [--apps tiddlywiki,datasette,...] [--minutes 30]
        [--out /tmp/tasks-synthesis] [--sqlite-web PATH]

For each app: the web apps are started on loopback as the tests start them
(TiddlyWiki from npm, Datasette from PyPI) or, for sqlite-web (PyPI; no test uses
it), from `--sqlite-web` (its `sqlite_web` command, e.g. a venv of its own:
`python3 -m venv /tmp/sqlweb && /tmp/sqlweb/bin/pip install sqlite-web`) over a
world.db made here, read-only; the desktop apps (mousepad, gnumeric, pcmanfm)
start their own X server per episode from their environment files. Then the CLI
runs with the budget, its data under `--out/<app>`, and its one-line JSON summary
is kept. Printed: one row per app (walks, screens, candidates, validated, kept
goals and tasks, the share of 3+ step demonstrations, tasks per core-hour, the
machine's load while it ran) and the JSON lines (`--json`).

Not in run_all.py: the issue's figures take 30 minutes an app.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.thirdparty import apps  # noqa: E402

WEB = ("tiddlywiki", "datasette", "sqlite-web")
DESKTOP = ("mousepad", "gnumeric", "pcmanfm")
COUNTRIES = [
    ("CN", "中国", "Asia"), ("FR", "France", "Europe"), ("JP", "日本", "Asia"),
    ("BR", "Brazil", "South America"), ("EG", "Egypt", "Africa"),
]  # fmt: skip


def world_db(path: Path) -> Path:
    """Two tables (cities as the tests have them, countries) and an index."""
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE cities (name TEXT PRIMARY KEY, country TEXT, population INT)")
        con.executemany("INSERT INTO cities VALUES (?, ?, ?)", apps.CITIES)
        con.execute("CREATE TABLE countries (code TEXT PRIMARY KEY, name TEXT, continent TEXT)")
        con.executemany("INSERT INTO countries VALUES (?, ?, ?)", COUNTRIES)
        con.execute("CREATE INDEX cities_country ON cities(country)")
    return path


@contextmanager
def sqlite_web(folder: Path, command: str):
    """sqlite-web, read-only over a fresh world.db, on a free loopback port; yields its URL."""
    db = world_db(folder / "world.db")
    port = apps.free_port()
    log = open(folder / "sqlite-web.log", "wb")
    proc = subprocess.Popen(
        [command, "--read-only", "--no-browser", "--quiet", "-H", "127.0.0.1", "-p", str(port), str(db)],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        apps.wait_http(url + "/", proc)
        yield url
    finally:
        apps.stop(proc)
        log.close()


def started(app: str, folder: Path, sqlite_web_cmd: str):
    """(the app's running context, the URL variable its environment file reads)."""
    if app == "tiddlywiki":
        return apps.tiddlywiki(folder), "TIDDLYWIKI_URL"
    if app == "datasette":
        return apps.datasette(folder), "DATASETTE_URL"
    if app == "sqlite-web":
        return sqlite_web(folder, sqlite_web_cmd), "SQLITE_WEB_URL"
    return nullcontext(None), None


def synthesize(app: str, minutes: float, out: Path, sqlite_web_cmd: str) -> dict:
    """One app's run: its summary with the wall time and the load average over the run."""
    folder = out / app
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    context, variable = started(app, folder, sqlite_web_cmd)
    with context as url:
        env = {**os.environ, "PYTHONPATH": str(ROOT), **({variable: url} if variable else {})}
        cli = [
            sys.executable, "-m", "trajforge.cli", "tasks", "synthesize",
            str(apps.ENVIRONMENTS / f"{app}.yaml"), "--minutes", str(minutes), "--data", str(folder / "data"),
        ]  # fmt: skip
        t0, load0 = time.perf_counter(), os.getloadavg()[1]
        with open(folder / "progress.log", "w") as err:
            run = _run_to_the_end(cli, err, env)
        wall, load = time.perf_counter() - t0, (load0 + os.getloadavg()[1]) / 2
    lines = run.stdout.strip().splitlines()
    summary = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else {}
    return {"app": app, "exit": run.returncode, "wall_s": round(wall), "load": round(load, 1), **summary}


def _run_to_the_end(cli: list[str], err, env: dict) -> subprocess.CompletedProcess:
    """The CLI's run; a benchmark stopped (Ctrl-C, SIGTERM) stops it with SIGTERM, which
    the CLI unwinds like Ctrl-C, so its browsers and X servers go with it."""
    proc = subprocess.Popen(cli, stdout=subprocess.PIPE, stderr=err, text=True, env=env, cwd=ROOT)
    try:
        out, _ = proc.communicate()
    except BaseException:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
        raise
    return subprocess.CompletedProcess(cli, proc.returncode, out, None)


def table(rows: list[dict]) -> str:
    head = (
        "| app | exit | walks | screens | candidates | validated | kept goals | kept tasks (languages) "
        "| 3+ steps | rejected | tasks / core-hour | load |\n|---|---|---|---|---|---|---|---|---|---|---|---|"
    )
    lines = [head]
    for r in rows:
        lines.append(
            f"| {r['app']} | {r['exit']} | {r.get('walks')} | {r.get('screens')} | {r.get('candidates')} "
            f"| {r.get('validated')} | {r.get('kept_goals')} | {r.get('kept_tasks')} "
            f"({','.join(r.get('languages') or [])}) | {r.get('three_or_more_steps')} "
            f"| {r.get('rejected')} | {r.get('tasks_per_core_hour')} | {r['load']} |"
        )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--apps", default=",".join(WEB + DESKTOP))
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--out", type=Path, default=Path("/tmp/tasks-synthesis"))
    ap.add_argument("--sqlite-web", default=shutil.which("sqlite_web") or "/tmp/sqlweb/bin/sqlite_web")
    ap.add_argument("--json", type=Path, help="append each app's row here as a JSON line")
    args = ap.parse_args()
    # A SIGTERM unwinds like Ctrl-C: the running app's synthesis is stopped, not orphaned.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    rows = []
    for app in args.apps.split(","):
        print(f"[tasks_synthesis] {app}: {args.minutes} min", file=sys.stderr, flush=True)
        rows.append(synthesize(app, args.minutes, args.out, args.sqlite_web))
        if args.json:
            with args.json.open("a", encoding="utf-8") as f:
                f.write(json.dumps(rows[-1], ensure_ascii=False) + "\n")
    print(table(rows))
    return 0 if all(r["exit"] in (0, 4) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
