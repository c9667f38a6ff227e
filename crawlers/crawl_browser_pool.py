"""A pool of headless browsers for a concurrent web crawl: one WebEnv per worker thread.

Playwright's sync API binds a browser to the thread that launched it (its
calls switch to that thread's event loop), so unlike a DevicePool, whose
Appium sessions any thread may drive, a WebEnvPool owns its worker threads:
`submit(fn, *args)` runs `fn` on one of `size` threads, and inside it
`lease()` hands out that thread's own WebEnv. Each thread launches its
browser on its first lease and keeps it across episodes and across crawls
(one launch per browser for a whole multi-app run); a browser that died
(BrowserCrashed, or found dead at the next lease) is restarted before the
next lease, so the crawl retries the task on a fresh browser. A browser that
cannot be launched or restarted is a PoolError: the crawl stops on it (the
asset's retry policy takes over) instead of recording every task as failed.

`crawl(..., pool=WebEnvPool(n, request_filter=Allowlist([url])))` plays
episodes on `n` browsers; each episode draws its device profile from the
crawl seed (`profiles` is None: a browser emulates any profile), so the
trajectories are the same whatever `n`.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass

from .device_pool import PoolClosed, PoolError
from .pool_slots import SlotLookup, close_quietly, env_alive, first_line
from .web_env import BrowserCrashed, WebEnv

log = logging.getLogger(__name__)

_STOP = object()  # a worker thread's signal to close its browser and end
_JOIN_TIMEOUT_S = 120.0  # an episode's own watchdogs end a stuck step well before this


@dataclass
class _Slot:
    name: str  # "browser#<n>"
    env: WebEnv | None = None
    leased: bool = False
    needs_restart: bool = False  # the last lease ended with the browser lost
    leases: int = 0


class WebEnvPool(SlotLookup):
    """`size` worker threads, each with its own WebEnv; see the module docstring.

    `factory()` launches one env on the calling worker thread; the default is
    `WebEnv.launch(**launch_kw)` (pass `request_filter=Allowlist([...])`,
    `headless`, `executable_path`, `image_format`, `step_timeout_s`).
    """

    platform = "web"
    # Any profile: each episode's seed draws it, as in a one-browser crawl.
    profiles = None

    def __init__(self, size: int, *, factory: Callable[[], WebEnv] | None = None, **launch_kw):
        if size < 1:
            raise ValueError(f"WebEnvPool: size={size} must be >= 1")
        if factory is not None and launch_kw:
            raise ValueError("WebEnvPool: give factory= or launch keywords, not both")
        self.size = size
        self._factory = factory or (lambda: WebEnv.launch(**launch_kw))
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._slots: list[_Slot] = []
        self._local = threading.local()
        self._lock = threading.Lock()
        self._slot_guard = self._lock
        self._closed = False
        self._n = {"leases": 0, "launches": 0, "browsers_lost": 0, "reconnects": 0}

    # ------------------------------------------------------------------ work
    def submit(self, fn: Callable, *args) -> Future:
        """Run `fn(*args)` on a worker thread (where `lease()` works); its Future."""
        with self._lock:
            if self._closed:
                raise PoolClosed("this WebEnvPool is closed")
            if not self._threads:
                self._start_threads()
        fut: Future = Future()
        self._jobs.put((fut, fn, args))
        return fut

    def device_of(self, env) -> None:
        """None: a browser emulates whatever profile the episode's seed draws."""
        return None

    def launch_all(self) -> None:
        """Launch every worker's browser now (a benchmark keeps launches out of its clock).

        Each worker takes one job that holds its lease until all are up; a
        browser that does not launch raises its PoolError here.
        """
        barrier = threading.Barrier(self.size)

        def hold() -> None:
            try:
                with self.lease():
                    barrier.wait()
            except BaseException:
                barrier.abort()  # the others stop waiting for a browser that never comes
                raise

        futures = [self.submit(hold) for _ in range(self.size)]
        errors = [f.exception() for f in futures if f.exception() is not None]
        if errors:
            raise next((e for e in errors if isinstance(e, PoolError)), errors[0])

    @contextmanager
    def lease(self) -> Iterator[WebEnv]:
        """The calling worker thread's browser, launched or restarted as needed."""
        slot: _Slot | None = getattr(self._local, "slot", None)
        if slot is None:
            raise PoolError(
                "WebEnvPool.lease() works on the pool's own threads only "
                "(a Playwright browser is bound to the thread that launched it): "
                "run the work through pool.submit"
            )
        if slot.leased:
            raise PoolError(f"{slot.name} is already leased by this thread")
        env = self._ready_env(slot)
        slot.leased = True
        with self._lock:
            slot.leases += 1
            self._n["leases"] += 1
        try:
            yield env
        except BrowserCrashed:
            self._lost(slot)
            raise
        except BaseException:
            if not env_alive(env):
                self._lost(slot)
            raise
        finally:
            slot.leased = False

    def stats(self) -> dict:
        """Pool figures as plain JSON types (Dagster metadata).

        `reconnects`: browsers relaunched after they died (a DevicePool counts
        reopened sessions under the same name); `server_restarts` is always 0.
        """
        with self._lock:
            return {
                "browsers": self.size,
                "slots": self.size,
                **self._n,
                "server_restarts": 0,
                "slots_used": sum(1 for s in self._slots if s.leases),
            }

    # ------------------------------------------------------------------ life cycle
    def close(self) -> None:
        """Let queued work finish, then each worker closes its browser and ends."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            threads = list(self._threads)
        for _ in threads:
            self._jobs.put(_STOP)
        for t in threads:
            t.join(_JOIN_TIMEOUT_S)
            if t.is_alive():
                log.error(
                    "%s did not end within %.0fs; its browser may be left running", t.name, _JOIN_TIMEOUT_S
                )

    def __enter__(self) -> WebEnvPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ internals
    def _start_threads(self) -> None:
        for i in range(self.size):
            slot = _Slot(name=f"browser#{i}")
            t = threading.Thread(target=self._work, args=(slot,), name=f"crawl-{slot.name}", daemon=True)
            self._slots.append(slot)
            self._threads.append(t)
            t.start()

    def _work(self, slot: _Slot) -> None:
        self._local.slot = slot
        try:
            while True:
                job = self._jobs.get()
                if job is _STOP:
                    return
                fut, fn, args = job
                if not fut.set_running_or_notify_cancel():
                    continue  # cancelled while queued
                try:
                    fut.set_result(fn(*args))
                except BaseException as e:  # the submitter sees it; the worker goes on
                    fut.set_exception(e)
        finally:
            # On this thread: a Playwright browser cannot be closed from another.
            if slot.env is not None:
                close_quietly(slot.env)
                with self._lock:
                    slot.env = None

    def _ready_env(self, slot: _Slot) -> WebEnv:
        if slot.env is None:
            try:
                env = self._factory()
            except Exception as e:
                raise PoolError(f"{slot.name}: the browser did not launch: {first_line(e)}") from e
            with self._lock:
                slot.env = env
                self._n["launches"] += 1
        elif slot.needs_restart or not env_alive(slot.env):
            log.warning("%s: restarting its browser", slot.name)
            try:
                slot.env.restart()
            except Exception as e:
                raise PoolError(f"{slot.name}: the browser died and did not restart: {first_line(e)}") from e
            with self._lock:
                self._n["reconnects"] += 1
        slot.needs_restart = False
        return slot.env

    def _lost(self, slot: _Slot) -> None:
        # Restarted at the next lease, on this thread, before the retry runs.
        slot.needs_restart = True
        with self._lock:
            self._n["browsers_lost"] += 1
