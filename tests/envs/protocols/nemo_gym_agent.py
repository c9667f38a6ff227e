"""Run by .venv-nemo's Python (nemo-gym 0.4.0, scripts/setup_rl.sh) from test_nemo_gym.py:
NeMo Gym's own `SimpleAgent` plays scripted episodes on `trajforge serve` as its resources
server, each through NeMo Gym's `/run` (seed_session, the model's function calls as tool
calls, verify). The model server is a stand-in whose function calls are the scripts.

stdin: {"resources_url", "row": {...}, "episodes": {name: [action, ...]}}; stdout: one JSON
object {name: the verify response /run answered}.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import time

import httpx
import uvicorn
from fastapi import FastAPI, Request
from nemo_gym.config_types import BaseServerConfig, ModelServerRef, ResourcesServerRef
from nemo_gym.server_utils import ServerClient
from omegaconf import OmegaConf
from responses_api_agents.simple_agent.app import SimpleAgent, SimpleAgentConfig

HOST = "127.0.0.1"


def scripted_model(episodes: dict) -> FastAPI:
    """/v1/responses: the next action of the episode the user turn names, as a `step`
    function call, then a final message."""
    app = FastAPI()

    @app.post("/v1/responses")
    async def responses(request: Request):
        body = await request.json()
        turns = body["input"]
        name = next(t["content"] for t in turns if t.get("role") == "user")
        k = sum(1 for t in turns if t.get("type") == "function_call_output")
        actions = episodes[name]
        if k < len(actions):
            arguments = json.dumps({"action": actions[k]})
            output = [{"type": "function_call", "id": f"fc-{k}", "call_id": f"call-{k}", "name": "step",
                       "arguments": arguments, "status": "completed"}]  # fmt: skip
        else:
            output = [{"type": "message", "id": "msg", "role": "assistant", "status": "completed",
                       "content": [{"type": "output_text", "text": "done", "annotations": []}]}]  # fmt: skip
        return {"id": f"resp-{name}-{k}", "created_at": 0, "model": "scripted", "object": "response",
                "output": output, "parallel_tool_calls": False, "tool_choice": "auto", "tools": []}  # fmt: skip

    return app


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


async def start(app: FastAPI, port: int) -> uvicorn.Server:
    """`app` on `port`, in this event loop (NeMo Gym's aiohttp client belongs to one loop)."""
    server = uvicorn.Server(uvicorn.Config(app, host=HOST, port=port, log_level="warning"))
    asyncio.get_running_loop().create_task(server.serve())
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError(f"a server did not start on {port}")
        await asyncio.sleep(0.05)
    return server


async def main() -> None:
    spec = json.load(sys.stdin)
    host, port = spec["resources_url"].removeprefix("http://").split(":")
    model_port, agent_port = free_port(), free_port()
    servers = OmegaConf.create(
        {
            "trajforge": {"resources_servers": {"trajforge": {"host": host, "port": int(port)}}},
            "policy": {"responses_api_models": {"policy": {"host": HOST, "port": model_port}}},
            "gui_agent": {"responses_api_agents": {"simple_agent": {"host": HOST, "port": agent_port}}},
        }
    )
    client = ServerClient(head_server_config=BaseServerConfig(host=HOST, port=0), global_config_dict=servers)
    config = SimpleAgentConfig(
        host=HOST,
        port=agent_port,
        entrypoint="app.py",
        name="gui_agent",
        resources_server=ResourcesServerRef(type="resources_servers", name="trajforge"),
        model_server=ModelServerRef(type="responses_api_models", name="policy"),
        max_steps=10,
    )
    agent = SimpleAgent(config=config, server_client=client)
    running = [
        await start(scripted_model(spec["episodes"]), model_port),
        await start(agent.setup_webserver(), agent_port),
    ]
    out = {}
    async with httpx.AsyncClient(timeout=300) as http:
        for name in spec["episodes"]:
            row = {**spec["row"], "responses_create_params": {"input": [{"role": "user", "content": name}]}}
            answer = await http.post(f"http://{HOST}:{agent_port}/run", json=row)
            out[name] = (
                answer.json()
                if answer.is_success
                else {"status": answer.status_code, "text": answer.text[:2000]}
            )
    for server in running:
        server.should_exit = True
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main())
