"""Fault: `dagster asset materialize` of a crawl partition is SIGKILLed half-way.

The kill takes the whole process tree at once (the CLI, the Playwright
driver, Chromium), as a lost node or an OOM kill would. The same command
is then materialised again, in-process on the same Dagster instance (the
CLI's start-up, ~25 s here, paid once). After it: each task of the partition is stored exactly
once, every Parquet file reads, and shards exported from the store verify.
Also: the crawl assets carry a retry policy with backoff.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import psutil
import pytest

from sandbox.tasks import build_catalog
from schemas.records import trajectory_id_for
from trajforge.publish import shards
from trajforge.publish.export import export_shards
from trajforge.store.raw import RawStore
from trajforge.tasks.catalog import write_catalog

from .conftest import check_store_whole

ROOT = Path(__file__).resolve().parents[2]
DAGSTER = Path(sys.executable).parent / "dagster"
N_TASKS, KILL_AFTER = 4, 1
CONFIG = {"ops": {"web_trajectories": {"config": {"batch_size": 1, "max_steps": 12}}}}
COLLECTION = "web/settings"


def test_crawl_assets_retry_with_backoff():
    from dagster_project.assets.crawl import web_trajectories
    from dagster_project.assets.imports import imported_trajectories
    from dagster_project.assets.mobile import mobile_trajectories

    for asset in (web_trajectories, mobile_trajectories, imported_trajectories):
        policy = asset.op.retry_policy
        assert policy is not None and policy.max_retries >= 2, asset.key
        assert policy.backoff == dg.Backoff.EXPONENTIAL and policy.delay > 0, asset.key


def _materialize(env: dict, log: Path) -> subprocess.Popen:
    cmd = [
        str(DAGSTER),
        "asset",
        "materialize",
        "-m",
        "dagster_project.definitions",
        "--select",
        "web_trajectories",
        "--partition",
        "settings",
        "--config-json",
        json.dumps(CONFIG),
    ]
    # Its own session: the kill below reaches the CLI's whole process group.
    return subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=open(log, "wb"), stderr=subprocess.STDOUT, start_new_session=True
    )


def _committed(store: RawStore) -> int:
    try:
        return len(store.committed_ids(COLLECTION))
    except OSError:  # a part renamed in between two globs
        return 0


def _kill_tree(proc: subprocess.Popen) -> int:
    """SIGKILL the CLI and every process under it at once; how many were killed."""
    family = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
    for p in family:  # Chromium runs in a session of its own: kill each process
        try:
            p.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            pass
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    psutil.wait_procs(family, timeout=30)
    return len(family)


@pytest.mark.slow
@pytest.mark.timeout(500)
def test_sigkill_of_a_crawl_materialisation_then_rerun(tmp_path):
    data, home = tmp_path / "data", tmp_path / "dagster_home"
    home.mkdir()
    tasks = [t for t in build_catalog(per_template=1, languages=("en", "zh"), seed=0) if t.app == "settings"][
        :N_TASKS
    ]
    write_catalog(tasks, data / "catalog" / "tasks.parquet")
    env = {**os.environ, "DAGSTER_HOME": str(home), "TRAJFORGE_DATA": str(data)}
    store = RawStore(data / "raw")

    proc = _materialize(env, tmp_path / "killed.log")
    deadline = time.monotonic() + 300
    while _committed(store) < KILL_AFTER and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert proc.poll() is None, (
        "the run ended before it could be killed:\n" + (tmp_path / "killed.log").read_text()[-3000:]
    )
    killed = _kill_tree(proc)
    assert proc.returncode == -signal.SIGKILL and killed >= 2  # the CLI and its browser at least
    # What the killed run committed reads back whole; its partial batch is invisible.
    before = {t.trajectory_id for t in store.iter_trajectories(COLLECTION)}
    assert KILL_AFTER <= len(before) < N_TASKS

    from dagster_project.assets.crawl import web_trajectories
    from dagster_project.resources import BrowserResource, SandboxResource, StorageResource

    with dg.DagsterInstance.from_config(str(home)) as instance:  # holds the killed run too
        rerun = dg.materialize(
            [web_trajectories],
            partition_key="settings",
            instance=instance,
            run_config=CONFIG,
            resources={
                "storage": StorageResource(root=str(data)),
                "sandbox": SandboxResource(),
                "browser": BrowserResource(),
            },
        )
    assert rerun.success
    trajs, steps = check_store_whole(store, COLLECTION)
    expected = {trajectory_id_for("sandbox", t.task_id, "oracle", 0) for t in tasks}
    assert sorted(t.trajectory_id for t in trajs) == sorted(expected)  # each exactly once
    assert before <= expected
    assert sum(t.outcome == "success" for t in trajs) >= N_TASKS - 1

    # The re-run said what it skipped: the killed run's committed trajectories.
    meta = rerun.asset_materializations_for_node("web_trajectories")[0].metadata
    assert meta["skipped"].value == len(before)
    assert meta["trajectories"].value == N_TASKS - len(before)

    out = data / "shards" / "sandbox"
    result = export_shards(store, out, dataset="sandbox", collections=[COLLECTION])
    assert shards.verify(out) == []
    keys = [k for k, _ in shards.iter_samples(out, images=False)]
    assert len(keys) == len(set(keys)) == len(steps) == result.samples
