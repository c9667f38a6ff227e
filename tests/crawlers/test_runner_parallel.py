"""The web crawl on several browsers at once (WebEnvPool), on real Chromium and the real sandbox.

One crawl of three tasks on 1 browser; the same on 2 browsers, first
interrupted (its browser SIGKILLed mid-episode), then resumed on the same
pool: the same trajectories (ids, outcomes, step counts, devices, actions),
the killed task retried on a restarted browser, each trajectory stored once,
and a re-run that skips them all.
"""

from __future__ import annotations

import os
import signal
import threading
from collections import Counter

import pytest

from crawlers.allowlist import Allowlist
from crawlers.crawl_browser_pool import WebEnvPool
from crawlers.crawl_driver import ProgressEvent
from crawlers.device_pool import PoolError
from sandbox.crawl import SandboxCrawl, crawl
from sandbox.server import SandboxServer
from sandbox.tasks import TEMPLATES
from sandbox.tasks.base import When
from schemas.records import trajectory_id_for
from tests.crawlers.test_runner import check_store, pick_tasks
from trajforge.store.audit import read_audit
from trajforge.store.raw import RawStore


@pytest.fixture(scope="module")
def sandbox():
    with SandboxServer() as server:
        yield server


def _long_tasks() -> list:
    """Two EN tasks and one ZH whose plans have 3+ steps (a kill after the first action
    hits a live episode)."""
    tasks = [
        t
        for t in pick_tasks(4, offset=1)
        if sum(not isinstance(p, When) for p in TEMPLATES[t.template_id].plan(t.params, t.language)) >= 3
    ]
    en = [t for t in tasks if t.language == "en"]
    zh = [t for t in tasks if t.language == "zh"]
    return en[:2] + zh[:1]


def _summary(store: RawStore, collection: str) -> dict:
    trajs, steps = check_store(store, collection)
    actions: dict[str, list] = {}
    for s in sorted(steps, key=lambda s: (s.trajectory_id, s.index)):
        actions.setdefault(s.trajectory_id, []).append(s.action)
    return {
        t.trajectory_id: (t.outcome, t.verified_by, t.num_steps, t.device, actions.get(t.trajectory_id, []))
        for t in trajs
    }


@pytest.mark.slow
def test_two_browsers_record_what_one_records_through_a_crash_and_resume(sandbox, tmp_path):
    tasks = _long_tasks()
    assert len(tasks) == 3
    store = RawStore(tmp_path / "raw")
    how = SandboxCrawl(server_url=sandbox.url, policy="oracle", seed=0, distraction_rate=0.5, batch_size=1)
    allow = Allowlist([sandbox.url])

    with WebEnvPool(1, request_filter=allow, step_timeout_s=10.0) as one:
        solo = crawl(tasks, how, store=store, collection="web/one", pool=one)
    assert one.stats()["launches"] == 1

    kills: list[tuple[str, int]] = []
    slots: set[str] = set()
    threads: set[str] = set()
    lock = threading.Lock()
    with WebEnvPool(2, request_filter=allow, step_timeout_s=10.0) as two:

        def killer(event: ProgressEvent) -> None:
            # Called on the worker thread that plays the episode.
            if event.kind != "step":
                return
            with lock:
                slots.add(event.slot)
                threads.add(threading.current_thread().name)
                if kills or event.action in ("done", "answer"):
                    return
                pid = two.env_of(event.slot).browser_pid
                kills.append((event.task_id, pid))
            os.kill(pid, signal.SIGKILL)

        two.launch_all()  # both browsers up before the first task is dealt
        assert two.stats()["launches"] == 2
        # An interrupted crawl (its one task's browser killed), then the whole list on
        # the same pool and threads, as the asset crawls app after app.
        part = crawl(tasks[:1], how, store=store, collection="web/two", pool=two, progress=killer)
        rest = crawl(tasks, how, store=store, collection="web/two", pool=two, progress=killer)
        pool_stats = two.stats()
        # Resume on the same pool: everything is committed, no episode runs.
        again = crawl(tasks, how, store=store, collection="web/two", pool=two)
    assert (again.trajectories, again.skipped, again.steps) == (0, 3, 0)

    # Both browsers played, each on its own thread; the killed one was restarted once.
    assert slots == {"browser#0", "browser#1"} and len(threads) == 2
    assert len(kills) == 1 and kills[0][0] == tasks[0].task_id
    assert (part.trajectories, part.retries, part.reconnects) == (1, 1, 1)
    assert (rest.trajectories, rest.skipped, rest.retries, rest.reconnects) == (2, 1, 0, 0)
    assert (
        pool_stats["launches"],
        pool_stats["reconnects"],
        pool_stats["browsers_lost"],
        pool_stats["slots_used"],
    ) == (2, 1, 1, 2)

    # The same trajectories whatever the number of browsers.
    one_rec, two_rec = _summary(store, "web/one"), _summary(store, "web/two")
    expected = {trajectory_id_for("sandbox", t.task_id, "oracle", 0) for t in tasks}
    assert set(one_rec) == set(two_rec) == expected
    assert one_rec == two_rec
    assert all(r[:2] == ("success", "state") for r in one_rec.values()), one_rec
    assert (solo.trajectories, solo.success, solo.error) == (3, 3, 0)
    assert (part.success + rest.success, part.error + rest.error) == (3, 0)
    assert solo.steps == part.steps + rest.steps == sum(r[2] for r in one_rec.values())

    # The killed task: an interrupted attempt 0, then a whole attempt 1, in the audit.
    killed_tid = trajectory_id_for("sandbox", kills[0][0], "oracle", 0)
    audit = read_audit(store.root / "audit" / "web" / "two.jsonl")
    attempts = Counter(r["attempt"] for r in audit if r["trajectory_id"] == killed_tid)
    assert set(attempts) == {0, 1} and attempts[1] == one_rec[killed_tid][2], attempts


class _NoBrowser(Exception):
    pass


def _no_browser():
    raise _NoBrowser("chromium: not found")


def test_a_browser_that_will_not_launch_stops_the_crawl_with_nothing_written(tmp_path):
    tasks = pick_tasks(1)
    store = RawStore(tmp_path / "raw")
    with WebEnvPool(2, factory=_no_browser) as pool:
        with pytest.raises(PoolError, match="did not launch"):
            pool.launch_all()
        with pytest.raises(PoolError, match="did not launch: chromium: not found"):
            crawl(
                tasks,
                SandboxCrawl(server_url="http://127.0.0.1:9"),
                store=store,
                collection="web/x",
                pool=pool,
            )
        # A lease outside the pool's threads would drive a browser from the wrong thread.
        with pytest.raises(PoolError, match="pool's own threads"):
            with pool.lease():
                pass
    assert list(store.iter_trajectories("web/x")) == []
    with pytest.raises(ValueError, match="size=0"):
        WebEnvPool(0)
