"""`dagster dev` serves the graph: find the assets through GraphQL, stop by PID."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _graphql(port: int, query: str) -> dict:
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql",
        data=json.dumps({"query": query}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())


@pytest.mark.slow
def test_dagster_dev_lists_assets_over_graphql(tmp_path):
    port = _free_port()
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path), "TRAJFORGE_DATA": str(tmp_path / "data")}
    dagster = Path(sys.executable).parent / "dagster"
    # Its own session, so the whole process group (webserver, daemon, code
    # server) can be stopped by PID; a plain `&` would ignore SIGTERM.
    proc = subprocess.Popen(
        [str(dagster), "dev", "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        query = "{ assetNodes { assetKey { path } groupName partitionKeys } }"
        deadline = time.time() + 150
        nodes = None
        while time.time() < deadline:
            assert proc.poll() is None, proc.stdout.read().decode(errors="replace")[-3000:]
            try:
                data = _graphql(port, query)
                assert not data.get("errors"), data["errors"]
                nodes = data["data"]["assetNodes"]
                if nodes:
                    break
            except OSError:
                pass
            time.sleep(2)
        assert nodes, "dagster dev never answered with asset nodes"
        by_key = {"/".join(n["assetKey"]["path"]): n for n in nodes}
        assert {"task_catalog", "web_trajectories", "raw_steps", "web_shards"} <= set(by_key)
        parts = by_key["web_trajectories"]["partitionKeys"]
        assert parts == ["mail", "notes", "settings", "shop", "social"]
        sched = _graphql(
            port,
            '{ schedulesOrError(repositorySelector: {repositoryName: "__repository__", '
            'repositoryLocationName: "dagster_project.definitions"}) '
            "{ ... on Schedules { results { name cronSchedule } } } }",
        )
        names = [s["name"] for s in sched["data"]["schedulesOrError"].get("results", [])]
        assert "daily_web_crawl" in names, sched
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
    assert proc.poll() is not None
