"""Appium sessions as Ray actors: a RayEnvPool of `device:pixel_8` actors on the cluster's
phone host (tests/ray/conftest.py), each holding one real Appium session (appium-chromium-
driver: Chromium emulating a pixel_8, not a phone) through the session's Appium server on
loopback, crawling mobile tasks of the real sandbox with the oracle.

Runs before test_ray_pool.py (file order): every node is still up.
"""
from __future__ import annotations

import pytest

from crawlers.capabilities import chromium_device
from crawlers.ray_pool import AppiumSessionFactory, RayEnvPool
from sandbox.crawl import crawl
from sandbox.server import SandboxServer
from sandbox.tasks import build_catalog
from tests.crawlers.test_runner import check_store
from tests.ray.conftest import DEVICE_RESOURCE
from trajforge.store import RawStore

pytestmark = pytest.mark.slow

# Three or four steps each on the phone (as tests/mobile/test_mobile_crawl.py plays them).
TASK_IDS = ["settings.dark_mode:en:0", "notes.favourite:zh:0"]


def test_appium_sessions_as_ray_actors_crawl_mobile_tasks_on_the_device_node(
        ray_cluster, appium_server, tmp_path):
    catalog = {t.task_id: t for t in build_catalog(per_template=1, languages=("en", "zh"), seed=0)}
    tasks = [catalog[i] for i in TASK_IDS]
    store = RawStore(tmp_path / "raw")
    with SandboxServer() as sandbox, \
            RayEnvPool(1, devices=[chromium_device("pixel_8")],
                       factory=AppiumSessionFactory(appium_server.url)) as pool:
        assert pool.resource == DEVICE_RESOURCE and pool.profiles == ["pixel_8"]
        stats = crawl(tasks, store=store, collection="mobile/ray", server_url=sandbox.url,
                      policy="oracle", seed=0, distraction_rate=0.0, retries=1, pool=pool)
        figures = pool.stats()
        nodes = pool.slot_nodes()
        # The env in the actor is an Appium session (its W3C session id), on the phone host.
        with pool.lease() as env:
            assert env.session_id and env.platform == "mobile_web" and env.kind == "chromium"
    # The actor was placed by its `device:pixel_8` resource: on the phone host only.
    assert set(nodes.values()) == {ray_cluster.device_node.node_id}
    assert figures["nodes_used"] == 1 and figures["leases"] >= len(tasks)
    assert figures["actors_lost"] == 0 and figures["env_calls"] > stats.steps
    trajs, steps = check_store(store, "mobile/ray")  # whole, no duplicates
    assert stats.trajectories == len(tasks) and stats.error == 0
    assert sorted(t.task.task_id for t in trajs) == sorted(TASK_IDS)
    for t in trajs:
        assert (t.outcome, t.verified_by, t.platform) == ("success", "state", "mobile_web")
        assert t.device.name == "pixel_8"
        assert (t.device.viewport_width, t.device.viewport_height, t.device.pixel_ratio) == \
            (412, 915, 2.625)
        assert t.num_steps >= 3
    assert {(s.width, s.height) for s in steps} == {(1082, 2402)}  # a pixel_8's device pixels
