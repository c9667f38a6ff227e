"""A real multi-node Ray cluster on loopback for the Ray-pool tests, one per session.

A head with no `browser` resource (nothing can place a browser there), two
worker nodes with `browser: 2` each and a third, the "phone host", with
`device:pixel_8: 1` and no browser (an Appium session's actor can run only
there; `ray_cluster.device_node`), every node its own raylet and object store
(100 MB each), started by ray.cluster_utils.Cluster and shut down at the end.
One Appium server (node_modules/.bin/appium with appium-chromium-driver, on
loopback) serves the whole session: `appium_server`.
The node-kill test (last in test_ray_pool.py, the one file of Ray tests, so that
one xdist worker runs them all on this one cluster) removes a browser worker: it
runs after every other test.
The Ray workers find the project through PYTHONPATH, which the nodes inherit.
Node failure is detected in about 3 s (1 s health checks, 3 misses) instead of
Ray's default of about 30 s, so the kill test's recovery is seen in the test's time.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

ROOT = str(Path(__file__).resolve().parents[2])
NODE = dict(num_cpus=1, object_store_memory=100 * 2**20)
DEVICE_RESOURCE = "device:pixel_8"


class RayTestCluster:
    def __init__(self):
        from ray.cluster_utils import Cluster

        os.environ["PYTHONPATH"] = os.pathsep.join([ROOT, *filter(None, [os.environ.get("PYTHONPATH")])])
        self.cluster = Cluster(
            initialize_head=True,
            head_node_args=dict(
                **NODE,
                include_dashboard=False,
                _system_config={
                    "health_check_initial_delay_ms": 1000,
                    "health_check_period_ms": 1000,
                    "health_check_failure_threshold": 3,
                },
            ),
        )
        self.workers = [self.add_worker() for _ in range(2)]
        self.device_node = self.cluster.add_node(**NODE, resources={DEVICE_RESOURCE: 1})
        ray.init(address=self.cluster.address, log_to_driver=False)
        self.cluster.wait_for_nodes()

    def add_worker(self, browsers: int = 2):
        return self.cluster.add_node(**NODE, resources={"browser": browsers})

    def node_of(self, node_id: str):
        """The worker node (cluster_utils Node) whose Ray node id is `node_id`."""
        return next(w for w in self.workers if w.node_id == node_id)

    def kill(self, node) -> None:
        """SIGKILL the node's raylet and object store (no graceful drain)."""
        self.cluster.remove_node(node, allow_graceful=False)
        self.workers.remove(node)

    def shutdown(self) -> None:
        ray.shutdown()
        self.cluster.shutdown()


@pytest.fixture(scope="session")
def ray_cluster():
    c = RayTestCluster()
    try:
        yield c
    finally:
        c.shutdown()


@pytest.fixture(scope="session")
def appium_server():
    from crawlers.appium_server import AppiumServer

    with AppiumServer() as server:
        yield server
