"""Validating tasks before they are kept: non-trivial, achievable, specific, new.

`validate_tasks(environment, settings)` plays an environment's tasks (any verifier
kind: js, http, python, state, command, predicates, judge with a judge given) and
keeps a task only when
- new: no earlier task has the same goal (its verifier spec canonicalised, with the
  task's placeholders filled and, for verifiers that read a task's params, those
  params) and the same instruction up to its values (numbers and quoted strings
  masked), in the same language; else `duplicate` (the first is kept);
- it has a demonstration: what the oracle plays (the environment's oracle plugin,
  else `params.script`, crawlers/scripted.py), else `params.actions` replayed;
  else `no_demonstration`;
- non-trivial: its verifier is false right after reset on each of `resets` resets
  (seeds seed, seed+1, ...); else `trivial`;
- achievable and stable: true after its demonstration on each of those resets;
  else `unachievable`. A synthesised task's `params.fallback` (its walk's whole
  path, crawlers/task_candidates.py) is played where the shorter demonstration
  misses, and is the demonstration of the kept task when it reaches the goal;
- specific: false on the end state of every other kept task's demonstration whose
  goal differs; else `not_specific`. Two such tasks conflict; the fewest are dropped
  to leave none (greedily: the task in most conflicts first, a satisfied one before
  the one whose demonstration satisfies it, of equals the earlier in file order), so
  one long demonstration that passes five goals on its way loses, not the five. And
  false after `random_steps` random steps from reset
  in at least 1 - max_random_rate (95%) of `random_tries` walks; else
  `random_shortcut`;
- its verifier never raised and its episodes started; else `error`.

With a `deadline` (a time.perf_counter() value), demonstrations are played in the
given order (task synthesis gives a round robin over lengths) while the time left
holds the random walks still to come (their number times an episode's measured
time, with a margin); the tasks not reached are `unplayed`: neither
kept nor rejected, and the checks above hold among those played.

Every episode's end state is judged by every task's verifier at once (the
runtime's own verification, crawlers/env_runtime.py), so the cost is one episode
per reset per task plus `random_tries` walks per distinct start, not T x T episodes.

Each kept task gets a difficulty (crawlers/task_goals.py `difficulty`: its
demonstration's length, its checks, the random walks' success rate); the report and
the kept rows are crawlers/task_validation_report.py's.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from schemas.environment import Environment, fill
from schemas.records import Task

from .env_runtime import EnvironmentRuntime, JudgeFn
from .env_source import open_env_source
from .episode import CrawlEnv
from .guard import SafetyGuard
from .policies import Policy, RandomWalkPolicy
from .pool_slots import EnvPool
from .task_goals import (
    DEMONSTRATION_KEYS,
    PROVENANCE_KEYS,
    check_count,
    difficulty,
    duplicates,
    goal_key,
    predicate_set,
)
from .task_validation_play import EpisodeFailed, Player, demonstration, has_demonstration
from .task_validation_report import Rejection, TaskFigures, ValidationReport, with_fallback

# A setup or launch that is a plugin (module:function) reads the task.
DOTTED = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


@dataclass(frozen=True)
class ValidationSettings:
    """How hard a task is tested: `resets` fresh resets (non-trivial, achievable),
    `random_tries` walks of `random_steps` steps (no shortcut), from `seed`."""

    resets: int = 2
    random_tries: int = 20
    random_steps: int = 5
    seed: int = 0
    max_random_rate: float = 0.05
    retries: int = 1  # a crashed browser or a start page that failed: played again

    def __post_init__(self) -> None:
        if self.resets < 2:
            raise ValueError(f"resets={self.resets}: a task is checked on at least 2 resets")
        if self.random_tries < 1 or self.random_steps < 1:
            raise ValueError("random_tries and random_steps must be at least 1")
        if not 0 <= self.max_random_rate < 1:
            raise ValueError(f"max_random_rate={self.max_random_rate}: expected [0, 1)")


# One progress event: (what, done, total, task_id or None).
Progress = Callable[[str, int, int, str | None], None]


def _quiet(what: str, done: int, total: int, task_id: str | None) -> None:
    pass


# ------------------------------------------------------------------ validation
def start_key(environment: Environment, runtime: EnvironmentRuntime, task: Task) -> str:
    """Tasks with the same key start from the same state: one random walk serves them all."""
    values = runtime.values(task, session=None, seed=-1)
    setup = environment.setup
    parts: list[Any] = [
        runtime.start_url(task, session=None, seed=-1),
        [fill(c, **values) for c in ([setup] if isinstance(setup, str) else setup or [])],
        fill(environment.wait_for, **values) if isinstance(environment.wait_for, str) else None,
    ]
    if environment.platform == "desktop" and _reads_task(environment):
        parts.append({k: v for k, v in task.params.items() if k not in DEMONSTRATION_KEYS + PROVENANCE_KEYS})
    return json.dumps(parts, sort_keys=True, default=str)


def _reads_task(environment: Environment) -> bool:
    """Whether a desktop's setup or launch reads the task (TASK_* variables, a plugin)."""
    commands = []
    for value in (environment.setup, environment.launch):
        commands += [value] if isinstance(value, str) else list(value or [])
    return any("TASK_" in c or DOTTED.match(c.strip()) for c in commands)


@dataclass
class _Run:
    """One validation's state: the tasks, what was found, the report."""

    environment: Environment
    settings: ValidationSettings
    report: ValidationReport
    tasks: dict[str, Task]
    # task -> the demonstrations (by task id) whose end state satisfied it
    satisfied_by: dict[str, set[str]] = field(default_factory=dict)
    candidates: list[str] = field(default_factory=list)
    start_of: dict[str, str] = field(default_factory=dict)  # task -> its start_key

    def reject(self, task_id: str, reason: str, detail: str) -> None:
        self.report.rejections.append(Rejection(task_id, reason, detail))


def validate_tasks(
    environment: Environment,
    settings: ValidationSettings = ValidationSettings(),
    *,
    env: CrawlEnv | None = None,
    pool: EnvPool | None = None,
    judge: JudgeFn | None = None,
    progress: Progress | None = None,
    deadline: float | None = None,
) -> ValidationReport:
    """Validate `environment`'s tasks (see the module docstring); the report.

    Played on `env` or `pool` when given (crawlers.env_source.open_env_source), else on
    an env of its own. `progress(what, done, total, task_id)` sees every episode.
    """
    started = time.perf_counter()
    progress = progress or _quiet
    report = ValidationReport(environment=environment.name, tasks_in=len(environment.tasks))
    run = _Run(environment, settings, report, {t.task_id: t for t in environment.as_tasks()})
    specs = list(environment.tasks)
    for spec in specs:
        verifier = environment.verifier_for(spec)
        report.figures[spec.task_id] = TaskFigures(
            spec.task_id, checks=check_count(verifier), language=spec.language
        )
    dup = duplicates(environment)
    playable = []
    for spec in specs:
        if spec.task_id in dup:
            run.reject(spec.task_id, "duplicate", f"same goal and instruction as '{dup[spec.task_id]}'")
        elif environment.verifier_for(spec) is None:
            run.reject(spec.task_id, "error", "no verifier (neither the task's nor the environment's)")
        elif not has_demonstration(environment, spec):
            run.reject(
                spec.task_id,
                "no_demonstration",
                "no params.script, no params.actions and no oracle plugin in the environment file",
            )
        else:
            playable.append(spec.task_id)
    runtime = EnvironmentRuntime(environment, judge=judge)
    with open_env_source(environment, env=env, pool=pool) as source:
        player = Player(environment, source, runtime, settings.retries)
        _demonstrations(run, player, playable, progress, deadline)
        _random_walks(run, player, runtime, progress)
    _specific(run)
    report.episodes = player.episodes
    report.seconds = time.perf_counter() - started
    return report


def _demonstrations(
    run: _Run, player: Player, playable: list[str], progress: Progress, deadline: float | None
) -> None:
    """Each playable task on `resets` fresh resets: false at reset, true after its
    demonstration; every playable task judged on each end state. Before `deadline`
    (with the random walks' time kept back), once one task has been played."""
    settings = run.settings
    errors: dict[str, str] = {}
    out: set[str] = set()  # rejected already: no longer judged
    for n, task_id in enumerate(playable):
        if n and deadline is not None and time.perf_counter() + _walks_time(run, player) > deadline:
            run.report.unplayed = playable[n:]
            progress("demonstration", n, len(playable), f"out of time: {len(playable) - n} not played")
            playable = playable[:n]
            break
        task = run.tasks[task_id]
        progress("demonstration", n, len(playable), task_id)
        if task_id in errors:  # its verifier raised on an earlier task's end state
            run.reject(task_id, "error", errors[task_id])
            continue
        judged = [run.tasks[t] for t in playable if t not in out and t not in errors]
        verdict = None
        lengths: list[int] = []
        satisfied: set[str] = set()  # the other tasks its demonstration's end states satisfy
        figures = run.report.figures[task_id]
        r = 0
        while r < settings.resets:
            seed = settings.seed + r
            r += 1
            try:
                end = player.play(
                    task,
                    lambda: demonstration(run.environment, task),
                    seed=seed,
                    label=task_id,
                    judged=judged,
                )
            except (EpisodeFailed, ValueError) as e:
                verdict = ("error", str(e))
                break
            for other, message in end.errors.items():
                errors.setdefault(other, message)
            if task_id in errors:
                verdict = ("error", errors[task_id])
                break
            if end.true_at_reset:
                verdict = ("trivial", f"its verifier holds right after reset (seed {seed})")
                break
            if task_id not in end.true_for and task.params.get("fallback") and not figures.fallback:
                # The steps found needed missed: the walk's whole path, from this reset on.
                task = run.tasks[task_id] = with_fallback(task)
                figures.fallback = True
                lengths.clear()
                satisfied.clear()  # what the missed demonstration's ends satisfied is not its
                r = 0  # every reset again, with it
                continue
            if task_id not in end.true_for:
                verdict = ("unachievable", f"false after its demonstration ({end.steps} steps, seed {seed})")
                break
            lengths.append(end.steps)
            satisfied |= end.true_for - {task_id}
        for other in satisfied:
            run.satisfied_by.setdefault(other, set()).add(task_id)
        if verdict is None:
            figures.demo_steps = min(lengths)
            run.candidates.append(task_id)
        else:
            run.reject(task_id, *verdict)
            out.add(task_id)
    progress("demonstration", len(playable), len(playable), None)
    # A verifier that raised on another task's end state is broken there too.
    for task_id in list(run.candidates):
        if task_id in errors:
            run.candidates.remove(task_id)
            run.reject(task_id, "error", errors[task_id])


# A random walk takes k + 1 steps where a demonstration takes a few: its episode is
# counted as this many demonstrations' (and the estimate errs on the long side).
_WALK_EPISODES = 1.5


def _walks_time(run: _Run, player: Player) -> float:
    """Seconds the random walks of the candidates so far will take: `random_tries`
    walks from each distinct start (the tasks of one start share them)."""
    for t in run.candidates:
        if t not in run.start_of:
            run.start_of[t] = start_key(run.environment, player.runtime, run.tasks[t])
    starts = len(set(run.start_of[t] for t in run.candidates)) or 1
    return starts * run.settings.random_tries * player.episode_s * _WALK_EPISODES


def _random_walks(run: _Run, player: Player, runtime: EnvironmentRuntime, progress: Progress) -> None:
    """`random_tries` walks of `random_steps` steps from each distinct start of the
    candidates; each candidate's verifier judged on every walk's end."""
    settings = run.settings
    groups: dict[str, list[Task]] = {}
    for task_id in run.candidates:
        task = run.tasks[task_id]
        groups.setdefault(start_key(run.environment, runtime, task), []).append(task)
    total, done = settings.random_tries * len(groups), 0
    errors: dict[str, str] = {}
    for tasks in groups.values():
        first = tasks[0]
        for i in range(settings.random_tries):
            progress("random walk", done, total, None)
            seed = settings.seed + 1000 + i

            def walk(seed: int = seed, first: Task = first) -> Policy:
                steps = settings.random_steps + 1  # the walk says done after its k actions
                return RandomWalkPolicy(seed, max_steps=steps, lang=first.language, guard=SafetyGuard())

            try:
                end = player.play(first, walk, seed=seed, label="walk", judged=tasks, own=False)
            except EpisodeFailed as e:
                for t in tasks:
                    errors.setdefault(t.task_id, f"random walk: {e}")
                break
            done += 1
            for t in tasks:
                run.report.figures[t.task_id].random_tries += 1
                run.report.figures[t.task_id].random_success += t.task_id in end.true_for
            for other, message in end.errors.items():
                errors.setdefault(other, f"on a random walk's end state: {message}")
    progress("random walk", total, total, None)
    for task_id in list(run.candidates):
        figures = run.report.figures[task_id]
        if task_id in errors:
            run.candidates.remove(task_id)
            run.reject(task_id, "error", errors[task_id])
        elif figures.random_rate is not None and figures.random_rate > settings.max_random_rate:
            run.candidates.remove(task_id)
            run.reject(
                task_id,
                "random_shortcut",
                f"true after {settings.random_steps} random steps in {figures.random_success} of "
                f"{figures.random_tries} walks (at most {settings.max_random_rate:.0%} allowed)",
            )


def _specific(run: _Run) -> None:
    """Keep the candidates none of whose verifiers holds on another kept one's
    demonstration (see the module docstring). A goal that holds all of the candidate's
    checks and more (a goal of two parts, one of them the candidate's) is no rival:
    reaching it reaches the candidate's, by design."""
    order = list(run.candidates)
    by = _conflicts(run, order)  # task -> the candidates whose demonstration satisfies it
    alive, index = set(order), {t: i for i, t in enumerate(order)}
    while True:
        degree = Counter()
        for task_id in alive:
            for other in by[task_id] & alive:
                degree[task_id] += 1
                degree[other] += 1
        if not degree:
            break
        alive.discard(max(degree, key=lambda t: (degree[t], bool(by[t] & alive), -index[t])))
    for task_id in order:  # one dropped that conflicts with no kept task any more returns
        if task_id not in alive and not (by[task_id] & alive) and not any(task_id in by[k] for k in alive):
            alive.add(task_id)
    run.report.kept = [t for t in order if t in alive]
    for task_id in order:
        if task_id not in alive:
            run.reject(task_id, "not_specific", _why_not_specific(task_id, by, run.report.kept))
            continue
        figures = run.report.figures[task_id]
        figures.difficulty = difficulty(
            figures.demo_steps or 0, figures.checks, figures.random_rate or 0.0, run.settings.max_random_rate
        )


def _conflicts(run: _Run, order: list[str]) -> dict[str, set[str]]:
    """task -> the other candidates (another goal, not one holding all its checks and
    more) whose demonstration's end states satisfied it."""
    environment = run.environment
    goal = {s.task_id: goal_key(environment, s) for s in environment.tasks}
    checks = {s.task_id: predicate_set(environment, s) for s in environment.tasks}
    candidates = set(order)
    by: dict[str, set[str]] = {}
    for task_id in order:
        mine = checks[task_id]
        by[task_id] = {
            t
            for t in run.satisfied_by.get(task_id, set())
            if t in checks
            and t != task_id
            and goal[t] != goal[task_id]
            and not (mine and checks[t] and mine < checks[t])
        } & candidates
    return by


def _why_not_specific(task_id: str, by: dict[str, set[str]], kept: list[str]) -> str:
    satisfied = [k for k in kept if k in by[task_id]]
    if satisfied:
        return f"true after the demonstration of '{satisfied[0]}'"
    passes = [k for k in kept if task_id in by[k]]
    more = f" and {len(passes) - 1} more" if len(passes) > 1 else ""
    return f"its demonstration also makes '{passes[0]}'{more} true (kept instead)"
