"""The crawl driver every crawl runs: its env or pool, claiming ids, writing whole, the pool.

`run_crawl` is the loop around the tasks of a crawl (the sandbox's and an
environment file's alike): it claims each task's id, plays it with
crawl_tasks.crawl_task on the crawl's own env or on a pool, and writes each
trajectory whole. `crawl_source` gives the env source: the pool, the env the
caller gave, or a headless Chromium allowed only the crawl's origins.
`Recorder` is the writer side of a crawl: it claims each trajectory id once
(committed ones and repeats are skipped, so a re-run resumes without
duplicates and no two workers play the same task; `CrawlPlan.retry_errors`
first takes stored error episodes out, to be played again), writes each trajectory
whole, counts it and reports progress, all under one lock because pool
workers report from their threads. `run_pooled` plays items on a pool's
workers (`EnvPool.submit`) and
writes each result as it comes; a failure that is not the task's (a
PoolError: no browser or device left) stops the crawl once the running
episodes are written.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import CancelledError, as_completed, wait
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

from tqdm import tqdm

from schemas.records import Step, Task, Trajectory
from trajforge.store.raw import RawStore

from .allowlist import Allowlist
from .crawl_episode import CrawlEnv
from .crawl_tasks import CrawlContext, CrawlJob, CrawlStats, OneEnv, ProgressEvent, crawl_task
from .pool_slots import EnvPool
from .web_env import WebEnv


class Recorder:
    """Claims, writes and counts the trajectories of one crawl (see the module docstring)."""

    def __init__(
        self,
        stats: CrawlStats,
        *,
        total: int,
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


@dataclass(frozen=True)
class CrawlPlan:
    """Where a crawl writes and how it reports: its collection, progress, the clock."""

    store: RawStore
    collection: str
    desc: str
    batch_size: int = 16
    progress: Callable[[ProgressEvent], None] | None = None
    on_write: Callable[[Trajectory, list[Step]], None] | None = None
    started: float = field(default_factory=time.perf_counter)
    # Play again the tasks whose stored episode is an `error` (their record is replaced).
    retry_errors: bool = False


def run_crawl(
    plan: CrawlPlan,
    tasks: list[Task],
    id_of: Callable[[Task], str],
    job_for: Callable[[Task, str], CrawlJob],
    crawl: CrawlContext,
    source: OneEnv | EnvPool,
) -> None:
    """Play every task not yet stored into `plan.collection`; figures in `crawl.stats`.

    A OneEnv plays the tasks one after the other; a pool plays up to its size at once.
    With `plan.retry_errors`, the tasks whose stored episode is an `error` are taken
    out of the store first (RawStore.uncommit) and played again under the same ids.
    """
    stats = crawl.stats
    if plan.retry_errors:
        errored = plan.store.errored_ids(plan.collection) & {id_of(t) for t in tasks}
        stats.replayed_errors = plan.store.uncommit(plan.collection, errored)
    rec = Recorder(stats, total=len(tasks), desc=plan.desc, progress=plan.progress, on_write=plan.on_write)
    crawl = replace(crawl, emit=rec.emit, lock=rec.lock)
    pooled = not isinstance(source, OneEnv)
    pool_before = source.stats() if pooled else None
    try:
        with plan.store.writer(plan.collection, batch_size=plan.batch_size) as rec.writer:
            todo = rec.claim(((t,) for t in tasks), id_of)
            if not pooled:
                for task, tid in todo:
                    rec.write(task, *crawl_task(source, job_for(task, tid), crawl))
            else:
                run_pooled(
                    source, todo, lambda task, tid: crawl_task(source, job_for(task, tid), crawl), rec.write
                )
    finally:
        rec.close(plan.started)
        if pooled:
            after = source.stats()
            for key in ("reconnects", "server_restarts"):
                setattr(stats, key, after.get(key, 0) - pool_before.get(key, 0))


@contextmanager
def crawl_source(
    env: CrawlEnv | None,
    pool: EnvPool | None,
    origins: list[str],
    *,
    image_format: str = "png",
    step_timeout_s: float = 10.0,
) -> Iterator[OneEnv | EnvPool]:
    """The pool, the env given (its own request filter), or a headless Chromium allowed
    to reach only `origins`, launched for the crawl and closed after it."""
    if pool is not None:
        yield pool
        return
    if env is not None:
        yield OneEnv(env)
        return
    own = WebEnv.launch(
        headless=True,
        image_format=image_format,
        step_timeout_s=step_timeout_s,
        request_filter=Allowlist(origins),
    )
    try:
        yield OneEnv(own)
    finally:
        own.close()
