"""Concurrent, fault-tolerant mobile crawls through a real Appium server.

Real components throughout: the Appium 3 server (node_modules), appium-
chromium-driver with Debian's chromedriver and Chromium emulating a pixel_8,
the sandbox Flask server, and a RawStore under tmp_path. The faults are real
too: a session deleted on the server, the server's whole process group
killed, a device whose chromedriver does not exist. Each crawl plays short
oracle tasks (3 steps: tap, tap, done) of the web apps on the phone.
"""

from __future__ import annotations

import json
import os
import signal
import urllib.request
from collections import Counter

import psutil
import pytest

from crawlers.appium_server import AppiumServer
from crawlers.capabilities import chromium_device
from crawlers.crawl_driver import ProgressEvent
from crawlers.crawl_profiles import draw_device, profiles_for
from crawlers.device_pool import DevicePool, PoolExhausted
from crawlers.randomise import DEVICE_PROFILES, MOBILE_PROFILES, episode_seed, profile_for_task, randomise
from sandbox.crawl import SandboxCrawl, crawl
from sandbox.episode import fetch_state
from sandbox.tasks import build_catalog
from schemas.records import Task, trajectory_id_for
from tests.crawlers.test_runner import check_store
from trajforge.store.audit import read_audit
from trajforge.store.raw import RawStore

# Three or four steps each (tap, tap, done): a kill after the first action hits a
# live episode, because the second tap needs the session.
TASK_IDS = [
    "settings.dark_mode:en:0",
    "settings.notification:zh:0",
    "notes.delete:en:0",
    "notes.favourite:zh:0",
]
FAST_BACKOFF = (0.2, 1.0)


@pytest.fixture(scope="module")
def tasks():
    catalog = {t.task_id: t for t in build_catalog(per_template=1, languages=("en", "zh"), seed=0)}
    return [catalog[i] for i in TASK_IDS]


# -- device profiles: which phone an episode runs on (no server needed) -------------------
def mobile_task(i: int, lang: str = "en") -> Task:
    return Task(
        task_id=f"delivery.order:{lang}:{i}",
        instruction="Order lunch",
        language=lang,
        app="delivery",
        params={"seed": i},
    )


def test_mobile_tasks_draw_the_phone_their_partition_gives_them_pool_or_not():
    phones = set()
    for i in range(40):
        task = mobile_task(i, ("en", "zh")[i % 2])
        device, theme, font = draw_device(7, task, MOBILE_PROFILES, mobile=True)
        assert device.name == profile_for_task(7, task.task_id, MOBILE_PROFILES)
        assert device.locale == {"en": "en-US", "zh": "zh-CN"}[task.language]
        assert (device.theme, device.font_scale) == (theme, font)
        # A pool of that phone (what the mobile partition passes) gives the same episode.
        alone = {device.name: MOBILE_PROFILES[device.name]}
        assert draw_device(7, task, alone, mobile=True) == (device, theme, font)
        phones.add(device.name)
    assert phones == set(MOBILE_PROFILES)
    web = build_catalog(per_template=1, languages=("en",), seed=0)[0]
    assert draw_device(0, web, DEVICE_PROFILES, mobile=False) == randomise(
        episode_seed(0, web.task_id), "en"
    )  # web crawls draw as before


def test_device_names_narrow_each_family_and_bad_choices_fail_before_any_work(tmp_path):
    web = build_catalog(per_template=1, languages=("en",), seed=0)[0]
    assert profiles_for(mobile_task(1), None, mobile=True) == MOBILE_PROFILES
    assert list(profiles_for(mobile_task(1), ["desktop", "iphone_15"], mobile=True)) == ["iphone_15"]
    assert list(profiles_for(web, ["desktop", "iphone_15"], mobile=False)) == ["desktop"]
    store = RawStore(tmp_path / "raw")
    how = dict(server_url="http://127.0.0.1:9", policy="random_walk")
    where = dict(store=store, collection="c")
    with pytest.raises(
        ValueError,
        match=r"delivery.order:en:1: devices=\['desktop'\] names "
        r"no mobile profile",
    ):
        crawl([mobile_task(1)], SandboxCrawl(devices=["desktop"], **how), **where)
    with DevicePool(
        [chromium_device("pixel_8")],
        server_url="http://127.0.0.1:9",
        env_factory=lambda *a: pytest.fail("no session may open"),
    ) as pool:
        with pytest.raises(ValueError, match=r"leaves out the pool's profile\(s\) \['pixel_8'\]"):
            crawl([mobile_task(1)], SandboxCrawl(devices=["iphone_15"], **how), pool=pool, **where)
        with pytest.raises(ValueError, match="env= or pool="):
            crawl([mobile_task(1)], SandboxCrawl(**how), pool=pool, env=object(), **where)
        assert pool.stats()["leases"] == 0
    assert not list((store.root / "c").glob("part-*"))


# -- real Appium ------------------------------------------------------------------------
def crawl_on(pool, tasks, store, sandbox, collection, **kw):
    how = SandboxCrawl(
        server_url=sandbox.url, policy="oracle", seed=0, distraction_rate=0.0, retries=2, batch_size=1
    )
    return crawl(tasks, how, store=store, collection=collection, pool=pool, **kw)


class KillOnce:
    """A progress callback that runs `kill(event)` once, after the first tap of the
    first task (mid-trajectory), and notes the Appium session of every step."""

    def __init__(self, pool: DevicePool, kill):
        self.pool, self.kill = pool, kill
        self.killed: ProgressEvent | None = None
        self.sessions: dict[str, set[str]] = {}  # task id -> session ids its steps ran on
        self.events: list[ProgressEvent] = []

    def __call__(self, event: ProgressEvent) -> None:
        self.events.append(event)
        if event.kind != "step":
            return
        env = self.pool.env_of(event.slot)
        self.sessions.setdefault(event.task_id, set()).add(env.session_id)
        if self.killed is None and event.step_index == 0:
            self.killed = event
            self.kill(env)


def check_whole(store: RawStore, collection: str, tasks) -> list:
    """Every task stored once, whole, verified; no gaps in step indexes."""
    trajs, steps = check_store(store, collection)  # no duplicates, no gaps, counts match
    assert sorted(t.task.task_id for t in trajs) == sorted(t.task_id for t in tasks)
    for t in trajs:
        assert (t.outcome, t.verified_by, t.error) == ("success", "state", None), (t.task.task_id, t.error)
        assert t.platform == "mobile_web" and t.device.name == "pixel_8"
        mine = sorted(s.index for s in steps if s.trajectory_id == t.trajectory_id)
        assert mine == list(range(t.num_steps)) and t.num_steps >= 3
    return trajs


def assert_rerun_writes_nothing(pool, tasks, store, sandbox, collection):
    leases = pool.stats()["leases"]
    again = crawl_on(pool, tasks, store, sandbox, collection)
    assert (again.trajectories, again.skipped, again.steps) == (0, len(tasks), 0)
    assert pool.stats()["leases"] == leases  # no session was even leased
    assert len(list(store.iter_trajectories(collection))) == len(tasks)


@pytest.mark.slow
def test_two_sessions_crawl_concurrently_on_the_leased_phone(appium_server, sandbox_server, tasks, tmp_path):
    store = RawStore(tmp_path / "raw")
    events: list[ProgressEvent] = []
    busy_at_steps: list[int] = []
    with DevicePool(
        [chromium_device("pixel_8")], server=appium_server, sessions_per_device=2, backoff_s=FAST_BACKOFF
    ) as pool:
        assert pool.size == 2

        def progress(event: ProgressEvent) -> None:
            events.append(event)
            if event.kind == "step":
                busy_at_steps.append(sum(s["busy"] for s in pool.slots()))

        stats = crawl_on(pool, tasks[:2], store, sandbox_server, "mobile/two", progress=progress)
        pool_stats = pool.stats()
    trajs = check_whole(store, "mobile/two", tasks[:2])
    print(f"\n2 sessions: {stats.steps} steps in {stats.seconds:.1f}s; pool {pool_stats}")
    assert (stats.trajectories, stats.success, stats.retries, stats.reconnects) == (2, 2, 0, 0)
    # Both sessions were used, one episode each, and both were leased at once.
    assert (pool_stats["slots_used"], pool_stats["sessions_opened"]) == (2, 2)
    slots_of = {}
    for e in events:
        if e.kind == "step":
            slots_of.setdefault(e.task_id, set()).add(e.slot)
    assert sorted(map(sorted, slots_of.values())) == [["pixel_8#0"], ["pixel_8#1"]]
    assert max(busy_at_steps) == 2
    # The profile is the leased phone's; theme and font scale come from the seed.
    for t in trajs:
        device, theme, font = randomise(
            episode_seed(0, t.task.task_id), t.task.language, profiles={"pixel_8": MOBILE_PROFILES["pixel_8"]}
        )
        assert t.device == device.model_copy(update={"locale": t.device.locale})
        assert (t.device.viewport_width, t.device.viewport_height, t.device.pixel_ratio) == (412, 915, 2.625)
        state = fetch_state(sandbox_server.url, t.trajectory_id)
        assert (state["theme"], state["font_scale"]) == (theme, font)
    shots = {(s.width, s.height) for s in store.iter_steps("mobile/two")}
    assert shots == {(1082, 2402)}  # device pixels of a pixel_8


@pytest.mark.slow
def test_a_session_deleted_mid_trajectory_is_reconnected_and_the_task_replayed(
    appium_server, sandbox_server, tasks, tmp_path
):
    store = RawStore(tmp_path / "raw")
    with DevicePool([chromium_device("pixel_8")], server=appium_server, backoff_s=FAST_BACKOFF) as pool:

        def delete_session(env):
            req = urllib.request.Request(f"{appium_server.url}/session/{env.session_id}", method="DELETE")
            urllib.request.urlopen(req, timeout=10).read()

        killer = KillOnce(pool, delete_session)
        stats = crawl_on(pool, tasks[:2], store, sandbox_server, "mobile/deleted", progress=killer)
        assert killer.killed is not None
        check_whole(store, "mobile/deleted", tasks[:2])
        assert (stats.trajectories, stats.success, stats.retries, stats.reconnects) == (2, 2, 1, 1)
        pool_stats = pool.stats()
        assert (
            pool_stats["sessions_lost"],
            pool_stats["sessions_opened"],
            pool_stats["server_restarts"],
            pool_stats["quarantined"],
        ) == (1, 2, 0, [])
        # The killed task ran on two sessions: its first attempt's steps were dropped
        # and the retry recorded it from scratch.
        killed = killer.killed.task_id
        assert len(killer.sessions[killed]) == 2
        assert [e.kind for e in killer.events if e.task_id == killed].count("retry") == 1
        audit = read_audit(store.root / "audit" / "mobile" / "deleted.jsonl")
        tid = trajectory_id_for("sandbox", killed, "oracle", 0)
        attempts = Counter(r["attempt"] for r in audit if r["trajectory_id"] == tid)
        assert attempts == {0: 2, 1: 3}  # tap + the tap that hit the dead session; then all
        assert_rerun_writes_nothing(pool, tasks[:2], store, sandbox_server, "mobile/deleted")


@pytest.mark.slow
def test_a_killed_appium_server_is_restarted_and_the_crawl_completes(sandbox_server, tasks, tmp_path):
    store = RawStore(tmp_path / "raw")
    killed_groups: list[int] = []
    with AppiumServer(log_path=tmp_path / "appium.log") as server:
        url = server.url
        # max_failures=1: an outage of the server must not be blamed on the phone.
        with DevicePool(
            [chromium_device("pixel_8")], server=server, max_failures=1, backoff_s=FAST_BACKOFF
        ) as pool:

            def kill_server(env):
                killed_groups.append(server.pid)
                os.killpg(server.pid, signal.SIGKILL)  # node, chromedriver, Chromium

            killer = KillOnce(pool, kill_server)
            stats = crawl_on(pool, tasks[2:], store, sandbox_server, "mobile/server", progress=killer)
            assert killer.killed is not None and len(killed_groups) == 1
            assert server.is_healthy() and server.url == url  # back on the same port
            check_whole(store, "mobile/server", tasks[2:])
            assert (stats.trajectories, stats.success, stats.retries, stats.server_restarts) == (2, 2, 1, 1)
            pool_stats = pool.stats()
            assert (
                pool_stats["server_restarts"],
                pool_stats["sessions_lost"],
                pool_stats["quarantined"],
            ) == (1, 1, [])
            assert len(killer.sessions[killer.killed.task_id]) == 2
            assert_rerun_writes_nothing(pool, tasks[2:], store, sandbox_server, "mobile/server")
    # Nothing of the killed server's process group is left running.
    left = [
        p
        for p in psutil.process_iter(["pid", "status"])
        if _pgid(p.pid) == killed_groups[0] and p.info["status"] != psutil.STATUS_ZOMBIE
    ]
    assert left == []


@pytest.mark.slow
def test_a_device_that_cannot_start_is_quarantined_and_the_rest_finish(
    appium_server, sandbox_server, tasks, tmp_path
):
    store = RawStore(tmp_path / "raw")
    report = tmp_path / "reports" / "quarantine.jsonl"
    broken = chromium_device(
        "pixel_8", name="broken_phone", capabilities={"appium:executable": "/nonexistent/chromedriver"}
    )
    with DevicePool(
        [broken, chromium_device("pixel_8")],
        server=appium_server,
        max_failures=2,
        backoff_s=(0.05, 0.1),
        report_path=report,
    ) as pool:
        assert pool.size == 2
        stats = crawl_on(pool, tasks[:2], store, sandbox_server, "mobile/quarantine")
        pool_stats = pool.stats()
        assert pool.quarantined == ["broken_phone"]
    check_whole(store, "mobile/quarantine", tasks[:2])
    assert (stats.trajectories, stats.success, stats.error, stats.retries) == (2, 2, 0, 0)
    assert pool_stats["session_start_failures"] == 2 and pool_stats["quarantined"] == ["broken_phone"]
    (record,) = [json.loads(line) for line in report.read_text().splitlines()]
    assert (record["device"], record["consecutive_failures"]) == ("broken_phone", 2)
    assert "/nonexistent/chromedriver" in record["last_error"]
    assert record["server_url"] == appium_server.url


@pytest.mark.slow
def test_a_crawl_stops_with_a_clear_error_when_every_device_is_quarantined(
    appium_server, sandbox_server, tasks, tmp_path
):
    store = RawStore(tmp_path / "raw")
    broken = chromium_device(
        "pixel_8", name="broken_phone", capabilities={"appium:executable": "/nonexistent/chromedriver"}
    )
    with DevicePool(
        [broken],
        server=appium_server,
        max_failures=2,
        backoff_s=(0.05, 0.1),
        report_path=tmp_path / "q.jsonl",
    ) as pool:
        with pytest.raises(PoolExhausted, match="broken_phone .*nonexistent/chromedriver"):
            crawl_on(pool, tasks[:2], store, sandbox_server, "mobile/none")
    assert list(store.iter_trajectories("mobile/none")) == []  # nothing half-done stored


@pytest.mark.slow
def test_a_single_mobile_env_crawls_the_phone_its_task_draws(mobile_env, sandbox_server, tasks, tmp_path):
    # No pool: a web-app task in a mobile env is a mobile task; `devices` narrows the
    # phones to the env's own (a web name in the list is ignored for it).
    store = RawStore(tmp_path / "raw")
    stats = crawl(
        tasks[:1],
        SandboxCrawl(
            server_url=sandbox_server.url, seed=0, distraction_rate=0.0, devices=["pixel_8", "desktop"]
        ),
        store=store,
        collection="mobile/single",
        env=mobile_env,
    )
    assert (stats.trajectories, stats.success) == (1, 1)
    (traj,) = store.iter_trajectories("mobile/single")
    assert (traj.platform, traj.device.name) == ("mobile_web", "pixel_8")
    pixel = {"pixel_8": MOBILE_PROFILES["pixel_8"]}
    assert traj.device == draw_device(0, tasks[0], pixel, mobile=True)[0]
    assert {(s.width, s.height) for s in store.iter_steps("mobile/single")} == {(1082, 2402)}


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None
