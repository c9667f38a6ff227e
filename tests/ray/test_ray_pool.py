"""The crawl and online-RL rollouts on a RayEnvPool over a real 3-node Ray cluster
(tests/ray/conftest.py), on real Chromium and the real sandbox.

First, Appium sessions as Ray actors: a RayEnvPool of `device:pixel_8` actors on
the cluster's phone host, each holding one real Appium session (appium-chromium-
driver: Chromium emulating a pixel_8, not a phone) through the session's Appium
server on loopback. Then the web_trajectories and environment_trajectories assets
materialised with the `browser` resource naming the cluster (2 actors; the pool's
figures in their metadata). Then one
catalog slice crawled on a local WebEnvPool is the reference: the Ray pool
(4 browser actors over 2 worker nodes) records the same trajectories (ids,
outcomes, steps, devices, actions); then an online-RL iteration plays its
rollouts on an actor; then desktop sessions (Xvfb, AT-SPI, mousepad) as actors on a
node that joins with the `desktop` resource, crawled, played through the Gym API and
through `trajforge serve --ray-address`; last (it leaves one worker), a worker node is killed in
the middle of a crawl: its episodes are replayed on the other node, 0 lost,
0 duplicated, every part readable, the replays counted.

The Ray crawl that is compared with the local pool writes into an S3-compatible
server (moto, tests/s3_server.py); the node-kill crawl writes into a local folder.
One file, so one cluster per test run (a session fixture is per xdist worker, and
--dist loadfile keeps a file on one worker).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from crawlers.allowlist import Allowlist
from crawlers.capabilities import chromium_device
from crawlers.crawl_browser_pool import WebEnvPool
from crawlers.crawl_driver import ProgressEvent
from crawlers.ray_pool import AppiumSessionFactory, RayEnvPool
from sandbox.crawl import SandboxCrawl, crawl
from sandbox.server import SandboxServer
from sandbox.tasks import build_catalog
from tests.crawlers.test_runner import check_store, pick_tasks
from tests.ray.conftest import DEVICE_RESOURCE
from trajforge.store.object_store import open_raw_store
from trajforge.store.raw import RawStore

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def sandbox():
    with SandboxServer() as server:
        yield server


@pytest.fixture(scope="module")
def tasks():
    return pick_tasks(3)  # 3 EN + 3 ZH, over the apps


def _summary(store: RawStore, collection: str) -> dict:
    trajs, steps = check_store(store, collection)
    actions: dict[str, list] = {}
    for s in sorted(steps, key=lambda s: (s.trajectory_id, s.index)):
        actions.setdefault(s.trajectory_id, []).append(s.action)
    return {
        t.trajectory_id: (t.outcome, t.verified_by, t.num_steps, t.device, actions.get(t.trajectory_id, []))
        for t in trajs
    }


@pytest.fixture(scope="module")
def local_reference(sandbox, tasks, tmp_path_factory):
    store = RawStore(tmp_path_factory.mktemp("local") / "raw")
    with WebEnvPool(2, request_filter=Allowlist([sandbox.url])) as pool:
        crawl(
            tasks,
            SandboxCrawl(server_url=sandbox.url, policy="oracle", seed=0, distraction_rate=0.5),
            store=store,
            collection="web/local",
            pool=pool,
        )
    return _summary(store, "web/local")


@pytest.fixture(scope="module")
def ray_pool(ray_cluster, sandbox):
    with RayEnvPool(4, request_filter=Allowlist([sandbox.url]), step_timeout_s=10.0) as pool:
        pool.launch_all()
        yield pool


def _crawl(pool, tasks, sandbox, store, collection, progress=None):
    return crawl(
        tasks,
        SandboxCrawl(server_url=sandbox.url, policy="oracle", seed=0, distraction_rate=0.5),
        store=store,
        collection=collection,
        pool=pool,
        progress=progress,
    )


# Three or four steps each on the phone (as tests/mobile/test_mobile_crawl.py plays them).
TASK_IDS = ["settings.dark_mode:en:0", "notes.favourite:zh:0"]


def test_appium_sessions_as_ray_actors_crawl_mobile_tasks_on_the_device_node(
    ray_cluster, appium_server, sandbox, tmp_path
):
    catalog = {t.task_id: t for t in build_catalog(per_template=1, languages=("en", "zh"), seed=0)}
    tasks = [catalog[i] for i in TASK_IDS]
    store = RawStore(tmp_path / "raw")
    with RayEnvPool(
        1, devices=[chromium_device("pixel_8")], factory=AppiumSessionFactory(appium_server.url)
    ) as pool:
        assert pool.resource == DEVICE_RESOURCE and pool.profiles == ["pixel_8"]
        stats = crawl(
            tasks,
            SandboxCrawl(server_url=sandbox.url, policy="oracle", seed=0, distraction_rate=0.0, retries=1),
            store=store,
            collection="mobile/ray",
            pool=pool,
        )
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
        assert (t.device.viewport_width, t.device.viewport_height, t.device.pixel_ratio) == (412, 915, 2.625)
        assert t.num_steps >= 3
    assert {(s.width, s.height) for s in steps} == {(1082, 2402)}  # a pixel_8's device pixels


def test_the_mobile_asset_plays_its_sessions_on_the_phone_host_when_appium_names_a_cluster(
    ray_cluster, appium_server, tmp_path
):
    import dagster as dg

    from crawlers.randomise import profile_for_task
    from dagster_project.assets.catalog import task_catalog
    from dagster_project.assets.mobile import mobile_trajectories
    from dagster_project.partitions import MOBILE_DEVICES
    from dagster_project.resources import AppiumResource, SandboxResource, StorageResource
    from trajforge.tasks.catalog import read_catalog

    data = tmp_path / "data"
    resources = {
        "storage": StorageResource(root=str(data)),
        "sandbox": SandboxResource(),
        "appium": AppiumResource(
            external_url=appium_server.url,
            sessions=1,
            screenshot_scale="css",
            ray_address=ray_cluster.cluster.address,
        ),
    }
    instance = dg.DagsterInstance.ephemeral()
    assets = [task_catalog, mobile_trajectories]
    cfg = {"ops": {"task_catalog": {"config": {"per_template": 1, "languages": ["en"]}}}}
    assert dg.materialize(
        assets, selection=["task_catalog"], resources=resources, instance=instance, run_config=cfg
    ).success
    key = dg.MultiPartitionKey({"app": "mobile_shop", "device": "pixel_8"})
    run = dg.materialize(
        assets, selection=["mobile_trajectories"], partition_key=key, resources=resources, instance=instance
    )
    assert run.success
    meta = {
        k: v.value for k, v in run.asset_materializations_for_node("mobile_trajectories")[0].metadata.items()
    }
    mine = [
        t
        for t in read_catalog(data / "catalog" / "tasks.parquet", apps=["mobile_shop"])
        if profile_for_task(0, t.task_id, MOBILE_DEVICES) == "pixel_8"
    ]
    assert meta["trajectories"] == len(mine) > 0 and meta["success_rate"] >= 0.9
    pool = meta["device_pools"]["pixel_8"]  # Ray actors on the phone host, not a DevicePool
    assert pool["resource"] == "device:pixel_8" and pool["nodes_used"] == 1
    assert pool["leases"] >= len(mine) and pool["actors_lost"] == 0


def test_the_crawl_asset_plays_on_ray_actors_when_the_browser_resource_names_a_cluster(ray_cluster, tmp_path):
    # First in the file: the module's 4-actor pool (ray_pool) is not holding the browsers yet.
    import dagster as dg

    from dagster_project.assets.catalog import task_catalog
    from dagster_project.assets.crawl import web_trajectories
    from dagster_project.resources import BrowserResource, SandboxResource, StorageResource

    resources = {
        "storage": StorageResource(root=str(tmp_path / "data")),
        "sandbox": SandboxResource(),
        "browser": BrowserResource(ray_address=ray_cluster.cluster.address, ray_actors=2),
    }
    instance = dg.DagsterInstance.ephemeral()
    assets = [task_catalog, web_trajectories]
    assert dg.materialize(
        assets,
        selection=["task_catalog"],
        resources=resources,
        instance=instance,
        run_config={"ops": {"task_catalog": {"config": {"per_template": 1}}}},
    ).success
    run = dg.materialize(
        assets,
        selection=["web_trajectories"],
        partition_key="settings",
        resources=resources,
        instance=instance,
    )
    assert run.success
    meta = run.asset_materializations_for_node("web_trajectories")[0].metadata
    pool = meta["browsers"].value
    assert pool["resource"] == "browser" and pool["launches"] == 2 and pool["nodes_used"] >= 1
    assert pool["leases"] >= meta["trajectories"].value > 0
    assert pool["env_calls"] > meta["steps"].value and meta["success_rate"].value >= 0.95


def test_the_environment_asset_plays_on_ray_actors_when_the_browser_resource_names_a_cluster(
    ray_cluster, tmp_path, monkeypatch
):
    # A lab's own app through its environment file (a counter page, its js verifier), crawled
    # by the Dagster asset on 2 browser actors; before ray_pool holds the cluster's browsers.
    import dagster as dg

    from dagster_project.assets.environments import environment_partitions, environment_trajectories
    from dagster_project.resources import BrowserResource, StorageResource
    from tests.dagster.test_environment_assets import ENV, GOOD
    from tests.thirdparty.apps import counter_server

    folder = tmp_path / "environments"
    folder.mkdir()
    with counter_server() as url, dg.instance_for_test() as instance:
        (folder / "counter.yaml").write_text(ENV.format(name="counter", url=url, expr=GOOD))
        monkeypatch.setenv("TRAJFORGE_ENVIRONMENTS", str(folder))
        instance.add_dynamic_partitions(environment_partitions.name, ["counter"])
        run = dg.materialize(
            [environment_trajectories],
            partition_key="counter",
            instance=instance,
            resources={
                "storage": StorageResource(root=str(tmp_path / "data")),
                "browser": BrowserResource(ray_address=ray_cluster.cluster.address, ray_actors=2),
            },
        )
    assert run.success
    meta = {
        k: v.value
        for k, v in run.asset_materializations_for_node("environment_trajectories")[0].metadata.items()
    }
    pool = meta["browsers"]  # a pool of 2 Ray actors (one episode: one of them played it)
    assert pool["resource"] == "browser" and pool["browsers"] == 2 and pool["nodes_used"] == 1
    assert pool["leases"] >= meta["episodes"] == meta["success"] == 1
    assert pool["env_calls"] > 0


def test_the_ray_pool_records_what_the_local_pool_records_into_the_s3_store(
    ray_cluster, ray_pool, sandbox, tasks, local_reference, s3_server
):
    # Placed by the `browser` resource: 2 actors on each worker, none on the head.
    nodes = ray_pool.slot_nodes()
    workers = {w.node_id for w in ray_cluster.workers}
    assert set(nodes.values()) == workers and len(nodes) == 4
    # Into the S3-compatible server (moto on loopback): parts, blobs, commit markers.
    store = open_raw_store(s3_server.url("ray"), storage_options=s3_server.storage_options)
    stats = _crawl(ray_pool, tasks, sandbox, store, "web/ray")
    got = _summary(store, "web/ray")
    assert got == local_reference
    assert len(store.commits("web/ray")) >= 1
    # The guard's audit log went to the bucket too (one object per writer), a line per action.
    [log] = store.fs.ls(f"{store.root}/audit/web/ray", detail=False)
    lines = store.fs.cat_file(log).decode().splitlines()
    assert len(lines) >= stats.steps
    assert stats.trajectories == len(tasks) and stats.error == 0 and stats.success >= 4
    figures = ray_pool.stats()
    assert figures["leases"] >= len(tasks) and figures["nodes_used"] == 2
    assert figures["actors_lost"] == 0 and figures["env_calls"] > stats.steps
    # A re-run resumes: everything is committed, nothing is played.
    again = _crawl(ray_pool, tasks, sandbox, store, "web/ray")
    assert (again.trajectories, again.skipped) == (0, len(tasks))


ONLINE = dict(
    tasks=["settings.wifi", "notes.create"],
    devices=["desktop"],
    k=2,
    iterations=1,
    tasks_per_iteration=2,
    max_steps=3,
    max_new_tokens=4,
    device="cpu",
    lr=1e-3,
)


def _online_cfg(sandbox, out: Path, **kw):
    from tests.training.conftest import TINY_IMAGE_PIXELS
    from tests.vlm.helpers import tiny_model_path
    from training.online import OnlineRLConfig

    return OnlineRLConfig(
        model_path=str(tiny_model_path()),
        out_dir=str(out / "ckpt"),
        store=str(out / "raw"),
        server_url=sandbox.url,
        image_max_pixels=TINY_IMAGE_PIXELS,
        **ONLINE,
        **kw,
    )


def _rollouts(store_root: Path) -> dict:
    """trajectory id -> (outcome, steps, device, each step's action and screenshot)."""
    store = RawStore(store_root)
    trajs, steps = [], []
    for collection in store.collections():  # each whole, no duplicates within
        t, s = check_store(store, collection)
        trajs, steps = trajs + t, steps + s
    assert len({t.trajectory_id for t in trajs}) == len(trajs), "a rollout stored twice"
    by_tid: dict[str, list] = {}
    for s in sorted(steps, key=lambda s: (s.trajectory_id, s.index)):
        by_tid.setdefault(s.trajectory_id, []).append((s.action, s.screenshot))
    return {
        t.trajectory_id: (t.outcome, t.num_steps, t.device, t.seed, by_tid.get(t.trajectory_id))
        for t in trajs
    }


FIGURES = ("rollouts", "trained_rollouts", "sequences", "groups", "loss", "kl", "reward_mean")


@pytest.fixture(scope="module")
def online_sequential(sandbox, tmp_path_factory):
    """One online-RL iteration with its rollouts played one after another in one local browser."""
    from training.online import run_online_rl

    out = tmp_path_factory.mktemp("online-seq")
    m = run_online_rl(_online_cfg(sandbox, out))
    return m, _rollouts(out / "raw")


def _slot_leases(pool) -> dict[str, int]:
    return {s["slot"]: s["leases"] for s in pool.slots()}


def test_an_online_rl_iteration_spreads_its_rollouts_over_actors_on_both_nodes(
    ray_cluster, ray_pool, sandbox, online_sequential, tmp_path
):
    from training.online import run_online_rl

    seq, seq_rollouts = online_sequential
    before, stats_before = _slot_leases(ray_pool), ray_pool.stats()
    m = run_online_rl(_online_cfg(sandbox, tmp_path), pool=ray_pool)
    after, stats_after = _slot_leases(ray_pool), ray_pool.stats()
    # 2 tasks x k=2 rollouts, each on its own lease; played at once, on actors of both workers.
    used = {name for name in after if after[name] > before[name]}
    nodes = {ray_pool.slot_nodes()[name] for name in used}
    assert stats_after["leases"] - stats_before["leases"] == 4
    assert len(used) >= 2 and nodes == {w.node_id for w in ray_cluster.workers}
    assert m["rollout_pool"]["nodes_used"] == 2 and m["rollout_pool"]["resource"] == "browser"
    # The sequential path's rollouts: same checkpoint id (the pool is not part of what is
    # trained), same trajectory ids and seeds, same devices, answers (actions) and screens.
    assert m["checkpoint_id"] == seq["checkpoint_id"]
    got = _rollouts(tmp_path / "raw")
    assert len(got) == 4 and got == seq_rollouts
    # Each rollout's generations were its own: the update saw the same sequences and losses.
    it, seq_it = m["history"][0], seq["history"][0]
    assert {k: it[k] for k in FIGURES} == {k: seq_it[k] for k in FIGURES}
    assert it["sequences"] >= 4 and it["rollout_retries"] == 0


def test_an_actor_killed_mid_rollout_replays_that_rollout_whole(
    ray_pool, sandbox, online_sequential, tmp_path
):
    from training.online import run_online_rl

    seq, seq_rollouts = online_sequential
    before = ray_pool.stats()
    pids = ray_pool.slot_pids()  # asked now: an actor answers once its running call is done
    killed: list[str] = []
    done = threading.Event()

    def killer():  # SIGKILL the Ray worker process of an actor seen mid-rollout
        while not done.is_set():
            busy = [s["slot"] for s in ray_pool.slots() if s["busy"]]
            if busy and ray_pool.stats()["env_calls"] > before["env_calls"]:
                os.kill(pids[busy[0]], signal.SIGKILL)
                killed.append(busy[0])
                return
            time.sleep(0.01)

    thread = threading.Thread(target=killer)
    thread.start()
    try:
        m = run_online_rl(_online_cfg(sandbox, tmp_path), pool=ray_pool)
    finally:
        done.set()
        thread.join()
    after = ray_pool.stats()
    assert killed
    assert after["actors_lost"] - before["actors_lost"] == 1
    assert after["episodes_replayed"] - before["episodes_replayed"] == 1
    assert m["history"][0]["rollout_retries"] == 1
    # None lost, none duplicated (check_store), none stored as an error: the same rollouts
    # as the sequential path, and the replayed one's first attempt left no generations behind.
    got = _rollouts(tmp_path / "raw")
    assert got == seq_rollouts and all(v[0] != "error" for v in got.values())
    it, seq_it = m["history"][0], seq["history"][0]
    assert {k: it[k] for k in FIGURES} == {k: seq_it[k] for k in FIGURES}


def test_an_environment_file_crawls_on_the_ray_pool_as_on_a_local_pool(
    ray_cluster, ray_pool, sandbox, tasks, tmp_path
):
    # crawl_environment, the path of any lab's app: here the sandbox's own environment
    # file (sandbox/environment.py: start URL, state verifier, oracle plugin).
    from crawlers.crawl_driver import EnvCrawl
    from crawlers.env_crawl import crawl_environment
    from sandbox.environment import sandbox_environment

    environment = sandbox_environment(sandbox.url, distraction_rate=0.5)
    # 2 EN + 2 ZH; a catalog task's start_url is where /start leads: the file's start_url
    # (/start with the episode's session) is where an environment episode begins.
    chosen = [t.model_copy(update={"start_url": None}) for t in tasks[:2] + tasks[3:5]]
    local, remote = RawStore(tmp_path / "local"), RawStore(tmp_path / "ray")
    with WebEnvPool(2, request_filter=Allowlist(environment.origins())) as pool:
        want = crawl_environment(
            environment, EnvCrawl(policy="oracle", tasks=chosen, seed=0), store=local, pool=pool
        )
    before = _slot_leases(ray_pool)
    got = crawl_environment(
        environment, EnvCrawl(policy="oracle", tasks=chosen, seed=0), store=remote, pool=ray_pool
    )
    after = _slot_leases(ray_pool)
    assert _summary(remote, "sandbox") == _summary(local, "sandbox")
    assert got.trajectories == want.trajectories == len(chosen)
    assert (got.error, got.success) == (0, want.success) and got.success >= 3
    used = {ray_pool.slot_nodes()[name] for name in after if after[name] > before[name]}
    assert used == {w.node_id for w in ray_cluster.workers}  # played on both worker nodes


def test_the_dagster_ray_resource_unset_keeps_local_browsers_and_set_gives_ray_actors(ray_cluster, sandbox):
    from dagster_project.ray_resource import RayResource
    from dagster_project.resources import BrowserResource

    allow = Allowlist([sandbox.url])
    unset = BrowserResource(browsers=1)
    with RayResource.for_browser(unset).browser_pool(unset, allow) as local:
        assert isinstance(local, WebEnvPool) and local.size == 1
    set_on_browser = BrowserResource(ray_address=ray_cluster.cluster.address, ray_actors=1)
    with RayResource.for_browser(set_on_browser).browser_pool(set_on_browser, allow) as remote:
        assert isinstance(remote, RayEnvPool) and remote.size == 1
        assert remote.stats()["resource"] == "browser"


def env_actor_pids() -> set[int]:
    """Processes of EnvActor actors (Ray titles an actor's worker `ray::EnvActor`)."""
    pids = set()
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and Path(f"/proc/{entry}/cmdline").read_bytes().startswith(b"ray::EnvActor"):
                pids.add(int(entry))
        except OSError:
            pass
    return pids


def test_the_environment_server_plays_its_sessions_on_ray_actors(ray_cluster, tmp_path):
    """`trajforge serve sandbox --ray-address`: a session's browser is an actor on a
    worker node; the actor killed mid-episode answers 503, the episode is recorded as
    `error`, and the next reset plays on a replacement actor."""
    import httpx

    from tests.envs.serving import serve

    node = ray_cluster.add_worker(browsers=2)  # the module's pool holds the other browsers
    before = env_actor_pids()
    ray_options = ("--ray-address", ray_cluster.cluster.address, "--max-steps", "4")
    try:
        with serve(
            "sandbox", record_to=tmp_path, idle_timeout=600, extra=ray_options, stop_timeout_s=120
        ) as srv:
            url = srv.url
            task = httpx.get(url + "/v1/envs").json()["envs"][0]["tasks"][0]
            created = httpx.post(
                url + "/v1/sessions",
                json={"env": "sandbox", "task_id": task, "policy_id": "ray"},
                timeout=180,
            )
            assert created.status_code == 200, created.text
            sid = created.json()["session_id"]
            wait = {"action": {"type": "wait", "duration_ms": 10}}
            step = httpx.post(f"{url}/v1/sessions/{sid}/step", json=wait, timeout=120)
            assert step.status_code == 200, step.text
            served = env_actor_pids() - before
            assert served, "no actor of the server was found"
            for pid in served:
                os.kill(pid, signal.SIGKILL)
            lost = httpx.post(f"{url}/v1/sessions/{sid}/step", json=wait, timeout=180)
            assert lost.status_code == 503 and lost.json()["error"]["kind"] == "env_failed", lost.text
            again = httpx.post(f"{url}/v1/sessions/{sid}/reset", json={"task_id": task}, timeout=240)
            assert again.status_code == 200, again.text
            assert httpx.delete(f"{url}/v1/sessions/{sid}").status_code == 200
    finally:
        ray_cluster.cluster.remove_node(node, allow_graceful=False)
    trajs = list(RawStore(tmp_path / "raw").iter_trajectories("gym/sandbox"))
    assert [t.outcome for t in trajs if t.source_name.endswith(":agent:ray")].count("error") == 1, [
        (t.source_name, t.outcome, t.error) for t in trajs
    ]


def test_desktop_sessions_play_on_ray_actors_placed_by_the_desktop_resource(ray_cluster, tmp_path):
    """A node declaring `desktop: 2` joins; DesktopEnvFactory actors are placed only there
    (the browser nodes lack the resource), each with its own Xvfb, AT-SPI bus and mousepad;
    the crawl records mousepad's EN and ZH notes verified by the `command` verifier (run in
    the actor's session), the Gym API plays on the same pool, and closing the pool leaves
    no X server, bus or app."""
    import shutil

    import trajforge.envs as tf_envs
    from crawlers.crawl_driver import EnvCrawl
    from crawlers.env_crawl import crawl_environment
    from crawlers.ray_pool import DesktopEnvFactory
    from schemas.environment import load_environment
    from tests.desktop.procs import assert_nothing_left, session_pids
    from tests.desktop.test_desktop_env import EXAMPLE
    from tests.ray.conftest import NODE

    if shutil.which("Xvfb") is None or shutil.which("mousepad") is None:
        pytest.skip("needs Xvfb and mousepad (scripts/setup_desktop.sh)")
    environment = load_environment(EXAMPLE)
    store = RawStore(tmp_path / "raw")
    node = ray_cluster.cluster.add_node(**NODE, resources={"desktop": 2})
    try:
        with RayEnvPool(2, factory=DesktopEnvFactory(environment)) as pool:
            assert (pool.resource, pool.platform) == ("desktop", "desktop")
            stats = crawl_environment(environment, EnvCrawl(policy="oracle"), store=store, pool=pool)
            env = tf_envs.make(EXAMPLE, task_id="note-en", pool=pool)
            try:
                _, info = env.reset(seed=0)
                box = next(e["bbox"] for e in info["elements"] if e["role"] == "textbox")
                x, y = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
                env.step({"type": "type", "x": x, "y": y, "text": "Buy milk and eggs"})
                _, reward, terminated, _, info = env.step({"type": "key", "text": "ctrl+s"})
            finally:
                env.close()
            nodes = set(pool.slot_nodes().values())
            owners = set(pool.slot_pids().values())  # the actors' workers own the sessions
            assert session_pids(owners), "the actors' desktop sessions were not found"
        assert_nothing_left(set(), owners)
        served = _served_desktop_episode(ray_cluster, tmp_path / "served")
    finally:
        ray_cluster.cluster.remove_node(node, allow_graceful=False)
    assert nodes == {node.node_id}
    assert (reward, terminated, info["outcome"], info["verified_by"]) == (1.0, True, "success", "command")
    assert served == [(0.0, False), (1.0, True)]
    assert (stats.trajectories, stats.success, stats.error) == (2, 2, 0)
    trajs = list(store.iter_trajectories())
    assert {(t.task.task_id, t.outcome, t.verified_by, t.platform) for t in trajs} == {
        ("note-en", "success", "command", "desktop"),
        ("note-zh", "success", "command", "desktop"),
    }


def _served_desktop_episode(ray_cluster, data: Path) -> list[tuple[float, bool]]:
    """`trajforge serve mousepad.yaml --ray-address`: one session's desktop is an actor on
    the `desktop` node; the note typed and saved; (reward, terminated) per step."""
    import httpx

    from tests.desktop.test_desktop_env import EXAMPLE
    from tests.envs.serving import serve

    ray_options = ("--ray-address", ray_cluster.cluster.address)
    with serve(
        EXAMPLE, record_to=data, max_sessions=1, idle_timeout=600, extra=ray_options, stop_timeout_s=120
    ) as srv:
        url = srv.url
        body = {"env": "mousepad", "task_id": "note-en", "policy_id": "ray"}
        created = httpx.post(url + "/v1/sessions", json=body, timeout=240)
        assert created.status_code == 200, created.text
        sid = created.json()["session_id"]
        box = next(e["bbox"] for e in created.json()["info"]["elements"] if e["role"] == "textbox")
        x, y = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
        out = []
        for action in (
            {"type": "type", "x": x, "y": y, "text": "Buy milk and eggs"},
            {"type": "key", "text": "ctrl+s"},
        ):
            step = httpx.post(f"{url}/v1/sessions/{sid}/step", json={"action": action}, timeout=120).json()
            out.append((step["reward"], step["terminated"]))
        httpx.delete(f"{url}/v1/sessions/{sid}")
        return out


def test_training_launches_on_a_ray_node_through_pipes(ray_cluster, tmp_path, monkeypatch):
    """TrainingLauncher(kind="ray"): sft_checkpoint with engine trl runs TRL's trainer as a
        Ray task on a node of the cluster; its Pipes messages (loss per step) come back as the
        asset's metadata with the node's id. A training command that fails is a Failure that
        names its exit status, node and output (the builtin engine, python -m training.sft, run
    on the cluster with a config it refuses)."""
    import json

    import dagster as dg
    import ray

    from dagster_project.assets.training import TRAINING_ASSETS
    from dagster_project.resources import StorageResource
    from dagster_project.training_launcher import TrainingLauncher
    from tests.training.conftest import TINY_IMAGE_PIXELS, build_small_reasoning_set
    from tests.vlm.helpers import tiny_model_path

    monkeypatch.setenv("TRAJFORGE_TRAIN_MODE", "tiny")
    data = tmp_path / "data"
    (data / "shards").mkdir(parents=True)
    build_small_reasoning_set(tmp_path / "build").rename(data / "shards" / "reasoning_set")
    resources = {
        "storage": StorageResource(root=str(data)),
        "launcher": TrainingLauncher(kind="ray", ray_address=ray_cluster.cluster.address, ray_num_cpus=1),
    }
    sft = [a for a in TRAINING_ASSETS if a.key.path == ["sft_checkpoint"]]

    def materialise(config: dict):
        return dg.materialize(
            sft,
            resources=resources,
            run_config={"ops": {"sft_checkpoint": {"config": config}}},
            instance=dg.DagsterInstance.ephemeral(),
            raise_on_error=False,
        )

    config = {
        "engine": "trl",
        "model_path": str(tiny_model_path()),
        "max_steps": 2,
        "max_samples": 4,
        "max_length": 1024,
        "image_max_pixels": TINY_IMAGE_PIXELS,
        "overrides": json.dumps({"mode_filter": "direct"}),
    }
    result = materialise(config)
    assert result.success
    (mat,) = result.asset_materializations_for_node("sft_checkpoint")
    meta = {k: getattr(v, "value", v) for k, v in mat.metadata.items()}
    assert meta["launcher"] == "ray" and meta["ray_node_id"] in {n["NodeID"] for n in ray.nodes()}
    assert meta["engine"] == "trl" and meta["steps"] == 2 and len(json.loads(meta["losses"])) == 2
    assert Path(meta["checkpoint_path"]).is_dir()

    # The builtin engine (python -m training.sft) on the cluster, with a config it refuses.
    failed = materialise({**config, "engine": "builtin", "overrides": json.dumps({"lr": "fast"})})
    assert not failed.success
    (failure,) = [e for e in failed.all_events if e.event_type_value == "STEP_FAILURE"]
    said = failure.event_specific_data.error.message
    assert "exited with status 1 on Ray node" in said and "lr" in said, said


def test_a_worker_node_killed_mid_crawl_loses_and_duplicates_nothing(
    ray_cluster, ray_pool, sandbox, tasks, local_reference, tmp_path
):
    # Runs last: it leaves the cluster one worker node.
    store = RawStore(tmp_path / "raw")
    killed: list[str] = []
    lock = threading.Lock()

    def killer(event: ProgressEvent) -> None:
        if event.kind != "step" or event.step_index != 0:
            return
        with lock:
            if killed:
                return
            node_id = ray_pool.slot_nodes()[event.slot]
            killed.append(node_id)
        # Off the Recorder's lock: the other episodes go on while the node dies.
        threading.Thread(target=ray_cluster.kill, args=(ray_cluster.node_of(node_id),)).start()

    before = ray_pool.stats()
    stats = _crawl(ray_pool, tasks, sandbox, store, "web/killed", progress=killer)
    after = ray_pool.stats()
    assert killed
    replayed = after["episodes_replayed"] - before["episodes_replayed"]
    lost = after["actors_lost"] - before["actors_lost"]
    print(
        f"node killed: {lost} actors lost, {replayed} episodes replayed, "
        f"{stats.retries} retries, {stats.seconds}s"
    )
    assert 1 <= lost <= 2 and replayed == lost and stats.retries >= replayed
    # 0 lost, 0 duplicated, every part readable (check_store), the same trajectories.
    assert _summary(store, "web/killed") == local_reference
    assert stats.trajectories == len(tasks) and stats.error == 0
    # Every actor now lives on the surviving worker; replacements wait for a free browser.
    live = {n for n in ray_pool.slot_nodes().values() if n is not None}
    assert live == {ray_cluster.workers[0].node_id}
