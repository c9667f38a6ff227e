"""OpenEnv's contract on `trajforge serve`: OpenEnv's own clients play any served environment.

OpenEnv (openenv-core) clients hold one WebSocket per episode stream at `{base_url}/ws`
and send `{"type": "reset"|"step"|"state"|"close", "data": ...}`; the server answers
`{"type": "observation", "data": {observation, reward, done}}`, `{"type": "state", "data"}`
or `{"type": "error", "data": {message, code}}`. So

    from openenv.core.generic_client import GenericEnvClient
    with GenericEnvClient(base_url="http://envs:8700/openenv/tiddlywiki").sync() as env:
        result = env.reset(seed=0, task_id="open-control-panel")
        result = env.step({"type": "tap", "x": 1180, "y": 96})   # or {"answer": "<model text>"}

Each WebSocket is one trajforge session (opened at its first reset, whose data may also
name `policy_id`, `profile`, `image_format`; closed with the socket). A step's data is a
unified action dict (an OpenEnv Action's empty `metadata` dropped) or `{"answer": text}`,
a model's text answer. The observation is the server's (`screenshot` {format, width,
height, data: base64}, `a11y`, `instruction`, `url`) plus `info`; `done` is terminated or
truncated, both also sent beside it. `/ws` without the prefix plays the one environment
of a server that serves one.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, WebSocket, WebSocketDisconnect

from trajforge.envs.sessions import SessionError, UnknownName

if TYPE_CHECKING:
    from trajforge.envs.server import SessionCalls
    from trajforge.envs.sessions import Session

PREFIX = "/openenv"
# SessionError kinds as OpenEnv's WSErrorCode values (openenv.core.env_server.types).
_CODES = {
    "full": "CAPACITY_REACHED",
    "bad_request": "VALIDATION_ERROR",
    "unknown_name": "VALIDATION_ERROR",
    "env_failed": "EXECUTION_ERROR",
}
_FIRST_RESET_KEYS = ("policy_id", "profile", "image_format", "jpeg_quality")


def add_openenv_routes(app: FastAPI, calls: SessionCalls) -> None:
    @app.websocket(PREFIX + "/{env}/ws")
    async def openenv_ws(websocket: WebSocket, env: str):
        await _play(websocket, calls, env)

    @app.websocket("/ws")
    async def openenv_ws_single(websocket: WebSocket):
        await _play(websocket, calls, _the_one(calls))

    @app.get(PREFIX + "/{env}/health")
    async def openenv_health(env: str):
        _served(calls, env)
        return {"status": "healthy"}

    @app.get(PREFIX + "/{env}/metadata")
    async def openenv_metadata(env: str):
        served = _served(calls, env)
        return {"name": served.name, "description": served.description or f"{served.name} (trajforge)"}


class _Stream:
    """One OpenEnv client's episodes: a trajforge session, opened at the first reset."""

    def __init__(self, calls: SessionCalls, env: str):
        self.calls, self.env = calls, env
        self.session: Session | None = None
        self.steps = 0
        self.info: dict = {}
        self.task_id: str | None = None

    async def reset(self, data: dict) -> dict:
        task_id, seed = data.get("task_id"), data.get("seed")
        if self.session is None:
            first = {k: data[k] for k in _FIRST_RESET_KEYS if data.get(k) is not None}
            wire = {k: first.pop(k) for k in ("image_format", "jpeg_quality") if k in first}
            self.session, body = await self.calls.open(
                self.env, task_id=task_id, seed=seed, wire=wire, **first
            )
        else:
            body = await self.calls.reset(self.session, task_id, seed)
        self.steps, self.info = 0, body["info"]
        self.task_id = (self.info.get("task") or {}).get("task_id")
        return _result(body, reward=None, terminated=False, truncated=False)

    async def step(self, data: dict) -> dict:
        if self.session is None:
            raise UnknownName("no episode yet: send a reset first", field="type")
        body = await self.calls.step(self.session, _action(data))
        self.steps += 1
        self.info = body["info"]
        return _result(
            body, reward=body["reward"], terminated=body["terminated"], truncated=body["truncated"]
        )

    def state(self) -> dict:
        return {
            "episode_id": self.info.get("trajectory_id"),
            "step_count": self.steps,
            "env": self.env,
            "task_id": self.task_id,
            "session_id": self.session.id if self.session else None,
        }

    async def close(self) -> None:
        if self.session is not None:
            try:
                await self.calls.close(self.session.id, "the OpenEnv client closed its connection")
            except SessionError:
                pass  # reaped meanwhile


async def _play(websocket: WebSocket, calls: SessionCalls, env: str) -> None:
    await websocket.accept()
    stream = _Stream(calls, env)
    try:  # an unknown env is said at the first reset, as any bad request
        while True:
            try:
                message = json.loads(await websocket.receive_text())
            except json.JSONDecodeError as exc:
                await websocket.send_json(_error(f"Invalid JSON: {exc}", "INVALID_JSON"))
                continue
            kind, data = message.get("type"), message.get("data") or {}
            try:
                if kind == "reset":
                    reply = {"type": "observation", "data": await stream.reset(data)}
                elif kind == "step":
                    reply = {"type": "observation", "data": await stream.step(data)}
                elif kind == "state":
                    reply = {"type": "state", "data": stream.state()}
                elif kind == "close":
                    break
                else:
                    reply = _error(f"Unknown message type: {kind!r}", "UNKNOWN_TYPE")
            except SessionError as exc:
                calls.count_error(exc.kind)
                reply = _error(
                    str(exc), _CODES.get(exc.kind, "SESSION_ERROR"), kind=exc.kind, field=exc.field
                )
            await websocket.send_json(reply)
    except WebSocketDisconnect:
        pass
    finally:
        await stream.close()
        try:
            await websocket.close()
        except RuntimeError:
            pass  # already closed by the client


def _action(data: dict) -> dict | str:
    """A unified action dict, or a model's text answer sent as `{"answer": text}`."""
    answer = data.get("answer")
    if isinstance(answer, str) and "type" not in data:
        return answer
    action = dict(data)
    if not action.get("metadata"):
        action.pop("metadata", None)  # an OpenEnv Action's model_dump() always has one
    return action


def _result(body: dict, *, reward: float | None, terminated: bool, truncated: bool) -> dict:
    observation = {**body["observation"], "info": body["info"]}
    done = bool(terminated or truncated)
    return {
        "observation": observation,
        "reward": reward,
        "done": done,
        "terminated": terminated,
        "truncated": truncated,
    }


def _error(message: str, code: str, **more: Any) -> dict:
    return {"type": "error", "data": {"message": message, "code": code, **more}}


def _served(calls: SessionCalls, env: str):
    if env not in calls.envs:
        raise UnknownName(f"no environment {env!r}; served: {', '.join(sorted(calls.envs))}", field="env")
    return calls.envs[env]


def _the_one(calls: SessionCalls) -> str:
    if len(calls.envs) == 1:
        return next(iter(calls.envs))
    return f"(one of {', '.join(sorted(calls.envs))}: connect to {PREFIX}/ENV/ws)"
