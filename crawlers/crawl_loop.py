"""What every crawl shares around its episodes: claiming ids, writing whole, running on a pool.

`Recorder` is the writer side of a crawl: it claims each trajectory id once
(committed ones and repeats are skipped, so a re-run resumes without
duplicates and no two workers play the same task), writes each trajectory
whole, counts it and reports progress, all under one lock because pool
workers report from their threads. `run_pooled` plays items on a pool's
workers (a WebEnvPool's own threads, or a thread pool over a DevicePool) and
writes each result as it comes; a failure that is not the task's (a
PoolError: no browser or device left) stops the crawl once the running
episodes are written.
"""
from __future__ import annotations

import sys
import threading
import time
from concurrent.futures import CancelledError, ThreadPoolExecutor, as_completed, wait
from contextlib import ExitStack
from typing import Callable, Iterable

from tqdm import tqdm

from schemas.records import Step, Task, Trajectory

from .crawl_tasks import CrawlStats, ProgressEvent


class Recorder:
    """Claims, writes and counts the trajectories of one crawl (see the module docstring)."""

    def __init__(self, stats: CrawlStats, *, total: int, desc: str,
                 progress: Callable[[ProgressEvent], None] | None = None,
                 on_write: Callable[[Trajectory, list[Step]], None] | None = None):
        self.stats = stats
        self.lock = threading.RLock()
        self.progress = progress
        self.on_write = on_write
        self.writer = None  # set by `open`
        self.bar = tqdm(total=total, desc=desc, unit="traj", disable=not sys.stderr.isatty())

    def emit(self, kind: str, task: Task, tid: str, **kw) -> None:
        with self.lock:
            if self.progress is not None:
                self.progress(ProgressEvent(kind=kind, task_id=task.task_id, trajectory_id=tid,
                                            stats=self.stats, **kw))

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
            self.bar.set_postfix(ok=self.stats.success, fail=self.stats.failure,
                                 err=self.stats.error)
        self.emit("trajectory", task, traj.trajectory_id, outcome=traj.outcome,
                  message=traj.error)

    def close(self, started: float) -> None:
        """End the progress bar; the crawl's seconds and steps/s since `started`."""
        self.bar.close()
        stats = self.stats
        stats.seconds = round(time.perf_counter() - started, 3)
        stats.steps_per_s = round(stats.steps / stats.seconds, 3) if stats.seconds else 0.0


def run_pooled(pool, todo: list[tuple], work: Callable, write: Callable) -> None:
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
    with ExitStack() as stack:
        # A WebEnvPool owns its threads (Playwright binds a browser to one); a
        # DevicePool's sessions are driven from a thread pool of its size.
        if hasattr(pool, "submit"):
            submit = pool.submit
        else:
            submit = stack.enter_context(ThreadPoolExecutor(
                max_workers=min(pool.size, len(todo)), thread_name_prefix="crawl")).submit
        futures = {submit(guarded, *item): item[0] for item in todo}
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
