"""`trajforge tasks`: goal tasks for an environment file. `tasks synthesize` explores the
app and writes the goals it validated (crawlers/task_synthesis.py); `tasks validate` keeps
the tasks of a task file that are non-trivial, achievable, specific and new
(crawlers/task_validation.py)."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import typer

from trajforge.cli.output import EXIT_NONE_KEPT, fail, to_stderr

app = typer.Typer()
group = typer.Typer(
    name="tasks",
    help="Goal tasks: synthesise them from an app, validate a task file (hand-written or synthesised).",
    no_args_is_help=True,
)
app.add_typer(group)


@group.command()
def synthesize(
    env_file: Path = typer.Argument(..., metavar="ENV_FILE", help="the environment file (YAML)"),
    minutes: float = typer.Option(..., min=0.1, help="the whole budget: exploring, then validating"),
    languages: str = typer.Option("en,zh", help="the kept tasks' languages, comma-separated"),
    out: Path | None = typer.Option(
        None, help="the task file to write (default DATA/tasks/<environment>.jsonl)"
    ),
    data: Path = typer.Option(Path("data"), help="the data root: walks go to its raw store"),
    explore_share: float = typer.Option(
        1 / 3, help="the share of the budget explored first (more rounds while candidates are few)"
    ),
    seed: int = typer.Option(0, help="the walks' and validation's seed"),
    random_tries: int = typer.Option(20, min=1, help="random walks per start state (no shortcut)"),
    vlm_config: Path | None = typer.Option(
        None, help="a VLM backend's JSON config: it writes the instructions (kept where they name the checks)"
    ),
) -> None:
    """Explore an app, propose goal tasks from what the walks changed, keep the validated.

    Walks are recorded in DATA's raw store (`<environment>-explore`) and resumed by a
    re-run; the task file is written whole (never appended), with its report
    (`.report.json`) and difficulty histogram (`.difficulty.png`) beside it.
    Progress goes to stderr, the summary (one JSON line) to stdout. Exit code 4 when
    no task is kept, with the reasons.
    """
    from crawlers.task_synthesis import SynthesisSettings, mmss, synthesize_tasks
    from crawlers.task_validation import ValidationSettings
    from schemas.environment import EnvironmentFileError, load_environment
    from trajforge.report.task_report import write_synthesis
    from trajforge.store.raw import RawStore

    try:
        environment = load_environment(env_file)
        settings = SynthesisSettings(
            minutes=minutes,
            languages=tuple(x.strip() for x in languages.split(",") if x.strip()),
            explore_share=explore_share,
            seed=seed,
            validation=ValidationSettings(random_tries=random_tries, seed=seed),
        )
    except (EnvironmentFileError, ValueError) as err:
        fail(str(err))
    out = out or data / "tasks" / f"{environment.name}.jsonl"
    backend = None
    if vlm_config is not None:
        from trajforge.vlm.backend_config import backend_from_config

        try:
            backend = backend_from_config(json.loads(vlm_config.read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError) as err:
            fail(f"--vlm-config {vlm_config}: {err}")
    started = time.monotonic()
    try:
        result = synthesize_tasks(
            environment,
            settings,
            store=RawStore(data / "raw"),
            backend=backend,
            progress=lambda s, m: to_stderr(f"[{s} {mmss(time.monotonic() - started)}] {m}"),
        )
    except ValueError as err:
        fail(str(err))
    summary = result.summary()
    paths = write_synthesis(result, out)
    to_stderr(f"{summary['kept_tasks']} tasks -> {paths['tasks']} (report {paths['report']})")
    typer.echo(json.dumps(summary, sort_keys=True, ensure_ascii=False))
    if not result.rows:
        why = (
            "the walks changed nothing a goal could name (nothing to explore?)"
            if not summary["candidates"]
            else ", ".join(f"{k} {v}" for k, v in summary["rejected"].items())
        )
        to_stderr(f"error: no task of {environment.name} kept ({why}); exit code {EXIT_NONE_KEPT}")
        raise typer.Exit(EXIT_NONE_KEPT)


@group.command()
def validate(
    task_file: Path = typer.Argument(..., metavar="TASK_FILE", help="a JSONL or Parquet task file"),
    env_file: Path = typer.Argument(..., metavar="ENV_FILE", help="the environment file (YAML) it is for"),
    out: Path | None = typer.Option(None, help="write the kept tasks (with difficulty) here as JSONL"),
    report: Path | None = typer.Option(None, help="write the whole report (per task) here as JSON"),
    resets: int = typer.Option(
        2, min=2, help="fresh resets per task (false at reset, true after its demonstration)"
    ),
    random_tries: int = typer.Option(20, min=1, help="random walks per start state"),
    random_steps: int = typer.Option(5, min=1, help="steps of each random walk"),
    seed: int = typer.Option(0, help="the first reset's seed (the walks' seeds follow from it)"),
) -> None:
    """Keep a task file's tasks that are non-trivial, achievable, specific and new.

    Each task's demonstration is played on fresh resets and random walks from its start;
    every verifier is judged on every end state; each rejection is counted by reason.

    Progress and the rejections go to stderr, the summary (one JSON line) to stdout.
    Exit code 4 when no task is kept.
    """
    from crawlers.task_validation import ValidationSettings, validate_tasks
    from crawlers.task_validation_report import kept_rows
    from schemas.environment import EnvironmentFileError, load_environment
    from schemas.environment_file import read_task_file

    try:
        environment = load_environment(env_file, tasks_file=task_file)
        rows = read_task_file(task_file, environment=environment.name)
        settings = ValidationSettings(
            resets=resets, random_tries=random_tries, random_steps=random_steps, seed=seed
        )
    except (EnvironmentFileError, ValueError) as err:
        fail(str(err))
    if not environment.tasks:
        fail(f"{task_file}: no tasks")
    with _progress(environment.name) as progress:
        try:
            result = validate_tasks(environment, settings, progress=progress)
        except ValueError as err:
            fail(str(err))
    for r in result.rejections:
        to_stderr(f"rejected {r.task_id}: {r.reason}: {r.detail}")
    summary = result.summary()
    to_stderr(_summary_line(summary))
    if report is not None:
        _write(report, json.dumps(result.as_dict(), indent=1, ensure_ascii=False) + "\n")
    if out is not None and result.kept:
        lines = [json.dumps(row, ensure_ascii=False) for row in kept_rows(result, rows)]
        _write(out, "".join(line + "\n" for line in lines))
    typer.echo(json.dumps(summary, sort_keys=True))
    if not result.kept:
        reasons = ", ".join(f"{k} {v}" for k, v in summary["rejected"].items())
        to_stderr(f"error: no task of {task_file} kept ({reasons}); exit code {EXIT_NONE_KEPT}")
        raise typer.Exit(EXIT_NONE_KEPT)


def _summary_line(s: dict) -> str:
    rejected = ", ".join(f"{k} {v}" for k, v in s["rejected"].items()) or "none"
    return (
        f"{s['environment']}: {s['tasks_in']} tasks in, {s['kept']} kept; rejected: {rejected}; "
        f"{s['episodes']} episodes in {s['seconds']} s ({s['seconds_per_task']} s per task) on {s['cores']} cores "
        f"({s['tasks_per_core_hour']} kept tasks per core-hour)"
    )


class _progress:
    """A tqdm bar on stderr per phase (demonstrations, random walks)."""

    def __init__(self, name: str):
        self.name, self.bar, self.what = name, None, None

    def __enter__(self):
        return self.update

    def update(self, what: str, done: int, total: int, task_id: str | None) -> None:
        from tqdm import tqdm

        if what != self.what:
            self.__exit__()
            self.what = what
            self.bar = tqdm(
                total=total,
                desc=f"{self.name}: {what}",
                file=sys.stderr,
                unit="task" if what == "demonstration" else "walk",
            )
        self.bar.n = done
        if task_id:
            self.bar.set_postfix_str(task_id, refresh=False)
        self.bar.refresh()

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def _write(path: Path, text: str) -> None:
    """Atomically: a temporary name, then a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
