"""`trajforge envs tasks`: the RL task file (`python -m training.engines.env_tasks`) of what a
server serves, here a stand-in answering `GET /v1/envs` as `trajforge serve` does."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from trajforge.cli import app

ENVS = {"envs": [{"name": "wiki", "tasks": ["edit", "search"]}, {"name": "shop", "tasks": []}]}
runner = CliRunner()


class _Envs(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - http.server's name
        body = json.dumps(ENVS).encode() if self.path == "/v1/envs" else b"{}"
        self.send_response(200 if self.path == "/v1/envs" else 404)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):  # quiet
        pass


@pytest.fixture()
def server_url():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Envs)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_help_names_the_options():
    r = runner.invoke(app, ["envs", "tasks", "--help"])
    assert r.exit_code == 0, r.output
    assert all(o in r.output for o in ("URL", "OUT", "--episodes", "--seed", "--env"))


def test_writes_one_row_per_episode_of_the_chosen_envs(server_url, tmp_path):
    out = tmp_path / "rl" / "train.parquet"
    r = runner.invoke(
        app, ["envs", "tasks", server_url, str(out), "--episodes", "2", "--seed", "5", "--env", "wiki"]
    )
    assert r.exit_code == 0, r.output
    assert r.stdout.strip() == f"4 episodes -> {out}"
    rows = pq.read_table(out).to_pylist()
    assert [(x["extra_info"]["task_id"], x["extra_info"]["seed"]) for x in rows] == [
        ("edit", 5),
        ("edit", 6),
        ("search", 5),
        ("search", 6),
    ]
    every = runner.invoke(app, ["envs", "tasks", server_url, str(out)])
    assert (
        every.exit_code == 0 and every.stdout.strip() == f"3 episodes -> {out}"
    )  # shop: one made-up episode


def test_an_unknown_env_or_no_server_is_one_line_and_exit_2(server_url, tmp_path):
    r = runner.invoke(app, ["envs", "tasks", server_url, str(tmp_path / "t.parquet"), "--env", "mail"])
    assert r.exit_code == 2 and "serves no ['mail']" in r.output and "Traceback" not in r.output
    r = runner.invoke(app, ["envs", "tasks", "http://127.0.0.1:9", str(tmp_path / "t.parquet")])
    assert r.exit_code == 2 and r.output.startswith("error: http://127.0.0.1:9")
