"""The crawl driver every crawl runs: its configuration, the tasks' attempts, writing whole.

`EnvCrawl` is a crawl's one configuration (policy, seed, budget, retries, the
crawl's own env, the writer's batch); `CrawlRun` is one crawl under way (its
configuration, where it writes, its provenance, what each attempt plays, its
figures); each episode is played with its own `EpisodeContext` (crawlers/episode.py).

`run_crawl` is the loop around the tasks of a crawl (the sandbox's and an
environment file's alike): `Recorder` claims each trajectory id once
(committed ones and repeats are skipped, so a re-run resumes without
duplicates and no two workers play the same task; `retry_errors` first takes
stored error episodes out, to be played again), writes each trajectory whole,
counts it and reports progress, all under one lock because pool workers
report from their threads. `crawl_task` plays a task on envs leased from an
`EnvSource` (crawlers/env_source.py), one lease per attempt; `RetryPolicy`
says how often a task is tried and which errors stop the crawl instead; the
steps of a failed attempt are dropped with it. Out of retries, the task is
stored as an error with no steps (`error_trajectory`), so the next crawl does
not retry it forever. `run_pooled` plays tasks on a pool's workers
(`EnvPool.submit`); a failure that is not the task's (a PoolError: no browser
or device left) stops the crawl once the running episodes are written.
"""

from __future__ import annotations

import dataclasses
import logging
import sys
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import CancelledError, as_completed, wait
from dataclasses import asdict, dataclass, field
from typing import TypeVar

from tqdm import tqdm

from schemas.actions import Action
from schemas.records import DeviceProfile, Step, Task, Trajectory, is_verified, trajectory_id_for
from trajforge.store.audit import AuditLog
from trajforge.store.raw import RawStore

from .crawl_profiles import draw_device
from .device_pool import PoolError
from .env_runtime import JudgeFn
from .env_source import OneEnv, close_episode_quietly
from .episode import CrawlEnv, EpisodeContext, EpisodeInfo, env_platform
from .guard import SafetyGuard
from .pool_slots import EnvPool, EnvSource
from .web_env import BrowserCrashed

log = logging.getLogger(__name__)

R = TypeVar("R")


@dataclass
class CrawlStats:
    trajectories: int = 0  # written by this call
    steps: int = 0
    success: int = 0
    failure: int = 0
    error: int = 0
    unknown: int = 0
    skipped: int = 0  # already committed before this call
    replayed_errors: int = 0  # stored error episodes taken out to be played again (retry_errors)
    retries: int = 0  # episodes restarted after the browser or session died
    reconnects: int = 0  # device sessions a pool reopened during this call
    server_restarts: int = 0  # Appium server restarts by the pool during this call
    blocked_actions: int = 0
    blocked_requests: int = 0
    seconds: float = 0.0
    steps_per_s: float = 0.0
    by_language: dict[str, int] = field(default_factory=dict)
    success_by_language: dict[str, int] = field(default_factory=dict)
    verified: int = 0  # outcomes a verifier decided (success or failure)
    not_started: int = 0  # episodes left when the time budget (EnvCrawl.minutes) was spent
    # Why episodes errored: each cause once (the task's own name taken out), with its count.
    error_reasons: dict[str, int] = field(default_factory=dict)

    def count(self, traj: Trajectory) -> None:
        self.trajectories += 1
        self.steps += traj.num_steps
        setattr(self, traj.outcome, getattr(self, traj.outcome) + 1)
        self.verified += is_verified(traj.verified_by)
        if traj.outcome == "error":
            reason = error_reason(traj)
            self.error_reasons[reason] = self.error_reasons.get(reason, 0) + 1
        lang = traj.task.language
        self.by_language[lang] = self.by_language.get(lang, 0) + 1
        if traj.outcome == "success":
            self.success_by_language[lang] = self.success_by_language.get(lang, 0) + 1

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class ProgressEvent:
    """One thing that happened in a crawl, for logging callbacks.

    kind: "step" (a step was recorded), "trajectory" (one was written),
    "skip" (already stored), "retry" (the browser or session died; retrying).
    In a pool crawl, events come from the worker threads one at a time (under
    a lock), and `slot` names the pool slot the episode runs on.
    """

    kind: str
    task_id: str
    trajectory_id: str
    stats: CrawlStats
    step_index: int | None = None
    action: str | None = None  # the step's action type
    outcome: str | None = None
    message: str | None = None
    slot: str | None = None  # "<device>#<session>" (or "browser#<n>") in a pool crawl
    total: int | None = None  # the tasks of the crawl (stored ones included)
    task: Task | None = None  # the task itself (as the crawl was given it)


def error_reason(traj: Trajectory) -> str:
    """An error trajectory's cause, the same for every task it hit: the first line of
    its error without the task's name and the episode's id (a {session} in a URL)."""
    lines = (traj.error or "no reason recorded").strip().splitlines() or ["no reason recorded"]
    text = lines[0].replace(f", task '{traj.task.task_id}'", "")
    return text.replace(traj.trajectory_id, "{session}")[:400]


# One attempt of a task on an env: (trajectory, steps); raises BrowserCrashed and the like.
Play = Callable[[Task, CrawlEnv, EpisodeContext], tuple[Trajectory, list[Step]]]
# A crawl's progress report: emit(kind, task, trajectory id, **ProgressEvent fields).
Emit = Callable[..., None]


@dataclass(frozen=True)
class RetryPolicy:
    """How a task is tried: once, and `retries` more times from scratch.

    Errors of `retry_on` are retried (an env lost, BrowserCrashed and its kinds;
    by default any error of the page or app too); `fatal` ones stop the crawl (no
    env left, a configuration error), as does anything outside `retry_on`.
    `crash_name`, when set, is the name a lost env is recorded under (the
    one-browser and environment crawls write "BrowserCrashed: ..."); None: its class.
    """

    retries: int = 2
    fatal: tuple[type[BaseException], ...] = (PoolError,)
    retry_on: tuple[type[BaseException], ...] = (Exception,)
    crash_name: str | None = None

    def error_text(self, e: BaseException) -> str:
        name = self.crash_name if isinstance(e, BrowserCrashed) and self.crash_name else None
        return f"{name or type(e).__name__}: {e}"

    def run(
        self, attempt: Callable[[int], R], *, what: str, on_retry: Callable[[str], None]
    ) -> tuple[R | None, BaseException | None]:
        """(attempt(n)'s result, None) for the first n that succeeds, else (None, last error).

        `on_retry(error text)` is called before each retry.
        """
        last: BaseException | None = None
        for n in range(self.retries + 1):
            try:
                return attempt(n), None
            except self.fatal:
                raise
            except BrowserCrashed as e:
                if not isinstance(e, self.retry_on):
                    raise
                log.warning("%s attempt %d: env lost (%s); retrying on a fresh one", what, n, e)
                last = e
            except self.retry_on as e:  # a page or app bug must not stop the crawl
                log.exception("%s attempt %d failed", what, n)
                last = e
            if n < self.retries:
                on_retry(self.error_text(last))
        return None, last


@dataclass(frozen=True)
class EnvCrawl:
    """How an environment is crawled: its policy, seed, budget and retries.

    `tasks` replaces the environment's own (or its exploration episodes);
    `episodes` caps them, or sets the number of exploration episodes;
    `max_steps` defaults to the file's. `retries`: how often a task is tried
    again after an attempt failed (the browser died, the start page or
    `wait_for` failed); `retry_errors`: play again the tasks whose stored episode
    is an `error`, replacing that record. `judge` verifies where the file says
    so; `backend` is the agent policy's VLM; `replay` maps task ids to the
    actions to play back (policy replay). `image_format` and `step_timeout_s`
    configure the crawl's own env; `batch_size` is the writer's. `minutes`: a
    time budget; no episode starts once it is spent (those left are counted in
    `not_started` and a re-run plays them).
    """

    policy: str = "random_walk"
    seed: int = 0
    episodes: int | None = None
    tasks: list[Task] | None = None
    max_steps: int | None = None
    retries: int = 2
    retry_errors: bool = False
    judge: JudgeFn | None = None
    backend: object = None
    replay: dict[str, list[Action]] | None = None
    guard: SafetyGuard | None = None
    image_format: str = "png"
    step_timeout_s: float = 10.0
    batch_size: int = 16
    minutes: float | None = None


def _quiet(*event, **fields) -> None:
    pass


@dataclass
class CrawlRun:
    """One crawl under way: its configuration, where it writes, its provenance
    (`source_name`, the policy), how a task is retried, its figures.

    `play(task, env, ctx)` is one attempt of a task (an environment's episode);
    `verifier_of(task)` names the verifier an error trajectory records. `platform` is recorded when no lease succeeds (None: the source's);
    `progress` sees every event, `on_write` every trajectory written; `run_crawl`
    sets `emit` and `lock` (its Recorder's: pool workers report from their threads)
    and `audit` (the guard's audit log of the collection).
    """

    config: EnvCrawl
    store: RawStore
    collection: str
    source_name: str
    retry: RetryPolicy
    play: Play
    verifier_of: Callable[[Task], str | None] = lambda task: None  # recorded on an error trajectory
    stats: CrawlStats = field(default_factory=CrawlStats)
    progress: Callable[[ProgressEvent], None] | None = None
    on_write: Callable[[Trajectory, list[Step]], None] | None = None
    platform: str | None = None
    started: float = field(default_factory=time.perf_counter)
    emit: Emit = _quiet
    lock: threading.RLock = field(default_factory=threading.RLock)
    audit: AuditLog | None = None


def crawl_task(
    source: EnvSource, task: Task, episode: EpisodeContext, crawl: CrawlRun
) -> tuple[Trajectory, list[Step]]:
    """One task, each attempt on a fresh lease; out of retries, an error trajectory.

    `episode.device` None: the leased device's own profile (a pool of phones),
    with the theme and font scale the seed draws.
    """
    tid = episode.trajectory_id
    leased: dict = {"platform": crawl.platform or source.platform, "device": episode.device}

    def attempt(n: int) -> tuple[Trajectory, list[Step]]:
        info = EpisodeInfo()
        with source.lease() as env:
            slot = source.slot_name(env)
            leased["platform"] = env_platform(env)
            device = episode.device
            if device is None:  # the leased phone is the profile; the seed draws the rest
                device = leased["device"] = _on_device(task, episode, source.device_of(env).profile)
            ctx = dataclasses.replace(
                episode,
                device=device,
                audit=crawl.audit,
                attempt=n,
                info=info,
                on_step=lambda s: crawl.emit(
                    "step", task, tid, step_index=s.index, action=s.action.type.value, slot=slot
                ),
            )
            try:
                played = crawl.play(task, env, ctx)
            finally:
                close_episode_quietly(env)
        with crawl.lock:
            crawl.stats.blocked_actions += info.blocked_actions
            crawl.stats.blocked_requests += len(info.blocked_requests)
        return played

    def on_retry(message: str) -> None:
        with crawl.lock:
            crawl.stats.retries += 1
        crawl.emit("retry", task, tid, message=message)

    played, error = crawl.retry.run(attempt, what=f"task {task.task_id}", on_retry=on_retry)
    if error is None:
        return played
    device = leased["device"]
    if device is None:  # never leased: record the pool's first phone
        device = _on_device(task, episode, source.devices[0].profile)
    return error_trajectory(
        task, episode, crawl, device=device, platform=leased["platform"], error=crawl.retry.error_text(error)
    ), []


def _on_device(task: Task, episode: EpisodeContext, profile: DeviceProfile) -> DeviceProfile:
    return draw_device(episode.seed, task, {profile.name: profile}, mobile=True)[0]


def error_trajectory(
    task: Task, episode: EpisodeContext, crawl: CrawlRun, *, device: DeviceProfile, platform: str, error: str
) -> Trajectory:
    # Out of retries: stored as an error, with no steps,
    # so that the next crawl does not try the same broken task forever.
    return Trajectory(
        trajectory_id=episode.trajectory_id,
        task=task,
        platform=platform,
        app=task.app,
        device=device,
        source="crawl",
        source_name=crawl.source_name,
        policy=crawl.config.policy,
        seed=episode.seed,
        outcome="error",
        verified_by="none",
        num_steps=0,
        error=error,
        verifier=crawl.verifier_of(task),
        created_at=time.time(),
    )


class Recorder:
    """Claims, writes and counts the trajectories of one crawl (see the module docstring)."""

    def __init__(
        self,
        stats: CrawlStats,
        *,
        total: int | None,
        desc: str,
        progress: Callable[[ProgressEvent], None] | None = None,
        on_write: Callable[[Trajectory, list[Step]], None] | None = None,
    ):
        self.stats = stats
        self.lock = threading.RLock()
        self.progress = progress
        self.on_write = on_write
        self.writer = None  # set by `open`
        self.total = total
        self.bar = tqdm(total=total, desc=desc, unit="traj", disable=not sys.stderr.isatty())

    def emit(self, kind: str, task: Task, tid: str, **kw) -> None:
        with self.lock:
            if self.progress is not None:
                self.progress(
                    ProgressEvent(
                        kind=kind,
                        task_id=task.task_id,
                        task=task,
                        trajectory_id=tid,
                        stats=self.stats,
                        total=self.total,
                        **kw,
                    )
                )

    def claim(self, items: Iterable[tuple], id_of: Callable[[Task], str]) -> list[tuple]:
        """(task, tid, *rest) for each (task, *rest) not yet committed nor repeated."""
        todo, claimed = [], set()
        for task, *rest in items:
            tid = id_of(task)
            if self.writer.has(tid) or tid in claimed:
                self.stats.skipped += 1
                self.bar.update(1)
                self.emit("skip", task, tid)
                continue
            claimed.add(tid)
            todo.append((task, tid, *rest))
        return todo

    def write(self, task: Task, traj: Trajectory, steps: list[Step]) -> None:
        with self.lock:
            self.writer.add(traj, steps)
            self.stats.count(traj)
            if self.on_write is not None:
                self.on_write(traj, steps)
            self.bar.update(1)
            self.bar.set_postfix(ok=self.stats.success, fail=self.stats.failure, err=self.stats.error)
        self.emit("trajectory", task, traj.trajectory_id, outcome=traj.outcome, message=traj.error)

    def close(self, started: float) -> None:
        """End the progress bar; the crawl's seconds and steps/s since `started`."""
        self.bar.close()
        stats = self.stats
        stats.seconds = round(time.perf_counter() - started, 3)
        stats.steps_per_s = round(stats.steps / stats.seconds, 3) if stats.seconds else 0.0


def run_pooled(pool: EnvPool, todo: list[tuple], work: Callable, write: Callable) -> None:
    """`work(*item)` for each item on the pool's workers; `write(item[0], *result)` as they end.

    A result of None (the crawl is stopping) is not written. The first error
    cancels what is queued, lets the running ones finish and be written, then
    is raised; on Ctrl-C too, nothing of this crawl runs on once it returns.
    """
    if not todo:
        return
    stop = threading.Event()

    def guarded(*item):
        return None if stop.is_set() else work(*item)

    first_error: BaseException | None = None
    # Each pool runs the work on its own workers (Playwright binds a browser to one thread).
    futures = {pool.submit(guarded, *item): item[0] for item in todo}
    try:
        for fut in as_completed(futures):
            try:
                result = fut.result()
            except CancelledError:
                continue
            except Exception as e:  # noqa: BLE001 - raised once the others are written
                if first_error is None:
                    first_error = e
                    stop.set()
                    for f in futures:
                        f.cancel()
                continue
            if result is not None:
                write(futures[fut], *result)
    finally:
        stop.set()
        for f in futures:
            f.cancel()
        wait(futures)
    if first_error is not None:
        raise first_error


def run_crawl(
    crawl: CrawlRun,
    tasks: list[Task],
    episode_for: Callable[[Task, str], EpisodeContext],
    source: EnvSource,
) -> None:
    """Play every task not yet stored into `crawl.collection`; figures in `crawl.stats`.

    Each task's trajectory id is stable (its source, task, policy and seed), so
    a re-run resumes; `episode_for(task, id)` is the context its episode is
    played with (the crawl adds its audit log: the guard's decisions go to
    `<store>/audit/<collection>.jsonl`). A OneEnv plays the tasks one after the
    other; a pool plays up to its size at once. With `retry_errors`, the tasks
    whose stored episode is an `error` are taken out of the store first
    (RawStore.uncommit) and played again under the same ids. With
    `config.minutes`, no episode starts after that time (since `crawl.started`).
    """
    config = crawl.config
    deadline = None if config.minutes is None else crawl.started + config.minutes * 60

    def id_of(task: Task) -> str:
        return trajectory_id_for(crawl.source_name, task.task_id, config.policy, config.seed)

    def play(task: Task, tid: str) -> tuple[Trajectory, list[Step]] | None:
        if deadline is not None and time.perf_counter() >= deadline:
            with crawl.lock:
                stats.not_started += 1
            return None  # the time budget is spent: left for a re-run
        return crawl_task(source, task, episode_for(task, tid), crawl)

    stats, store, collection = crawl.stats, crawl.store, crawl.collection
    if config.retry_errors:
        errored = store.errored_ids(collection) & {id_of(t) for t in tasks}
        stats.replayed_errors = store.uncommit(collection, errored)
    # A time-bound crawl's task list is only an upper bound (exploration lists 100,000).
    total = None if deadline is not None else len(tasks)
    rec = Recorder(
        stats, total=total, desc=f"crawl {collection}", progress=crawl.progress, on_write=crawl.on_write
    )
    crawl.emit, crawl.lock = rec.emit, rec.lock
    pooled = not isinstance(source, OneEnv)
    pool_before = source.stats() if pooled else None
    try:
        with (
            store.audit_log(collection) as crawl.audit,
            store.writer(collection, batch_size=config.batch_size) as rec.writer,
        ):
            todo = rec.claim(((t,) for t in tasks), id_of)
            if not pooled:
                for task, tid in todo:
                    played = play(task, tid)
                    if played is not None:
                        rec.write(task, *played)
            else:
                run_pooled(source, todo, play, rec.write)
    finally:
        rec.close(crawl.started)
        if pooled:
            after = source.stats()
            for key in ("reconnects", "server_restarts"):
                setattr(stats, key, after.get(key, 0) - pool_before.get(key, 0))
