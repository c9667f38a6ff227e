"""A pool of Appium sessions: concurrent, fault-tolerant mobile crawling.

Every device of the pool serves `sessions_per_device` slots (a real Android or
iOS phone serves one: it runs one session at a time); each slot is one
Appium session (a MobileEnv) with its own `appium:chromedriverPort`, so the
Chromium devices' chromedrivers never collide. `lease()` hands a caller a
connected env for one episode and takes it back afterwards:

- Sessions open lazily, on the first lease of a slot, and stay open between
  episodes (a session start costs about a second).
- A lease that ends in SessionLost (any BrowserCrashed) drops the slot's
  session; the next lease of that slot reconnects after an exponential
  backoff. When the Appium server the pool owns is down, it is restarted
  (and health-checked) first; a loss caused by the server is not the device's
  fault and is not counted against it.
- A device whose consecutive failures (failed session starts, lost sessions)
  reach `max_failures` is quarantined: out of rotation, logged, listed in
  `quarantined` and appended to the JSON-lines report. A lease that
  completes cleanly resets the count. When every device is quarantined,
  `lease()` raises PoolExhausted. A pool-level failure (that, a closed pool,
  an owned server that will not restart) is a PoolError: a crawl stops on it
  instead of recording the task as failed.

`stats()` returns the figures a Dagster asset reports as metadata.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from .pool_slots import SlotLookup, close_quietly, env_alive, first_line
from .web_env import BrowserCrashed

log = logging.getLogger(__name__)

# (first delay, maximum delay) in seconds; the delay doubles with each
# consecutive failure of the device.
DEFAULT_BACKOFF_S = (1.0, 30.0)


class PoolError(RuntimeError):
    """The pool itself cannot go on (not one task's fault): a crawl stops on it."""


class PoolExhausted(PoolError):
    """Every device of the pool is quarantined: nothing left to lease."""


class PoolClosed(PoolError):
    """A lease was asked of a closed pool."""


def backoff_delay(failures: int, backoff_s: tuple[float, float]) -> float:
    """Seconds to wait before the reconnect that follows `failures` consecutive failures."""
    first, cap = backoff_s
    if failures <= 0:
        return 0.0
    return min(cap, first * 2 ** (failures - 1))


# Ports handed out by this process and not yet released: two slots (even of two
# pools) never get the same chromedriver port, although each port is free when
# checked and only bound later by chromedriver.
_ports_lock = threading.Lock()
_ports_taken: set[int] = set()


def _port_is_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def allocate_port() -> int:
    """A free TCP port on localhost, reserved for this process until release_port."""
    with _ports_lock:
        for _ in range(100):
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            if port not in _ports_taken:
                _ports_taken.add(port)
                return port
    raise RuntimeError("no free TCP port for a chromedriver after 100 tries")


def release_port(port: int) -> None:
    with _ports_lock:
        _ports_taken.discard(port)


@dataclass
class _Slot:
    device: object  # DeviceSpec
    session: int  # index of this session on its device
    port: int  # its appium:chromedriverPort
    env: object | None = None  # the connected MobileEnv, or None
    busy: bool = False
    generation: int = 0  # the server generation the session was opened on
    leases: int = 0
    needs_reconnect: bool = False  # its last session was lost or failed to start

    @property
    def name(self) -> str:
        return f"{self.device.name}#{self.session}"


@dataclass
class _Health:
    failures: int = 0  # consecutive
    quarantined: bool = False
    last_error: str = ""


@dataclass
class _Counters:
    leases: int = 0
    sessions_opened: int = 0
    session_start_failures: int = 0
    sessions_lost: int = 0
    reconnects: int = 0
    server_restarts: int = 0
    slots_used: set = field(default_factory=set)  # names of slots leased at least once


class DevicePool(SlotLookup):
    """Slots = devices x sessions_per_device; see the module docstring.

    `server` is an AppiumServer the pool may restart when it is down; with
    only `server_url` (an external server or farm) the pool cannot restart it.
    A DeviceSpec with its own `server_url` talks to that server instead.
    `env_factory(server_url, spec, chromedriver_port)` opens one session; the
    default opens a MobileEnv with `image_format` and `step_timeout_s`.
    """

    platform = "mobile_web"  # recorded for a task that never got a device

    def __init__(
        self,
        devices: list,
        *,
        server=None,
        server_url: str | None = None,
        sessions_per_device: int = 1,
        max_failures: int = 3,
        backoff_s: tuple[float, float] = DEFAULT_BACKOFF_S,
        report_path: str | Path | None = None,
        image_format: str = "png",
        step_timeout_s: float = 15.0,
        screenshot_scale: str = "device",
        env_factory: Callable[[str, object, int], object] | None = None,
    ):
        devices = list(devices)
        if not devices:
            raise ValueError("DevicePool: no devices given")
        names = [d.name for d in devices]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"DevicePool: device names must be unique; repeated: {dupes}")
        if sessions_per_device < 1:
            raise ValueError(f"sessions_per_device={sessions_per_device} must be >= 1")
        if max_failures < 1:
            raise ValueError(f"max_failures={max_failures} must be >= 1")
        if len(backoff_s) != 2 or not 0 <= backoff_s[0] <= backoff_s[1]:
            raise ValueError(
                f"backoff_s={backoff_s!r}: expected (first, maximum) seconds, 0 <= first <= maximum"
            )
        if (
            server is None
            and server_url is None
            and any(getattr(d, "server_url", None) is None for d in devices)
        ):
            raise ValueError(
                "DevicePool: give server= or server_url= (a device without its own server_url needs one)"
            )
        self.devices = devices
        self.server = server
        self._server_url = server_url
        self.sessions_per_device = sessions_per_device
        self.max_failures = max_failures
        self.backoff_s = (float(backoff_s[0]), float(backoff_s[1]))
        self.report_path = Path(report_path) if report_path is not None else None
        self.image_format = image_format
        self.step_timeout_s = step_timeout_s
        self.screenshot_scale = screenshot_scale
        self._factory = env_factory or self._open_mobile_env
        self._cond = threading.Condition()
        self._slot_guard = self._cond
        self._server_lock = threading.Lock()
        self._generation = 0  # bumped on every server restart
        self._closed = False
        self._workers: ThreadPoolExecutor | None = None  # made at the first submit
        self._health = {d.name: _Health() for d in devices}
        self._n = _Counters()
        self._quarantine_log: list[dict] = []
        # A real phone runs one session at a time; only emulated Chromium phones
        # (one browser per session) take several.
        self._slots = [
            _Slot(device=d, session=i, port=allocate_port())
            for d in devices
            for i in range(sessions_per_device if _emulated(d) else 1)
        ]

    # ------------------------------------------------------------------ public
    @property
    def size(self) -> int:
        """How many episodes the pool can run at once (every slot, quarantined or not)."""
        return len(self._slots)

    @property
    def server_url(self) -> str | None:
        # An owned server's url is read each time: a restart may move it.
        if self.server is not None:
            return self.server.url
        return self._server_url

    @property
    def quarantined(self) -> list[str]:
        with self._cond:
            return [d.name for d in self.devices if self._health[d.name].quarantined]

    @property
    def quarantine_records(self) -> list[dict]:
        """What was written to the report, one dict per quarantined device."""
        with self._cond:
            return list(self._quarantine_log)

    @property
    def profiles(self) -> list[str]:
        """The device profile names this pool crawls on."""
        return sorted({d.profile.name for d in self.devices})

    def slots(self) -> list[dict]:
        """A snapshot of the slots (for logs and tests)."""
        with self._cond:
            return [
                {
                    "slot": s.name,
                    "device": s.device.name,
                    "chromedriver_port": s.port,
                    "busy": s.busy,
                    "connected": s.env is not None,
                    "leases": s.leases,
                    "quarantined": self._health[s.device.name].quarantined,
                }
                for s in self._slots
            ]

    def device_of(self, env) -> object:
        """The DeviceSpec of the slot holding `env` (a leased env)."""
        return self._slot_of(env).device

    def stats(self) -> dict:
        """Pool figures as plain JSON types (Dagster metadata)."""
        with self._cond:
            n = self._n
            return {
                "devices": len(self.devices),
                "slots": len(self._slots),
                "leases": n.leases,
                "sessions_opened": n.sessions_opened,
                "session_start_failures": n.session_start_failures,
                "sessions_lost": n.sessions_lost,
                "reconnects": n.reconnects,
                "server_restarts": n.server_restarts,
                "slots_used": len(n.slots_used),
                "quarantined": [d.name for d in self.devices if self._health[d.name].quarantined],
            }

    def submit(self, fn: Callable, *args) -> Future:
        """Run `fn(*args)` on one of `size` worker threads (any thread may drive a session)."""
        with self._cond:
            if self._closed:
                raise PoolClosed("this DevicePool is closed")
            if self._workers is None:
                self._workers = ThreadPoolExecutor(max_workers=self.size, thread_name_prefix="crawl")
            return self._workers.submit(fn, *args)

    @contextmanager
    def lease(self, timeout_s: float | None = None) -> Iterator[object]:
        """A connected env for one episode; blocks until a healthy slot is free.

        Raises PoolExhausted when every device is quarantined and TimeoutError
        when no slot frees up within `timeout_s`. An exception from the body is
        re-raised after the slot is put back (a lost session is dropped there).
        """
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            slot = self._take_slot(deadline)
            try:
                self._connect(slot)
            except _StartFailed:
                self._give_back(slot)
                continue  # that device failed (maybe quarantined): try another slot
            except BaseException:
                self._give_back(slot)
                raise
            break
        env = slot.env
        try:
            yield env
        except BrowserCrashed as e:
            self._on_lost(slot, e)
            raise
        except BaseException:
            if not env_alive(env):
                self._on_lost(slot, RuntimeError("the session died during the episode"))
            else:
                self._give_back(slot)
            raise
        else:
            with self._cond:
                self._health[slot.device.name].failures = 0
            self._give_back(slot)

    def close(self) -> None:
        """Close every session (the server, if owned, is the caller's to stop)."""
        with self._cond:
            self._closed = True
            workers, self._workers = self._workers, None
            envs = [s.env for s in self._slots if s.env is not None]
            for s in self._slots:
                s.env = None
            self._cond.notify_all()
        if workers is not None:
            workers.shutdown(wait=False)  # a crawl waits for its own episodes
        for env in envs:
            close_quietly(env)
        for s in self._slots:
            release_port(s.port)

    def __enter__(self) -> DevicePool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ slots
    def _take_slot(self, deadline: float | None) -> _Slot:
        with self._cond:
            while True:
                if self._closed:
                    raise PoolClosed("this DevicePool is closed")
                live = [s for s in self._slots if not self._health[s.device.name].quarantined]
                if not live:
                    raise PoolExhausted(self._exhausted_message())
                free = [s for s in live if not s.busy]
                if free:
                    # A connected session first, then the least used slot.
                    slot = min(free, key=lambda s: (s.env is None, s.leases))
                    slot.busy = True
                    return slot
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise TimeoutError(
                        f"no free device session within the lease timeout ({len(live)} slots busy)"
                    )
                self._cond.wait(remaining)

    def _give_back(self, slot: _Slot) -> None:
        with self._cond:
            slot.busy = False
            self._cond.notify_all()

    def _exhausted_message(self) -> str:
        parts = [f"{d.name} ({self._health[d.name].last_error})" for d in self.devices]
        where = f"; report: {self.report_path}" if self.report_path else ""
        return (
            f"every device of the pool is quarantined after {self.max_failures} "
            f"consecutive failures: {', '.join(parts)}{where}"
        )

    # ------------------------------------------------------------------ sessions
    def _connect(self, slot: _Slot) -> None:
        """Make sure the slot holds a live session (the slot is busy: ours alone)."""
        if slot.env is not None and (slot.generation != self._generation or not env_alive(slot.env)):
            # Opened on a server that has since restarted, or died while idle.
            close_quietly(slot.env)
            slot.env = None
            slot.needs_reconnect = True
        if slot.env is not None:
            self._count_lease(slot)
            return
        health = self._health[slot.device.name]
        delay = backoff_delay(health.failures, self.backoff_s)
        if delay:
            log.info(
                "device %s: reconnecting in %.1fs (%d consecutive failures)",
                slot.device.name,
                delay,
                health.failures,
            )
            time.sleep(delay)
        own = self._owns(slot.device)
        if own:
            self._ensure_server()
        url = self._url_for(slot.device)
        if not _port_is_free(slot.port):
            # A chromedriver of a lost session may still hold it.
            release_port(slot.port)
            slot.port = allocate_port()
        if slot.needs_reconnect:
            with self._cond:
                self._n.reconnects += 1
        generation = self._generation
        try:
            env = self._factory(url, slot.device, slot.port)
        except Exception as e:
            with self._cond:
                self._n.session_start_failures += 1
            slot.needs_reconnect = True
            log.warning("device %s: session start failed: %s", slot.name, first_line(e))
            # The server going down meanwhile is not the device's fault.
            if not (own and self._ensure_server()):
                self._charge(slot, f"session start failed: {first_line(e)}")
            raise _StartFailed() from e
        with self._cond:
            slot.env, slot.generation, slot.needs_reconnect = env, generation, False
            self._n.sessions_opened += 1
        self._count_lease(slot)

    def _count_lease(self, slot: _Slot) -> None:
        with self._cond:
            slot.leases += 1
            self._n.leases += 1
            self._n.slots_used.add(slot.name)

    def _on_lost(self, slot: _Slot, error: BaseException) -> None:
        """The slot's session died during a lease: drop it, blame the server or the device."""
        try:
            env, generation = slot.env, slot.generation
            slot.env = None
            slot.needs_reconnect = True
            close_quietly(env)
            with self._cond:
                self._n.sessions_lost += 1
            server_fault = False
            if self._owns(slot.device):
                # A restart since the session opened, or one needed now, explains the loss.
                server_fault = self._ensure_server() or generation != self._generation
            log.warning(
                "slot %s: session lost (%s)%s",
                slot.name,
                first_line(error),
                "; the Appium server was down" if server_fault else "",
            )
            if not server_fault:
                self._charge(slot, f"session lost: {first_line(error)}")
        finally:
            self._give_back(slot)

    def _charge(self, slot: _Slot, error: str) -> None:
        """One more consecutive failure for the slot's device; quarantine at the limit."""
        with self._cond:
            health = self._health[slot.device.name]
            health.failures += 1
            health.last_error = error
            if health.quarantined or health.failures < self.max_failures:
                return
            health.quarantined = True
            record = {
                "time": time.time(),
                "device": slot.device.name,
                "kind": getattr(slot.device, "kind", None),
                "profile": slot.device.profile.name,
                "server_url": self._url_for(slot.device),
                "consecutive_failures": health.failures,
                "last_error": error,
            }
            self._quarantine_log.append(record)
            idle = [s for s in self._slots if s.device is slot.device and not s.busy and s.env is not None]
            envs = [s.env for s in idle]
            for s in idle:
                s.env = None
            self._cond.notify_all()
        log.error(
            "device %s quarantined after %d consecutive failures: %s",
            slot.device.name,
            record["consecutive_failures"],
            error,
        )
        if self.report_path is not None:
            self.report_path.parent.mkdir(parents=True, exist_ok=True)
            with self._cond, open(self.report_path, "a", encoding="utf-8") as f:
                f.write(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")
        for env in envs:
            close_quietly(env)

    # ------------------------------------------------------------------ server
    def _owns(self, device) -> bool:
        return self.server is not None and getattr(device, "server_url", None) is None

    def _url_for(self, device) -> str:
        return getattr(device, "server_url", None) or self.server_url

    def _ensure_server(self) -> bool:
        """Restart the owned server when it is down; True when it had to."""
        with self._server_lock:  # one restart, however many slots notice at once
            if self.server.is_healthy():
                return False
            log.warning("the Appium server at %s is down; restarting it", self.server.url)
            try:
                self.server.restart()
            except Exception as e:
                raise PoolError(
                    f"the Appium server at {self.server.url} was down and could "
                    f"not be restarted: {first_line(e)}"
                ) from e
            with self._cond:
                self._generation += 1
                self._n.server_restarts += 1
            return True

    def _open_mobile_env(self, server_url: str, spec, chromedriver_port: int):
        from .mobile_env import MobileEnv  # imported late: appium is heavy

        return MobileEnv(
            server_url,
            spec,
            chromedriver_port=chromedriver_port,
            image_format=self.image_format,
            step_timeout_s=self.step_timeout_s,
            # A real phone only has its own pixels.
            screenshot_scale=self.screenshot_scale if _emulated(spec) else "device",
        )


class _StartFailed(Exception):
    """A session could not be opened on a slot (already counted against its device)."""


def _emulated(device) -> bool:
    return getattr(device, "kind", "chromium") == "chromium"
