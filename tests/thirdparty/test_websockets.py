"""WebSockets under the allowlist: a socket to an origin the environment file allows
connects (kernels, live updates and chats work), one to any other origin is refused
(closed with 1008) and recorded as blocked. A real ASGI app (uvicorn) serves the page
and the socket; the page's own text says what its socket got."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest
import uvicorn
from fastapi import FastAPI, WebSocket
from fastapi.responses import HTMLResponse

import trajforge.envs as tf_envs

PAGE = """<!doctype html><html><body><p id="s">waiting</p><script>
const port = new URLSearchParams(location.search).get('wsport') || location.port;
const ws = new WebSocket(`ws://127.0.0.1:${port}/ws`);
ws.onopen = () => ws.send('ping');
ws.onmessage = (e) => { document.getElementById('s').textContent = 'got ' + e.data; };
ws.onclose = (e) => { const s = document.getElementById('s');
  if (s.textContent === 'waiting') s.textContent = 'closed ' + e.code; };
</script></body></html>"""


def _app() -> FastAPI:
    app = FastAPI()

    @app.get("/")
    def page():
        return HTMLResponse(PAGE)

    @app.websocket("/ws")
    async def echo(sock: WebSocket):
        await sock.accept()
        await sock.send_text("pong:" + await sock.receive_text())

    return app


def _serve() -> tuple[str, uvicorn.Server]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(_app(), log_level="warning"))
    threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True).start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    return f"http://127.0.0.1:{sock.getsockname()[1]}", server


@pytest.fixture(scope="module")
def two_origins():
    (page_url, a), (socket_url, b) = _serve(), _serve()
    try:
        yield page_url, socket_url
    finally:
        a.should_exit = b.should_exit = True


def _play(tmp_path, page_url: str, socket_url: str, allowed: list[str]):
    port = socket_url.rsplit(":", 1)[1]
    env_file = tmp_path / "ws.yaml"
    env_file.write_text(
        f"""name: ws
platform: web
start_url: {page_url}/?wsport={port}
allow: {json.dumps(allowed)}
wait_for: "js:document.getElementById('s').textContent !== 'waiting'"
tasks:
  - task_id: read-the-socket
    instruction: Wait for the live update
    verifier:
      kind: js
      expression: "({{done: true, success: document.getElementById('s').textContent.startsWith('got')}})"
""",
        encoding="utf-8",
    )
    env = tf_envs.make(env_file)
    try:
        obs, _ = env.reset(seed=0)
        blocked = list(env.unwrapped.browser.blocked_requests)
        _, reward, terminated, _, info = env.step({"type": "wait", "duration_ms": 50})
        return obs["a11y"], reward, blocked
    finally:
        env.close()


def test_a_websocket_to_an_allowed_origin_connects(two_origins, tmp_path):
    page_url, socket_url = two_origins
    a11y, reward, blocked = _play(tmp_path, page_url, socket_url, [page_url, socket_url])
    assert "got pong:ping" in a11y and reward == 1.0 and blocked == []


def test_a_websocket_to_another_origin_is_refused_and_recorded(two_origins, tmp_path):
    page_url, socket_url = two_origins
    a11y, reward, blocked = _play(tmp_path, page_url, socket_url, [page_url])
    assert "closed 1008" in a11y and reward == 0.0
    assert blocked == [f"ws://127.0.0.1:{socket_url.rsplit(':', 1)[1]}/ws"]
