"""Tasks from any app, none written by hand: explore, propose, validate.

`synthesize_tasks(environment, SynthesisSettings(minutes=M), store=...)`:

1. explores the app with the frontier walk (crawlers/frontier.py) for a share of the
   budget, recorded in the raw store (collection `<environment>-explore`, resumable:
   a killed run's walks are kept and its screen graph reloaded);
2. proposes candidate goals from every recorded walk (crawlers/task_candidates.py: what
   a step changed, as `predicates` of the end state, with its demonstration); while
   validating them all would leave a minute or more unspent (an app whose walks change
   little), explores again with half of that time and proposes again;
3. validates as many as the rest of the budget allows (crawlers/task_validation.py
   with its deadline: non-trivial, achievable, specific, new; each rejection counted
   by reason), one language's row per goal, since the goal and its demonstration are
   the same in every language;
4. keeps each validated goal in every language asked for, with its difficulty.

The candidates are validated round-robin over demonstration lengths (1, 2, 3 or more
steps), so a budget that cannot validate them all still keeps easy and hard tasks.
"""

from __future__ import annotations

import os
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from schemas.environment import Environment, TaskSpec
from schemas.records import Step, Trajectory
from trajforge.store.raw import RawStore
from trajforge.vlm.backends import VLMBackend

from .crawl_driver import EnvCrawl
from .crawl_report import progress_line, summary_lines
from .env_crawl import crawl_environment
from .episode import CrawlEnv
from .pool_slots import EnvPool
from .task_candidates import candidate_tasks
from .task_instructions import vlm_instructions
from .task_validation import ValidationSettings, validate_tasks
from .task_validation_report import ValidationReport, kept_rows

LANGUAGES = ("en", "zh")
# Seconds a candidate's validation is assumed to cost before anything was measured.
_FIRST_GUESS_S = 10.0
_MANY = 100_000  # walks: as many as the time allows
# Spare time (beyond validating every candidate, its estimate x _MARGIN) worth another
# round of exploration.
_MARGIN = 1.5
_MIN_ROUND_S = 60.0
_WRITING_S = 15.0  # of the budget, kept for writing the task file, its report and picture


@dataclass(frozen=True)
class SynthesisSettings:
    """`minutes` in all; `explore_share` of them exploring first (more rounds follow
    while validating every candidate would leave time unspent); `languages` of the kept
    tasks; `max_goals`: goals of at most this many parts; `seed` of the walks."""

    minutes: float
    languages: tuple[str, ...] = LANGUAGES
    # A third: an app whose walks change much (TiddlyWiki: 480 candidates in 15 minutes)
    # proposes more than the rest can validate; one that changes little explores again.
    explore_share: float = 1 / 3
    max_goals: int = 2
    seed: int = 0
    validation: ValidationSettings = field(default_factory=ValidationSettings)

    def __post_init__(self) -> None:
        if self.minutes <= 0 or not 0 < self.explore_share < 1:
            raise ValueError(f"minutes={self.minutes} must be > 0 and explore_share in (0, 1)")
        unknown = [lang for lang in self.languages if lang not in LANGUAGES]
        if unknown or not self.languages:
            raise ValueError(f"languages {list(self.languages)}: expected some of {list(LANGUAGES)}")


@dataclass
class SynthesisReport:
    """The funnel: walks -> candidates -> validated -> kept, and what it cost."""

    environment: str
    languages: tuple[str, ...]
    exploration: dict = field(default_factory=dict)  # this run's crawl summary (graph figures included)
    walks: int = 0  # every recorded walk the candidates came from (a re-run's earlier ones too)
    explore_rounds: int = 1  # more than one: validating every candidate left time to explore more
    instructions: dict = field(default_factory=dict)  # the VLM's answers: kept, refused by reason
    candidates: int = 0  # distinct goals proposed
    validated: int = 0  # goals validated within the budget
    validation: ValidationReport | None = None
    rows: list[dict] = field(default_factory=list)  # the kept tasks, every language
    seconds: float = 0.0
    cores: int = field(default_factory=lambda: os.cpu_count() or 1)

    @property
    def kept_goals(self) -> int:
        return len(self.validation.kept) if self.validation else 0

    def summary(self) -> dict:
        rejected = self.validation.summary()["rejected"] if self.validation else {}
        demo = [
            r["params"].get("demo_steps") or len(r["params"].get("walk_steps") or [])
            for r in self._one_language()
        ]
        core_hours = self.seconds * self.cores / 3600
        graph = self.exploration.get("graph") or {}
        return {
            "environment": self.environment,
            "walks": self.walks,
            "new_walks": self.exploration.get("episodes", 0),
            "explore_rounds": self.explore_rounds,
            "screens": graph.get("screens"),
            "elements_tried": graph.get("pairs"),
            "candidates": self.candidates,
            "validated": self.validated,
            "not_validated_for_time": self.candidates - self.validated,
            "kept_goals": self.kept_goals,
            "kept_tasks": len(self.rows),
            "languages": list(self.languages),
            "instruction_sources": dict(
                Counter(r["params"]["instruction_source"] for r in self._one_language())
            ),
            "vlm_instructions": self.instructions,
            "rejected": rejected,
            "three_or_more_steps": round(sum(d >= 3 for d in demo) / len(demo), 3) if demo else None,
            "seconds": round(self.seconds, 1),
            "cores": self.cores,
            "tasks_per_core_hour": round(len(self.rows) / core_hours, 1) if core_hours else None,
            "core_seconds_per_kept_task": round(self.seconds * self.cores / len(self.rows), 1)
            if self.rows
            else None,
        }

    def _one_language(self) -> list[dict]:
        return [r for r in self.rows if r["language"] == self.languages[0]]


# One progress line: (stage, message).
Progress = Callable[[str, str], None]


def synthesize_tasks(
    environment: Environment,
    settings: SynthesisSettings,
    *,
    store: RawStore,
    env: CrawlEnv | None = None,
    pool: EnvPool | None = None,
    backend: VLMBackend | None = None,
    progress: Progress | None = None,
) -> SynthesisReport:
    """Explore, propose and validate within `settings.minutes` (see the module docstring).
    With a VLM `backend`, the kept goals' instructions are the model's where they name
    what the goal checks (crawlers/task_instructions.py), else the template's."""
    say = progress or (lambda stage, message: None)
    started = time.perf_counter()
    deadline = started + settings.minutes * 60
    report = SynthesisReport(environment=environment.name, languages=settings.languages)
    collection = f"{environment.name}-explore"

    def explore(minutes: float) -> dict:
        # The time budget ends the exploration, not the file's `explore.episodes`; a
        # second round goes on from the walks stored (their ids are stable).
        walk = EnvCrawl(policy="frontier", minutes=minutes, seed=settings.seed, episodes=_MANY)
        say("explore", f"frontier walks for {walk.minutes:.1f} min into {collection}")
        stats = crawl_environment(
            environment, walk, store=store, collection=collection, env=env, pool=pool,
            progress=lambda event: _said(say, progress_line(event, environment.name)),
        )  # fmt: skip
        for line in summary_lines(stats):
            say("explore", line)
        return stats.summary()

    def propose() -> list[dict]:
        walks = recorded_walks(store, collection)
        report.walks = len(walks)
        rows = candidate_tasks(walks, environment, (settings.languages[0],), max_goals=settings.max_goals)
        say("propose", f"{len(rows)} candidate goals from {len(walks)} walks")
        return rows

    report.exploration = explore(settings.minutes * settings.explore_share)
    rows = propose()
    # Validating every candidate would leave time unspent (an app with few changes to
    # make): explore more with half of what is spare, while that still finds candidates.
    while True:
        seconds = more_exploration(
            deadline - time.perf_counter(), len(rows), _cost_per_candidate(report.exploration, settings)
        )
        if not seconds:
            break
        more = explore(seconds / 60)
        report.exploration = {
            **more,
            "episodes": report.exploration.get("episodes", 0) + more.get("episodes", 0),
        }
        report.explore_rounds += 1
        before, rows = len(rows), propose()
        if not more.get("episodes") or len(rows) == before:
            break
    report.candidates = len(rows)
    if rows:
        chosen = round_robin(rows)
        say(
            "validate",
            f"validating {len(chosen)} candidates, as many as {mmss(deadline - time.perf_counter())} allow",
        )
        with_tasks = _with_tasks(environment, chosen)
        report.validation = validate_tasks(
            with_tasks, settings.validation, env=env, pool=pool, deadline=deadline - _writing_s(settings),
            progress=lambda what, done, total, task: say("validate", f"{what} {done}/{total} {task or ''}".rstrip()),
        )  # fmt: skip
        report.validated = report.validation.tested
        kept = kept_rows(report.validation, chosen)
        if backend is not None and kept:
            report.instructions = dict(vlm_instructions(kept, backend, settings.languages))
            say("instructions", f"{backend.model_id}: {report.instructions}")
        report.rows = [_in_language(row, lang) for row in kept for lang in settings.languages]
    report.seconds = time.perf_counter() - started
    return report


def _said(say: Progress, line: str | None) -> None:
    if line:
        say("explore", line)


def recorded_walks(store: RawStore, collection: str) -> list[tuple[Trajectory, list[Step]]]:
    """Every walk of `collection` with its steps, in trajectory-id order."""
    steps: dict[str, list[Step]] = defaultdict(list)
    for step in store.iter_steps(collection):
        steps[step.trajectory_id].append(step)
    trajs = sorted(store.iter_trajectories(collection), key=lambda t: t.trajectory_id)
    return [(t, steps[t.trajectory_id]) for t in trajs if steps[t.trajectory_id]]


def more_exploration(seconds_left: float, candidates: int, per_candidate_s: float) -> float:
    """Seconds to explore again: half of what validating every candidate (with a margin)
    would leave unspent; 0 when that is under a minute."""
    spare = seconds_left - _MARGIN * candidates * per_candidate_s
    return spare / 2 if spare >= _MIN_ROUND_S else 0.0


def round_robin(rows: list[dict]) -> list[dict]:
    """The candidates in the order they are validated: round-robin over demonstration
    lengths (1, 2, 3+ steps), in their order within each length."""
    buckets: dict[int, list[dict]] = defaultdict(list)
    for row in rows:
        buckets[min(len(row["params"].get("walk_steps") or [1]), 3)].append(row)
    queues = [list(buckets[k]) for k in sorted(buckets)]
    ordered: list[dict] = []
    while len(ordered) < len(rows):
        ordered += [queue.pop(0) for queue in queues if queue]
    return ordered


def _writing_s(settings: SynthesisSettings) -> float:
    """Of the budget, what writing the task file, its report and picture is given."""
    return min(_WRITING_S, 0.05 * settings.minutes * 60)


def mmss(seconds: float) -> str:
    """m:ss, as progress shows a time."""
    seconds = max(0, int(seconds))
    return f"{seconds // 60}:{seconds % 60:02d}"


def _cost_per_candidate(crawl: dict, settings: SynthesisSettings) -> float:
    """A candidate's validation: `resets` episodes of a reset and a few steps each."""
    reset_s = (crawl.get("reset_ms_p50") or 0) / 1000
    step_s = (crawl.get("step_ms_p50") or 0) / 1000
    if not reset_s:
        return _FIRST_GUESS_S
    return settings.validation.resets * (reset_s + 3 * step_s) * 1.5  # and a share of the random walks


def _with_tasks(environment: Environment, rows: list[dict]) -> Environment:
    return environment.model_copy(update={"tasks": [TaskSpec.model_validate(r) for r in rows]})


def _in_language(row: dict, language: str) -> dict:
    """The kept row (validated in one language) in `language`: its words, its id."""
    if row["language"] == language:
        return row
    words = row["params"].get("instructions") or {}
    base = row["task_id"].rsplit("-", 1)[0]
    return {**row, "task_id": f"{base}-{language}", "language": language, "instruction": words[language]}
