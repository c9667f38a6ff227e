"""Web sessions that share a Chromium share a thread too (trajforge/envs/sessions.py's
thread groups): one Playwright driver and one Chromium per group of N sessions, through
`trajforge serve --contexts-per-browser N` on a real Chromium; a killed Chromium fails
its sessions until they reset; closing every session leaves no driver, Chromium or
thread. The pool's grouping itself on stand-in environments."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import gymnasium
import httpx
import pytest

from tests.envs import serving
from trajforge.envs.remote import RemoteEnv
from trajforge.envs.sessions import SessionBusy, SessionPool

WAIT = {"action": {"type": "wait", "duration_ms": 10}}


class _Stub(gymnasium.Env):
    """Records the thread every call ran on."""

    def __init__(self, name: str):
        self.name, self.threads, self.closed = name, [], False

    def reset(self, **kw):
        self.threads.append(threading.current_thread().name)
        return {}, {}

    def close(self):
        self.closed = True


def _group_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("session-group-")]


def test_sessions_of_a_web_env_share_group_threads_and_leave_none():
    opened: list[_Stub] = []

    def open_env(name, policy, profile):
        opened.append(_Stub(name))
        return opened[-1]

    pool = SessionPool(
        open_env, max_sessions=8, idle_timeout=60, sessions_per_thread=lambda name: 2 if name == "web" else 1
    )
    sessions = [pool.open("web", None) for _ in range(3)] + [pool.open("desktop", None)]
    for s in sessions:
        pool.call(s, lambda env: env.reset(), reset=True).result(timeout=10)
    threads = [s.env.threads[0] for s in sessions]
    assert threads[0] == threads[1] != threads[2]  # a group of 2, then another
    assert threads[0].startswith("session-group-") and threads[2].startswith("session-group-")
    assert threads[3].startswith("session-")  # not a web env: a thread of its own
    assert threading.current_thread().name not in threads
    assert sorted(pool.thread_groups()) == [(1, 2), (2, 2)]
    # The warm pool's spare goes to another group than its session's active env.
    assert pool.announce(sessions[0], ("t", 1), lambda env: env.reset())
    sessions[0].prepared.future.result(timeout=10)
    assert sessions[0].spare.group is not sessions[0].active.group
    assert sessions[0].spare.env.threads[0] == threads[2]  # the group with room
    # One call at a time per session still; another session of the group queues behind it.
    gate = threading.Event()
    held = pool.call(sessions[0], lambda env: gate.wait(10), reset=False)
    with pytest.raises(SessionBusy):
        pool.call(sessions[0], lambda env: None, reset=False)
    queued = pool.call(sessions[1], lambda env: threading.current_thread().name, reset=False)
    assert not queued.done()
    gate.set()
    assert held.result(timeout=10) and queued.result(timeout=10) == threads[0]
    pool.close(sessions[1].id)
    assert sorted(pool.thread_groups()) == [(1, 2), (2, 2)]  # group 1 keeps session 0
    pool.close_all()
    assert pool.thread_groups() == [] and all(env.closed for env in opened)
    deadline = time.monotonic() + 5
    while _group_threads() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _group_threads() == []


def _children(pid: int, kind: str) -> list[int]:
    """The server's direct children named `kind` (node: Playwright drivers; chrom: the
    shared Chromiums' browser processes; their renderers are their own children)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        comm, rest = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :].split()
        if int(rest[1]) == pid and kind in comm and rest[0] != "Z":
            out.append(int(entry))
    return sorted(out)


def _until(pred, timeout_s: float = 20.0):
    deadline = time.monotonic() + timeout_s
    while not pred() and time.monotonic() < deadline:
        time.sleep(0.1)
    return pred()


@pytest.fixture(scope="module")
def tiny_yaml(tiny_url, tmp_path_factory) -> Path:
    return serving.tiny_env_file(tmp_path_factory.mktemp("env"), tiny_url, task="Press Add once")


def test_a_group_shares_one_driver_and_one_chromium_and_recovers_from_a_killed_one(tiny_yaml, tmp_path):
    with serving.serve(
        tiny_yaml, record_to=tmp_path, max_sessions=4, extra=("--contexts-per-browser", "2")
    ) as server:
        url, pid = server.url, server.proc.pid
        envs = [RemoteEnv(url, "tiny", policy_id=f"g{i}") for i in range(3)]
        try:
            envs[0].reset()
            first = _children(pid, "chrom")
            assert len(first) == 1
            for env in envs[1:]:
                env.reset()
            # 3 sessions, 2 per Chromium: 2 groups, each 1 driver + 1 Chromium (not 3 drivers).
            assert len(_children(pid, "node")) == 2
            assert len(_children(pid, "chrom")) == 2
            os.kill(first[0], signal.SIGKILL)  # sessions 0 and 1's Chromium
            for env in envs[:2]:
                failed = httpx.post(f"{url}/v1/sessions/{env.session_id}/step", json=WAIT, timeout=60)
                assert failed.status_code == 503 and failed.json()["error"]["kind"] == "env_failed"
            for env in envs[:2]:
                env.reset()
                env.step({"type": "wait", "duration_ms": 10})
            assert _until(
                lambda: len(_children(pid, "chrom")) == 2 and first[0] not in _children(pid, "chrom")
            )
            assert len(_children(pid, "node")) == 2
            # The warm pool: session 2's spare goes to another group (both are full or its
            # own), so a third group; the announced episode is handed over.
            envs[2].announce_next(seed=5)
            envs[2].step({"type": "wait", "duration_ms": 10})  # carries the announcement
            envs[2].reset(seed=5)
            assert httpx.get(url + "/v1/health").json()["resets"]["warm"] == 1
            assert len(_children(pid, "node")) == 3
        finally:
            for env in envs:
                env.close()
        assert _until(lambda: not _children(pid, "node") and not _children(pid, "chrom")), (
            _children(pid, "node"),
            _children(pid, "chrom"),
        )
        assert httpx.get(url + "/v1/health").json()["sessions_open"] == 0


def test_no_shared_driver_keeps_a_driver_per_session(tiny_yaml, tmp_path):
    extra = ("--contexts-per-browser", "2", "--no-shared-driver")
    with serving.serve(tiny_yaml, record_to=tmp_path, max_sessions=2, extra=extra) as server:
        envs = [RemoteEnv(server.url, "tiny", policy_id=f"d{i}") for i in range(2)]
        try:
            for env in envs:
                env.reset()
            assert len(_children(server.proc.pid, "node")) == 2
            assert len(_children(server.proc.pid, "chrom")) == 1
        finally:
            for env in envs:
                env.close()
