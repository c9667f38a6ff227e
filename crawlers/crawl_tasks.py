"""One task of a crawl, retried until it yields one whole episode; the crawl's statistics.

`crawl_task` plays a task on envs leased from an `EnvSource` (a pool of
browsers or devices, or `OneEnv`: the crawl's own env), one lease per
attempt, each attempt the job's `play(env, ctx)` (an environment's episode).
`RetryPolicy` says how often a task is tried and which errors stop the crawl
instead; the steps of a failed attempt are dropped with it. Out of retries,
the task is stored as an error with no steps (`error_trajectory`), so the
next crawl does not retry it forever.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import TypeVar

from schemas.records import DeviceProfile, Step, Task, Trajectory, is_verified

from .crawl_episode import CrawlEnv, EpisodeContext, EpisodeInfo, env_platform
from .crawl_profiles import draw_device
from .device_pool import PoolError
from .pool_slots import EnvSource
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
Play = Callable[[CrawlEnv, EpisodeContext], tuple[Trajectory, list[Step]]]
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
class CrawlContext:
    """What every task of one crawl shares: provenance, retries, figures, progress."""

    policy: str
    source_name: str
    retry: RetryPolicy
    stats: CrawlStats
    emit: Emit = lambda *event, **fields: None  # noqa: E731 - run_crawl sets its Recorder's
    lock: threading.RLock = field(default_factory=threading.RLock)
    platform: str | None = None  # recorded when no lease succeeds (None: the pool's)


@dataclass(frozen=True)
class CrawlJob:
    """One task of a crawl: its episode's context and what each attempt plays.

    `episode.device` None: the leased device's own profile (a pool of phones),
    with the theme and font scale the seed draws. `verifier` is recorded on the
    error trajectory.
    """

    task: Task
    episode: EpisodeContext
    play: Play
    verifier: str | None = None


def crawl_task(source: EnvSource, job: CrawlJob, crawl: CrawlContext) -> tuple[Trajectory, list[Step]]:
    """One task, each attempt on a fresh lease; out of retries, an error trajectory."""
    task, tid = job.task, job.episode.trajectory_id
    leased: dict = {"platform": crawl.platform or source.platform, "device": job.episode.device}

    def attempt(n: int) -> tuple[Trajectory, list[Step]]:
        info = EpisodeInfo()
        with source.lease() as env:
            slot = source.slot_name(env)
            leased["platform"] = env_platform(env)
            device = job.episode.device
            if device is None:  # the leased phone is the profile; the seed draws the rest
                device = leased["device"] = _on_device(job, source.device_of(env).profile)
            ctx = dataclasses.replace(
                job.episode,
                device=device,
                attempt=n,
                info=info,
                on_step=lambda s: crawl.emit(
                    "step", task, tid, step_index=s.index, action=s.action.type.value, slot=slot
                ),
            )
            try:
                played = job.play(env, ctx)
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
        device = _on_device(job, source.devices[0].profile)
    return error_trajectory(
        job, crawl, device=device, platform=leased["platform"], error=crawl.retry.error_text(error)
    ), []


def _on_device(job: CrawlJob, profile: DeviceProfile) -> DeviceProfile:
    return draw_device(job.episode.seed, job.task, {profile.name: profile}, mobile=True)[0]


def error_trajectory(
    job: CrawlJob, crawl: CrawlContext, *, device: DeviceProfile, platform: str, error: str
) -> Trajectory:
    # Out of retries: stored as an error, with no steps,
    # so that the next crawl does not try the same broken task forever.
    task = job.task
    return Trajectory(
        trajectory_id=job.episode.trajectory_id,
        task=task,
        platform=platform,
        app=task.app,
        device=device,
        source="crawl",
        source_name=crawl.source_name,
        policy=crawl.policy,
        seed=job.episode.seed,
        outcome="error",
        verified_by="none",
        num_steps=0,
        error=error,
        verifier=job.verifier,
        created_at=time.time(),
    )


class OneEnv:
    """One env as a source of leases: restarted when it died, its episode closed after."""

    def __init__(self, env: CrawlEnv):
        self.env = env
        self.platform = env_platform(env)

    @contextmanager
    def lease(self) -> Iterator[CrawlEnv]:
        if not self.env.is_alive():  # died after the previous episode's last action
            self.env.restart()
        try:
            yield self.env
        except BrowserCrashed:
            self.env.restart()
            raise

    def slot_name(self, env: CrawlEnv) -> None:
        return None

    def device_of(self, env: CrawlEnv):
        raise TypeError("one env has no device spec: give the episode its device")


def close_episode_quietly(env: CrawlEnv) -> None:
    try:
        env.close_episode()
    except Exception:  # the browser may be gone; restart() already handled it
        pass
