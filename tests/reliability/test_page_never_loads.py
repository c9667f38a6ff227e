"""Fault: pages that never finish loading, in a real crawl on real Chromium.

A sandbox-free server (conftest.hanging_site) holds requests open forever:
the start document, an image (so `load` never fires), and the target of the
only link. The crawl must end each episode with a recorded error or a
normal step, never hang, and go on to the next task; the store is left whole.
One more page holds half an emoji (a lone surrogate) in its text.
The env-level version (one WebEnv, no crawl) is
tests/crawlers/test_web_env.py::test_page_that_never_loads_does_not_hang.
"""

from __future__ import annotations

import pytest

from sandbox.crawl import SandboxCrawl, crawl
from schemas.records import Task, trajectory_id_for
from trajforge.store.raw import RawStore

from .conftest import BEHAVIOURS, check_store_whole

STEP_TIMEOUT_S = 4.0  # generous: the suite runs beside other work on 2 cores


@pytest.mark.slow
@pytest.mark.timeout(300)  # a hang fails here instead of stalling the suite
def test_a_page_that_never_loads_ends_its_episode_and_the_crawl_goes_on(hanging_site, tmp_path):
    # The never-loading start page comes first: the other tasks must still run.
    tasks = [
        Task(task_id=f"{app}:en:0", instruction=f"Visit the {app} page", language="en", app=app)
        for app in BEHAVIOURS
    ]
    store = RawStore(tmp_path / "raw")
    events = []
    stats = crawl(
        tasks,
        SandboxCrawl(
            server_url=hanging_site.url,
            policy="random_walk",
            max_steps=3,
            retries=1,
            batch_size=1,
            step_timeout_s=STEP_TIMEOUT_S,
            distraction_rate=0.0,
        ),
        store=store,
        collection="web/hang",
        progress=lambda ev: events.append((ev.kind, ev.task_id, ev.message)),
    )
    trajs, steps = check_store_whole(store, "web/hang")
    by_app = {t.app: t for t in trajs}
    assert sorted(by_app) == sorted(BEHAVIOURS) and stats.trajectories == len(BEHAVIOURS)

    # 1. The start document never arrives: retried once, then stored as an error
    #    that says why, with no steps recorded on a blank page.
    doc = by_app["hang_document"]
    assert doc.outcome == "error" and doc.num_steps == 0
    assert "did not reach domcontentloaded" in doc.error and hanging_site.url in doc.error
    assert [k for k, t, _ in events if t == "hang_document:en:0"] == ["retry", "trajectory"]
    assert hanging_site.hits["/start:hang_document"] == 2

    # 2. An image that never arrives delays `load`, not the episode: the walk is recorded.
    img = by_app["hang_image"]
    assert img.outcome == "unknown" and img.num_steps == 3 and img.error is None
    assert all(s.error is None for s in steps if s.trajectory_id == img.trajectory_id)

    # 3. A link to a page that never arrives: the step records the timeout and
    #    the walk goes on from the page it was on.
    link = sorted(
        (s for s in steps if s.trajectory_id == by_app["hang_link"].trajectory_id), key=lambda s: s.index
    )
    assert len(link) == 3 and link[-1].action.type.value == "done"
    timed_out = [s for s in link if s.error and "/never" in s.error]
    assert timed_out and hanging_site.hits["/never"] >= 1 + len(timed_out)  # + the image
    assert all(s.url.startswith(hanging_site.url + "/start") for s in link)

    # 4. Half an emoji in the page's text (the snapshot escapes it, the element's
    #    name holds it) is stored as U+FFFD, not fatal to the batch.
    emoji = [s for s in steps if s.trajectory_id == by_app["half_emoji"].trajectory_id]
    assert len(emoji) == 3
    assert all(any(e.name == "Pay \ufffd now" for e in s.elements) for s in emoji)

    # A re-run finds every task committed: nothing is played or written twice.
    again = crawl(
        tasks,
        SandboxCrawl(
            server_url=hanging_site.url,
            policy="random_walk",
            max_steps=3,
            retries=1,
            step_timeout_s=STEP_TIMEOUT_S,
        ),
        store=store,
        collection="web/hang",
    )
    assert (again.trajectories, again.skipped) == (0, len(tasks))
    assert {t.trajectory_id for t in check_store_whole(store, "web/hang")[0]} == {
        trajectory_id_for("sandbox", t.task_id, "random_walk", 0) for t in tasks
    }
