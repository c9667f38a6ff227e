"""Ray pool: steps/s of the same crawl on local browsers and on Ray browser actors.

    .venv/bin/python benchmarks/ray_pool.py [--mode smoke|quick|full]

Starts a Ray cluster on this machine (ray.cluster_utils: a head with no
`browser` resource, worker nodes with `browser: 2` each) and the sandbox, then
crawls the same oracle tasks: on a local WebEnvPool(2) (the baseline), on a
RayEnvPool(2) over 1 worker node, on a RayEnvPool(4) over 2 worker nodes; then
kills one worker in the middle of a crawl and times the recovery (kill to the
loss seen by the pool, kill to the crawl's end). Also: one env call's round
trip through an actor (the per-call hop) against the same call on a local
browser, and each browser's memory (RSS of the actor's process tree).
Online-RL rollouts/s: one training.online iteration (the tiny random-weight VLM,
k rollouts x 2 tasks, the rollout phase only: `rollouts_per_s`) in one local
browser, one rollout after another, then on the 2 and the 4 actors.
Browsers are launched before the clocks start.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, Row, pick  # noqa: E402

sys.path.insert(0, str(ROOT))

SIZES = {"smoke": {"tasks": 2, "k": 2}, "quick": {"tasks": 4, "k": 4}, "full": {"tasks": 8, "k": 8}}
NODE = dict(num_cpus=1, object_store_memory=100 * 2**20)


def _rss_mb(pid: int) -> float:
    import psutil

    p = psutil.Process(pid)
    procs = [p, *p.children(recursive=True)]
    return sum(q.memory_info().rss for q in procs if q.is_running()) / 2**20


def _crawl(pool, tasks, url, root, name, progress=None):
    from sandbox.crawl import SandboxCrawl, crawl
    from trajforge.store.raw import RawStore

    return crawl(
        tasks,
        SandboxCrawl(server_url=url, policy="oracle", seed=0, distraction_rate=0.5),
        store=RawStore(Path(root) / name),
        collection="web",
        pool=pool,
        progress=progress,
    )


def _hop_ms(env, n: int = 50) -> float:
    env.is_alive()
    t0 = time.perf_counter()
    for _ in range(n):
        env.is_alive()
    return (time.perf_counter() - t0) / n * 1000


def _rollouts(pool, url: str, root: str, name: str, k: int) -> dict:
    """One online-RL iteration's rollout phase (k x 2 tasks) on `pool` (None: one browser)."""
    from tests.vlm.helpers import tiny_model_path
    from training.online import OnlineRLConfig, run_online_rl

    out = Path(root) / f"online-{name}"
    cfg = OnlineRLConfig(
        model_path=str(tiny_model_path()),
        out_dir=str(out / "ckpt"),
        store=str(out / "raw"),
        server_url=url,
        tasks=["settings.wifi", "notes.create"],
        devices=["desktop"],
        k=k,
        iterations=1,
        tasks_per_iteration=2,
        max_steps=3,
        max_new_tokens=4,
        device="cpu",
        image_max_pixels=28 * 28 * 16,
        lr=1e-3,
    )
    from trajforge.store.raw import RawStore

    m = run_online_rl(cfg, pool=pool)
    store = RawStore(out / "raw")
    # What the rollouts were: ids and each step's screenshot (the same for any pool).
    played = sorted((s.trajectory_id, s.index, s.screenshot) for s in store.iter_steps())
    return {
        "rollouts": m["rollouts"],
        "rollout_s": m["history"][0]["rollout_s"],
        "rollouts_per_s": round(m["rollouts_per_s"], 3),
        "sequences": m["history"][0]["sequences"],
        "played": played,
    }


def measure(n_tasks: int, k: int = 4) -> dict:
    import ray
    from ray.cluster_utils import Cluster

    from crawlers.allowlist import Allowlist
    from crawlers.crawl_browser_pool import WebEnvPool
    from crawlers.ray_pool import RayEnvPool
    from sandbox.server import SandboxServer
    from tests.crawlers.test_runner import pick_tasks

    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    tasks = pick_tasks(max(1, n_tasks // 2))
    out: dict = {"tasks": len(tasks)}
    t0 = time.perf_counter()
    cluster = Cluster(
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
    workers = [cluster.add_node(**NODE, resources={"browser": 2})]
    ray.init(address=cluster.address, log_to_driver=False)
    cluster.wait_for_nodes()
    out["cluster_start_s"] = round(time.perf_counter() - t0, 1)
    root = tempfile.mkdtemp(prefix="bench-ray-")
    try:
        with SandboxServer() as srv:
            allow = Allowlist([srv.url])
            with WebEnvPool(2, request_filter=allow) as local:
                local.launch_all()
                hop_local = local.submit(lambda: _local_hop(local)).result()
                s = _crawl(local, tasks, srv.url, root, "local")
                out["local_2"] = {"steps": s.steps, "seconds": s.seconds, "steps_per_s": s.steps_per_s}
            out["rollouts_sequential_1"] = _rollouts(None, srv.url, root, "seq", k)
            with RayEnvPool(2, request_filter=allow) as one:
                t1 = time.perf_counter()
                one.launch_all()
                out["actor_launch_s"] = round((time.perf_counter() - t1) / 2, 2)
                with one.lease() as env:
                    out["hop_ms"] = {"ray_actor": round(_hop_ms(env), 2), "local": round(hop_local, 2)}
                out["browser_rss_mb"] = round(sum(_rss_mb(p) for p in one.slot_pids().values()) / 2, 1)
                s = _crawl(one, tasks, srv.url, root, "ray1")
                out["ray_1node_2"] = {"steps": s.steps, "seconds": s.seconds, "steps_per_s": s.steps_per_s}
                out["rollouts_ray_2"] = _rollouts(one, srv.url, root, "ray2", k)
            workers.append(cluster.add_node(**NODE, resources={"browser": 2}))
            cluster.wait_for_nodes()
            with RayEnvPool(4, request_filter=allow) as two:
                two.launch_all()
                s = _crawl(two, tasks, srv.url, root, "ray2")
                out["ray_2nodes_4"] = {"steps": s.steps, "seconds": s.seconds, "steps_per_s": s.steps_per_s}
                out["rollouts_ray_4"] = _rollouts(two, srv.url, root, "ray4", k)
                killed: list[float] = []
                lock = threading.Lock()

                def killer(ev):
                    if ev.kind != "step" or ev.step_index != 0:
                        return
                    with lock:
                        if killed:
                            return
                        node_id = two.slot_nodes()[ev.slot]
                        killed.append(time.monotonic())
                    node = next(w for w in workers if w.node_id == node_id)
                    threading.Thread(
                        target=cluster.remove_node, args=(node,), kwargs={"allow_graceful": False}
                    ).start()

                s = _crawl(two, tasks, srv.url, root, "killed", progress=killer)
                end = time.monotonic()
                st = two.stats()
                out["node_kill"] = {
                    "actors_lost": st["actors_lost"],
                    "episodes_replayed": st["episodes_replayed"],
                    "trajectories": s.trajectories,
                    "errors": s.error,
                    "loss_seen_s": round(two.lost_at[0] - killed[0], 2) if two.lost_at else None,
                    "kill_to_crawl_end_s": round(end - killed[0], 2),
                    "crawl_seconds": s.seconds,
                }
    finally:
        ray.shutdown()
        cluster.shutdown()
    return out


def _local_hop(pool) -> float:
    with pool.lease() as env:
        return _hop_ms(env)


def rows_from(m: dict) -> list[Row]:
    base = m["local_2"]["steps_per_s"]
    one, two = m["ray_1node_2"]["steps_per_s"], m["ray_2nodes_4"]["steps_per_s"]
    k = m["node_kill"]
    seq = m["rollouts_sequential_1"]
    r2, r4 = m["rollouts_ray_2"], m["rollouts_ray_4"]
    return [
        Row(
            "ray_pool",
            "Ray pool: steps/s, 2 browser actors on 1 worker node",
            one,
            base,
            "steps/s",
            "local WebEnvPool(2), same tasks",
            note=f"hop {m['hop_ms']['ray_actor']} ms/call vs {m['hop_ms']['local']} ms local",
        ),
        Row(
            "ray_pool",
            "Ray pool: steps/s, 4 actors on 2 worker nodes",
            two,
            one,
            "steps/s",
            "2 actors on 1 worker node",
            note="one 2-core machine: the nodes share its cores",
        ),
        Row(
            "ray_pool",
            "Ray pool: a worker killed mid-crawl, kill to crawl end",
            k["kill_to_crawl_end_s"],
            k["crawl_seconds"],
            "s",
            "that crawl's whole time",
            note=f"{k['actors_lost']} actors lost, {k['episodes_replayed']} replayed, loss seen "
            f"{k['loss_seen_s']} s after the kill, {k['errors']} errors",
        ),
        Row(
            "ray_pool",
            "Online-RL rollouts/s, 2 Ray actors (1 node)",
            r2["rollouts_per_s"],
            seq["rollouts_per_s"],
            "rollouts/s",
            "one local browser, in turn",
            note=f"{seq['rollouts']} rollouts, tiny VLM (1 step each); same rollouts: "
            f"{r2['played'] == seq['played']}",
        ),
        Row(
            "ray_pool",
            "Online-RL rollouts/s, 4 Ray actors (2 nodes)",
            r4["rollouts_per_s"],
            seq["rollouts_per_s"],
            "rollouts/s",
            "one local browser, in turn",
            note=f"same rollouts: {r4['played'] == seq['played']}",
        ),
    ]


def run(mode: str) -> list[Row]:
    size = pick(mode, SIZES)
    return rows_from(measure(size["tasks"], size["k"]))


def main() -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", default="quick", choices=list(SIZES))
    args = ap.parse_args()
    m = measure(SIZES[args.mode]["tasks"], SIZES[args.mode]["k"])
    print(
        json.dumps(
            {
                k: ({**v, "played": len(v["played"])} if k.startswith("rollouts_") else v)
                for k, v in m.items()
            },
            indent=2,
        )
    )
    for r in rows_from(m):
        print(f"{r.name}: {r.figure:.2f} vs {r.baseline:.2f} {r.unit} = {r.ratio:.2f}; {r.note}")
    return m


if __name__ == "__main__":
    main()
