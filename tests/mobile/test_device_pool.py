"""DevicePool: slots, leases, reconnects with backoff, server restarts, quarantine.

The pool's bookkeeping is tested here with stand-in sessions (an env factory
and a server whose health the test sets), so every branch is fast and exact.
What a real Appium server does under the same faults (a deleted session, a
killed server, a device that never starts) is in test_mobile_crawl.py.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time

import pytest

from crawlers.capabilities import DeviceSpec, chromium_device
from crawlers.device_pool import DevicePool, PoolClosed, PoolError, PoolExhausted, backoff_delay
from crawlers.randomise import MOBILE_PROFILES
from crawlers.web_env import BrowserCrashed


class FakeEnv:
    """Stands in for a MobileEnv: alive until the test says otherwise."""

    def __init__(self, url: str, spec: DeviceSpec, port: int):
        self.url, self.spec, self.port = url, spec, port
        self.alive = True
        self.closed = False

    def is_alive(self) -> bool:
        return self.alive and not self.closed

    def close(self) -> None:
        self.closed = True


class Factory:
    """Opens FakeEnvs; devices named in `broken` fail to start with a clear message."""

    def __init__(self, broken: set[str] = frozenset()):
        self.broken = set(broken)
        self.opened: list[FakeEnv] = []
        self.calls: list[tuple[str, float]] = []  # (device, monotonic time)
        self.lock = threading.Lock()

    def __call__(self, url: str, spec: DeviceSpec, port: int) -> FakeEnv:
        with self.lock:
            self.calls.append((spec.name, time.monotonic()))
        if spec.name in self.broken:
            raise RuntimeError(f"could not start a session on {spec.name}: no chromedriver")
        env = FakeEnv(url, spec, port)
        with self.lock:
            self.opened.append(env)
        return env


class FakeServer:
    """An owned Appium server whose health the test controls."""

    def __init__(self):
        self.up = True
        self.restarts = 0
        self.url = "http://127.0.0.1:4723"

    def is_healthy(self) -> bool:
        return self.up

    def restart(self) -> FakeServer:
        self.restarts += 1
        self.up = True
        return self


def lose(held_lease) -> None:
    """End a lease entered by hand as a lost session would."""
    err = BrowserCrashed("connection refused")
    # The pool re-raises the error: a context manager's __exit__ then returns False.
    assert held_lease.__exit__(BrowserCrashed, err, None) is False


def phone(name: str, profile: str = "pixel_8") -> DeviceSpec:
    return chromium_device(profile, name=name)


def test_backoff_doubles_from_the_first_delay_up_to_the_cap():
    assert [backoff_delay(n, (1.0, 30.0)) for n in range(7)] == [0, 1, 2, 4, 8, 16, 30]
    assert [backoff_delay(n, (0.05, 0.1)) for n in range(4)] == [0, 0.05, 0.1, 0.1]


def test_slots_get_their_own_chromedriver_ports_and_sessions_are_reused():
    factory = Factory()
    android = DeviceSpec(
        name="lab-pixel",
        kind="android",
        profile=MOBILE_PROFILES["pixel_8"],
        capabilities={"appium:udid": "emulator-5554"},
    )
    with DevicePool(
        [phone("a"), phone("b", "iphone_15"), android],
        server_url="http://x:1",
        sessions_per_device=2,
        env_factory=factory,
    ) as pool:
        # Emulated phones take 2 sessions each; the real phone runs one at a time.
        assert pool.size == 5
        assert [s["slot"] for s in pool.slots()] == ["a#0", "a#1", "b#0", "b#1", "lab-pixel#0"]
        ports = [s["chromedriver_port"] for s in pool.slots()]
        assert len(set(ports)) == 5 and all(1024 < p < 65536 for p in ports)
        assert pool.profiles == ["iphone_15", "pixel_8"]
        # Five leases held at once: one session per slot, each on its slot's port.
        leases = [pool.lease() for _ in range(5)]
        envs = [cm.__enter__() for cm in leases]
        assert sorted(e.port for e in envs) == sorted(ports)
        assert {e.url for e in envs} == {"http://x:1"}
        assert {pool.slot_name(e) for e in envs} == {s["slot"] for s in pool.slots()}
        for cm in leases:
            cm.__exit__(None, None, None)
        # Sequential leases reuse a connected session instead of opening another.
        for _ in range(3):
            with pool.lease() as env:
                assert env in envs and not env.closed
        stats = pool.stats()
        assert (stats["sessions_opened"], stats["leases"], stats["slots_used"]) == (5, 8, 5)
        assert (stats["reconnects"], stats["sessions_lost"], stats["quarantined"]) == (0, 0, [])
    assert all(e.closed for e in envs)  # close() ends every session


def test_a_lease_waits_for_a_free_slot_and_can_time_out():
    with DevicePool([phone("a")], server_url="http://x:1", env_factory=Factory()) as pool:
        holding, released = threading.Event(), threading.Event()
        got: list[FakeEnv] = []

        def holder():
            with pool.lease() as env:
                got.append(env)
                holding.set()
                released.wait(5)

        t = threading.Thread(target=holder)
        t.start()
        assert holding.wait(5)
        t0 = time.monotonic()
        with pytest.raises(TimeoutError, match="no free device session"):
            with pool.lease(timeout_s=0.2):
                pass
        assert 0.15 < time.monotonic() - t0 < 2.0

        def release_soon():
            time.sleep(0.2)
            released.set()

        threading.Thread(target=release_soon).start()
        t0 = time.monotonic()
        with pool.lease(timeout_s=5) as env:  # blocks until the holder is done
            assert env is got[0]
            assert time.monotonic() - t0 >= 0.15
        t.join()


def test_a_lost_session_is_dropped_and_reconnected_after_a_backoff():
    factory = Factory()
    with DevicePool(
        [phone("a")], server_url="http://x:1", env_factory=factory, backoff_s=(0.3, 1.0), max_failures=3
    ) as pool:
        with pytest.raises(BrowserCrashed):
            with pool.lease() as first:
                raise BrowserCrashed("invalid session id")
        assert first.closed
        with pool.lease() as second:
            assert second is not first
        (_, t_open1), (_, t_open2) = factory.calls
        assert t_open2 - t_open1 >= 0.3  # the first backoff step
        stats = pool.stats()
        assert (stats["sessions_opened"], stats["sessions_lost"], stats["reconnects"]) == (2, 1, 1)
        # A clean lease reset the device's count: the next loss waits the first step again.
        with pytest.raises(BrowserCrashed):
            with pool.lease():
                raise BrowserCrashed("gone")
        t0 = time.monotonic()
        with pool.lease():
            pass
        assert 0.25 < time.monotonic() - t0 < 0.9
        # A session that died while idle is noticed at the next lease and replaced.
        with pool.lease() as env:
            pass
        env.alive = False
        with pool.lease() as fresh:
            assert fresh is not env and env.closed
        assert pool.stats()["reconnects"] == 3 and pool.quarantined == []


def test_an_error_that_is_not_a_lost_session_keeps_a_live_session():
    with DevicePool([phone("a")], server_url="http://x:1", env_factory=Factory()) as pool:
        with pytest.raises(ValueError):
            with pool.lease() as env:
                raise ValueError("an app bug")
        with pool.lease() as again:
            assert again is env
        assert pool.stats()["sessions_lost"] == 0


def test_a_device_that_never_starts_is_quarantined_and_reported(tmp_path):
    factory = Factory(broken={"bad"})
    report = tmp_path / "reports" / "quarantine.jsonl"
    with DevicePool(
        [phone("bad"), phone("good")],
        server_url="http://x:1",
        env_factory=factory,
        max_failures=2,
        backoff_s=(0.01, 0.02),
        report_path=report,
    ) as pool:
        for _ in range(4):
            with pool.lease() as env:
                assert env.spec.name == "good"
        assert pool.quarantined == ["bad"]
        assert [name for name, _ in factory.calls].count("bad") == 2
        records = [json.loads(line) for line in report.read_text().splitlines()]
        assert len(records) == 1
        rec = records[0]
        assert (rec["device"], rec["kind"], rec["profile"], rec["consecutive_failures"]) == (
            "bad",
            "chromium",
            "pixel_8",
            2,
        )
        assert "could not start a session on bad" in rec["last_error"]
        stats = pool.stats()
        assert stats["quarantined"] == ["bad"] and stats["session_start_failures"] == 2
        assert [s["quarantined"] for s in pool.slots()] == [True, False]


def test_leasing_from_a_pool_with_every_device_quarantined_raises_a_clear_error(tmp_path):
    factory = Factory(broken={"a", "b"})
    report = tmp_path / "q.jsonl"
    with DevicePool(
        [phone("a"), phone("b")],
        server_url="http://x:1",
        env_factory=factory,
        max_failures=1,
        backoff_s=(0, 0),
        report_path=report,
    ) as pool:
        with pytest.raises(PoolExhausted) as err:
            with pool.lease():
                pass
        msg = str(err.value)
        assert "every device of the pool is quarantined" in msg
        assert "a (session start failed: could not start a session on a" in msg
        assert "b (session start failed" in msg and str(report) in msg
        assert len(report.read_text().splitlines()) == 2
        with pytest.raises(PoolExhausted):  # and so does every later lease
            with pool.lease():
                pass


def test_sessions_that_keep_dying_quarantine_their_device():
    factory = Factory()
    with DevicePool(
        [phone("flaky"), phone("steady")],
        server_url="http://x:1",
        sessions_per_device=1,
        env_factory=factory,
        max_failures=2,
        backoff_s=(0, 0),
    ) as pool:
        lost = 0
        while "flaky" not in pool.quarantined:
            with pytest.raises(BrowserCrashed):
                with pool.lease() as env:
                    if env.spec.name == "flaky":
                        lost += 1
                    raise BrowserCrashed("session deleted")
            assert lost <= 2
        # Leases alternate between the devices: flaky reaches 2 consecutive losses
        # first; steady's one loss is below the limit, so it stays in rotation.
        assert lost == 2 and pool.quarantined == ["flaky"]
        with pool.lease() as env:
            assert env.spec.name == "steady"


def test_a_down_server_the_pool_owns_is_restarted_and_not_blamed_on_the_device():
    server = FakeServer()
    factory = Factory()
    with DevicePool(
        [phone("a")],
        server=server,
        sessions_per_device=2,
        env_factory=factory,
        max_failures=1,
        backoff_s=(0, 0),
    ) as pool:
        a = pool.lease()
        b = pool.lease()
        env_a, env_b = a.__enter__(), b.__enter__()
        assert env_a.url == server.url
        server.up = False  # the server died under both sessions
        lose(a)
        assert server.restarts == 1
        # b lost its session to the same outage; it sees the restart already done.
        lose(b)
        assert server.restarts == 1 and pool.quarantined == []  # max_failures=1, yet not blamed
        with pool.lease() as env:
            assert env not in (env_a, env_b)
        stats = pool.stats()
        assert (stats["server_restarts"], stats["sessions_lost"], stats["quarantined"]) == (1, 2, [])


def test_idle_sessions_from_before_a_server_restart_are_reopened():
    server = FakeServer()
    factory = Factory()
    with DevicePool(
        [phone("a")], server=server, sessions_per_device=2, env_factory=factory, backoff_s=(0, 0)
    ) as pool:
        a, b = pool.lease(), pool.lease()
        env_a, env_b = a.__enter__(), b.__enter__()
        b.__exit__(None, None, None)  # b's session sits idle
        server.up = False
        lose(a)
        # b's idle session belongs to the dead server: the next leases open new ones.
        with pool.lease() as x, pool.lease() as y:
            assert {x, y}.isdisjoint({env_a, env_b})
        assert env_b.closed and pool.stats()["sessions_opened"] == 4


def test_a_server_that_is_down_is_restarted_before_a_session_opens():
    server = FakeServer()
    with DevicePool([phone("a")], server=server, env_factory=Factory()) as pool:
        server.up = False
        with pool.lease():
            pass
        assert server.restarts == 1 and pool.stats()["server_restarts"] == 1


def test_a_server_that_will_not_restart_stops_the_pool_with_a_pool_error():
    server = FakeServer()

    def refuse():
        raise RuntimeError("Appium exited with code 1 before it was ready")

    server.restart = refuse
    with DevicePool([phone("a")], server=server, env_factory=Factory()) as pool:
        with pool.lease():
            pass
        server.up = False
        # Found when the session is lost, and again before a session would open.
        with pytest.raises(PoolError, match="could not be restarted: Appium exited with code 1"):
            with pool.lease():
                raise BrowserCrashed("connection refused")
        with pytest.raises(PoolError, match="could not be restarted"):
            with pool.lease(timeout_s=1):
                pass
        assert [s["busy"] for s in pool.slots()] == [False]  # the slot was handed back
        assert pool.quarantined == []


def test_pool_configuration_errors_are_clear():
    with pytest.raises(ValueError, match="no devices"):
        DevicePool([], server_url="http://x:1")
    with pytest.raises(ValueError, match=r"unique; repeated: \['a'\]"):
        DevicePool([phone("a"), phone("a")], server_url="http://x:1")
    with pytest.raises(ValueError, match="sessions_per_device=0"):
        DevicePool([phone("a")], server_url="http://x:1", sessions_per_device=0)
    with pytest.raises(ValueError, match="max_failures=0"):
        DevicePool([phone("a")], server_url="http://x:1", max_failures=0)
    with pytest.raises(ValueError, match="backoff_s"):
        DevicePool([phone("a")], server_url="http://x:1", backoff_s=(5, 1))
    with pytest.raises(ValueError, match="server= or server_url="):
        DevicePool([phone("a")])
    # A farm device names its own server: no pool server needed.
    farm_phone = dataclasses.replace(phone("farm"), server_url="http://farm:4723")
    pool = DevicePool([farm_phone], env_factory=Factory())
    with pool, pool.lease() as env:
        assert env.url == "http://farm:4723"
    with pytest.raises(PoolClosed, match="closed"):
        with pool.lease():
            pass
