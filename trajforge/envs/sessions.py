"""The environment server's sessions: one environment each, on its own thread.

Playwright's sync objects belong to the thread that made them (and an Appium
session is not thread-safe either), so every call on a session's environment
runs on that session's single worker thread; HTTP handlers only wait on it.

Thread groups: an env name whose sessions may share a thread (`sessions_per_thread`
N > 1: web sessions whose contexts share Chromiums, `trajforge serve
--contexts-per-browser N`, unless `--no-shared-driver`) puts each session's
environment on a group thread that up to N environments share, so they share one
Playwright driver (~80 MB each saved) and, as the thread is pinned
(crawlers/shared_browser.py), one Chromium. A group with room is reused; the last
environment to leave one shuts its thread down (its driver and Chromium went with the
environments' close). The price: the calls of a group's sessions take turns on its
thread (one session's step waits for another's), and a call that hangs holds the
group until the browser watchdog frees it. One call at a time per session, in order,
as before.

A session whose environment failed (a crashed browser, a lost actor) answers
every step with that failure until it is reset; the reset opens a fresh
environment. A session idle past the timeout is reaped: its environment is
closed (an open episode is recorded as `error` by the environment) and its id
answers 410 from then on.

The warm pool: a client that names its next episode (task, seed) has it prepared
in the background on the session's spare environment (its own thread, its own
browser; in a thread group, a group other than the active environment's, so the
preparation still overlaps the session's play) while the current episode plays, so a
reset that asks for exactly that
episode is a hand-over: the two environments swap places and the old one ends its
episode (as a cold reset would) and waits for the next preparation. A reset that
asks for anything else is a cold reset on the active environment. A prepared
episode takes no step before it is handed over, so one that is never used is never
recorded (an episode with no steps is not; a spare is closed as a client closes an
env, not as a lost one). A preparation that failed answers the reset that asks for
it with env_failed, never earlier.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import gymnasium

from crawlers.shared_browser import pin_thread
from trajforge.envs.gui_env import GuiEnv

log = logging.getLogger(__name__)

# How long a reaped or closed session id is remembered (to answer 410, not 404).
GONE_MEMORY = 2048


class SessionError(Exception):
    """A request the server answers with `status`; `kind` is the metrics label."""

    status = 400
    kind = "bad_request"

    def __init__(self, message: str, *, field: str | None = None, retry_after: float | None = None):
        super().__init__(message)
        self.field, self.retry_after = field, retry_after


class BadRequest(SessionError):
    """A value the environment refused (a malformed action, an unknown task)."""

    status, kind = 422, "bad_request"


class UnknownName(SessionError):
    status, kind = 404, "unknown_name"


class UnknownSession(SessionError):
    status, kind = 404, "unknown_session"


class SessionGone(SessionError):
    status, kind = 410, "session_gone"


class SessionBusy(SessionError):
    status, kind = 409, "session_busy"


class EpisodeEnded(SessionError):
    status, kind = 409, "episode_ended"


class ServerFull(SessionError):
    status, kind = 429, "full"


class EnvFailed(SessionError):
    """The environment itself failed (not the policy): never a reward of 0."""

    status, kind = 503, "env_failed"


# An episode as a client names it: (task id, seed); None draws one.
EpisodeKey = tuple["str | None", "int | None"]


@dataclass(eq=False)
class ThreadGroup:
    """A worker thread up to `size` slots' environments share (one Playwright driver)."""

    worker: ThreadPoolExecutor
    size: int
    slots: int = 0


@dataclass
class Slot:
    """An environment and the one thread every call on it runs on."""

    worker: ThreadPoolExecutor
    env: gymnasium.Env | None = None
    failure: str | None = None  # why the environment failed; cleared when it is replaced
    group: ThreadGroup | None = None  # None: the thread is the slot's own


@dataclass
class Prepared:
    """The episode `key`, being (or already) reset on the session's spare environment."""

    key: EpisodeKey
    future: Future  # the reset's answer, or its failure


# What opens an environment for a session: (env name, policy id, model profile) -> a gymnasium.Env.
OpenEnv = Callable[[str, "str | None", "str | None"], gymnasium.Env]


@dataclass
class Session:
    id: str
    env_name: str
    policy_id: str | None
    active: Slot  # where the episode in play runs
    last_used: float = field(default_factory=time.monotonic)
    busy: bool = False
    wire: dict = field(default_factory=dict)  # how observations travel (image format)
    profile: str | None = None  # the model profile its text answers are read in
    ended: bool = False  # the episode terminated or was truncated: only a reset goes on
    spare: Slot | None = None  # the warm pool's: where the next episode is prepared
    prepared: Prepared | None = None
    closed: bool = False

    @property
    def env(self) -> gymnasium.Env | None:
        return self.active.env

    @property
    def failure(self) -> str | None:
        return self.active.failure


class SessionPool:
    """At most `max_sessions` sessions; idle ones reaped after `idle_timeout` s.

    `sessions_per_thread(env_name)`: how many environments of that name may share a
    worker thread (1, the default: a thread each; see the module's thread groups)."""

    def __init__(
        self,
        open_env: OpenEnv,
        *,
        max_sessions: int,
        idle_timeout: float,
        warm: bool = True,
        sessions_per_thread: Callable[[str], int] | None = None,
    ):
        self.open_env, self.max_sessions, self.idle_timeout = open_env, max_sessions, idle_timeout
        self.warm = warm  # False: announced episodes are not prepared (every reset is cold)
        self.sessions_per_thread = sessions_per_thread or (lambda _name: 1)
        self._groups: list[ThreadGroup] = []
        self._group_serial = 0
        self._sessions: dict[str, Session] = {}
        self._gone: dict[str, str] = {}  # id -> why it went
        self._lock = threading.Lock()
        self.reaped = 0

    # -- lifecycle --------------------------------------------------------

    def open(
        self, env_name: str, policy_id: str | None, wire: dict | None = None, profile: str | None = None
    ) -> Session:
        """A new session (its environment opens on its own thread at the first reset)."""
        with self._lock:
            if len(self._sessions) >= self.max_sessions:
                raise ServerFull(
                    f"all {self.max_sessions} sessions are in use; retry later or delete one",
                    retry_after=self._retry_after(),
                )
            sid = uuid.uuid4().hex
            slot = self._new_slot(env_name, f"session-{sid[:8]}")
            session = Session(sid, env_name, policy_id, slot, wire=wire or {}, profile=profile)
            self._sessions[sid] = session
        return session

    def get(self, sid: str) -> Session:
        with self._lock:
            session = self._sessions.get(sid)
            if session is not None:
                return session
            if sid in self._gone:
                raise SessionGone(f"session {sid} is gone: {self._gone[sid]}", field="session_id")
        raise UnknownSession(f"no session {sid}", field="session_id")

    def close(self, sid: str, why: str = "deleted by the client", *, lost: bool = False) -> None:
        """Close a session. `lost`: its client is gone (reaped, the server stopping), so an
        episode in play is recorded as `error`, not as a failure of the policy."""
        session = self._take(sid, why)
        self._shut(session, why if lost else None)

    def close_all(self) -> None:
        with self._lock:
            sids = list(self._sessions)
        for sid in sids:
            try:
                self.close(sid, "the server stopped", lost=True)
            except SessionError:
                pass

    def reap_idle(self, now: float | None = None) -> int:
        """Close sessions idle past the timeout; how many."""
        now = time.monotonic() if now is None else now
        with self._lock:
            idle = [
                s.id for s in self._sessions.values() if not s.busy and now - s.last_used > self.idle_timeout
            ]
        for sid in idle:
            try:
                self.close(sid, f"reaped after {self.idle_timeout:g} s idle", lost=True)
                self.reaped += 1
            except SessionError:
                pass  # closed by its client meanwhile
        return len(idle)

    def has(self, sid: str) -> bool:
        with self._lock:
            return sid in self._sessions

    def open_count(self) -> int:
        with self._lock:
            return len(self._sessions)

    # -- calls on a session's thread -------------------------------------

    def call(self, session: Session, fn: Callable[[gymnasium.Env], Any], *, reset: bool) -> Future:
        """Run `fn(env)` on the session's thread; one call at a time per session.

        A reset after a failure (or the first reset) opens a fresh environment.
        """
        with self._lock:
            if session.busy:
                raise SessionBusy(f"session {session.id} is already running a call", field="session_id")
            if session.active.failure and not reset:
                raise EnvFailed(
                    f"session {session.id}: the environment failed ({session.active.failure}); reset it",
                    field="session_id",
                )
            session.busy = True
            slot = session.active
        return slot.worker.submit(self._run, session, slot, fn, reset)

    def _run(self, session: Session, slot: Slot, fn, reset: bool):
        try:
            return self._on_slot(session, slot, fn, reset)
        finally:
            session.last_used = time.monotonic()
            session.busy = False

    def _on_slot(self, session: Session, slot: Slot, fn, reset: bool):
        if reset and (slot.env is None or slot.failure):
            self._replace_env(session, slot)
        try:
            return fn(slot.env)
        except (SessionError, ValueError):
            raise  # the request was wrong, not the environment
        except Exception as exc:
            slot.failure = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            raise EnvFailed(f"session {session.id}: {slot.failure}", field="session_id") from exc

    def _replace_env(self, session: Session, slot: Slot) -> None:
        if slot.env is not None:
            _close_quietly(slot.env)
            slot.env = None
        try:
            slot.env = self.open_env(session.env_name, session.policy_id, session.profile)
        except Exception as exc:
            slot.failure = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            raise EnvFailed(f"cannot open environment {session.env_name!r}: {slot.failure}") from exc
        slot.failure = None

    # -- the warm pool ------------------------------------------------------

    def announce(self, session: Session, key: EpisodeKey, fn: Callable[[gymnasium.Env], Any]) -> bool:
        """Prepare the episode `key` (`fn` resets an env to it) on the session's spare
        environment in the background; a different one announced before is dropped (it
        took no step: nothing is recorded). False when the pool is off or the session closed."""
        with self._lock:
            if not self.warm or session.closed:
                return False
            if session.prepared is not None and session.prepared.key == key:
                return True
            if session.spare is None:
                session.spare = self._new_slot(
                    session.env_name, f"spare-{session.id[:8]}", avoid=session.active.group
                )
            spare = session.spare
            future = spare.worker.submit(self._on_slot, session, spare, fn, True)
            session.prepared = Prepared(key, future)
        return True

    def hand_over(self, session: Session, key: EpisodeKey) -> Future | None:
        """The prepared episode's answer when it is `key` (the session is busy until
        `handed_over`), else None: the reset is cold."""
        with self._lock:
            if session.busy:
                raise SessionBusy(f"session {session.id} is already running a call", field="session_id")
            prepared = session.prepared
            if prepared is None or prepared.key != key:
                return None
            session.busy, session.prepared = True, None
        return prepared.future

    def handed_over(self, session: Session, ok: bool) -> None:
        """After `hand_over`'s answer came: when it is good, the spare becomes the active
        environment and the old one ends its episode (recorded as a cold reset would
        record it) on its own thread, behind the next preparation's back."""
        with self._lock:
            session.busy = False
            session.last_used = time.monotonic()
            if not ok or session.spare is None:
                return
            old, session.active, session.spare = session.active, session.spare, session.active
            if old.env is not None and not session.closed:
                old.worker.submit(_end_episode, old.env, "reset() before the episode ended")

    def is_prepared(self, session: Session) -> EpisodeKey | None:
        """The episode prepared (or being prepared) for the session, if any."""
        prepared = session.prepared
        return prepared.key if prepared is not None else None

    # -- internals --------------------------------------------------------

    def _new_slot(self, env_name: str, name: str, avoid: ThreadGroup | None = None) -> Slot:
        """A slot on a thread of its own, or in a thread group with room (not `avoid`,
        the session's other slot's). Under the lock."""
        size = self.sessions_per_thread(env_name)
        if size <= 1:
            return Slot(ThreadPoolExecutor(max_workers=1, thread_name_prefix=name))
        group = next((g for g in self._groups if g.size == size and g.slots < size and g is not avoid), None)
        if group is None:
            self._group_serial += 1
            worker = ThreadPoolExecutor(
                max_workers=1,
                thread_name_prefix=f"session-group-{self._group_serial}",
                initializer=pin_thread,  # its envs keep to Chromiums of its own
            )
            group = ThreadGroup(worker, size)
            self._groups.append(group)
        group.slots += 1
        return Slot(group.worker, group=group)

    def _leave(self, slot: Slot) -> None:
        """The slot's environment is closed: its own thread ends, or its group's when it
        was the group's last."""
        group = slot.group
        if group is not None:
            with self._lock:
                group.slots -= 1
                if group.slots > 0:
                    return
                self._groups.remove(group)
        slot.worker.shutdown(wait=True)

    def thread_groups(self) -> list[tuple[int, int]]:
        """(slots, size) of each thread group (for tests and metrics)."""
        with self._lock:
            return [(g.slots, g.size) for g in self._groups]

    def _take(self, sid: str, why: str) -> Session:
        with self._lock:
            session = self._sessions.pop(sid, None)
            if session is None:
                if sid in self._gone:
                    raise SessionGone(f"session {sid} is gone: {self._gone[sid]}", field="session_id")
                raise UnknownSession(f"no session {sid}", field="session_id")
            session.closed, session.prepared = True, None
            self._gone[sid] = why
            while len(self._gone) > GONE_MEMORY:
                self._gone.pop(next(iter(self._gone)))
        return session

    def _shut(self, session: Session, lost: str | None) -> None:
        # Closing runs on each environment's own thread, after any call in flight. A spare
        # holds no episode a client played (one prepared took no step): it closes as a
        # client closes an env, so nothing of it is recorded as an error.
        slots = [(session.active, lost), (session.spare, None)]
        closing = [slot.worker.submit(_close_slot, slot, why) for slot, why in slots if slot is not None]
        for done in closing:
            done.result()
        for slot, _ in slots:
            if slot is not None:
                self._leave(slot)

    def _retry_after(self) -> float:
        now = time.monotonic()
        waits = [max(0.0, self.idle_timeout - (now - s.last_used)) for s in self._sessions.values()]
        return max(1.0, min(waits, default=self.idle_timeout))


def _close_slot(slot: Slot, lost: str | None) -> None:
    # Read on the slot's thread: a preparation queued before may have opened its env.
    if slot.env is not None:
        _close_quietly(slot.env, lost)


def _end_episode(env: gymnasium.Env, why: str) -> None:
    """End the episode in play as a reset would (recorded when it took steps); env stays open."""
    try:
        if isinstance(env.unwrapped, GuiEnv):
            env.unwrapped.end_episode(why)
    except Exception as exc:  # its next reset or close finds the env broken and says so
        log.warning("ending a handed-over episode failed: %s: %s", type(exc).__name__, exc)


def _close_quietly(env: gymnasium.Env, lost: str | None = None) -> None:
    try:
        if lost is not None and isinstance(env.unwrapped, GuiEnv):
            env.unwrapped.end_with_env_failure(f"session {lost}")
        env.close()
    except Exception as exc:  # a crashed browser's close fails too; the session goes anyway
        log.warning("closing a session's environment failed: %s: %s", type(exc).__name__, exc)
