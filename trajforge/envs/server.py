"""The environment server: any environment, over HTTP + JSON, for any RL trainer.

    POST   /v1/sessions               {env, task_id?, seed?, policy_id?, profile?, image_format?, next?}
                                      -> {session_id, observation, info}
    POST   /v1/sessions/{id}/step     {action, next?} -> {observation, reward, terminated, truncated, info}
    POST   /v1/sessions/{id}/reset    {task_id?, seed?, next?} -> {observation, info}
    DELETE /v1/sessions/{id}
    GET    /v1/envs                   environments and their tasks
    GET    /v1/health
    GET    /metrics                   Prometheus text

and the same sessions in other frameworks' protocols (trajforge/envs/protocols/): OpenEnv's
WebSocket at /openenv/{env}/ws, NeMo Gym's /seed_session, /step, /verify, /close_session.

Errors answer `{"error": {"kind", "message", "field"}}`: 4xx for the request
(naming the field), 409 for a session already running a call, 410 for a
session reaped or deleted, 429 with Retry-After when every session is in use,
503 when the environment itself failed (the episode is recorded as `error`,
never as a reward of 0; the next reset opens a fresh environment).

`next: {task_id?, seed?}` names the session's next episode: it is prepared in the
background (trajforge/envs/sessions.py, the warm pool), and the reset that asks for
exactly it is a hand-over; any other reset is cold. Counted by how each reset
started (warm, cold; cold ones that missed an announced episode) in /metrics and
/v1/health.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gymnasium
from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from pydantic import BaseModel, ConfigDict, Field

from schemas.model_profiles import PROFILES
from trajforge.envs.protocols.nemo_gym import add_nemo_gym_routes
from trajforge.envs.protocols.openenv import add_openenv_routes
from trajforge.envs.sessions import (
    BadRequest,
    EpisodeEnded,
    EpisodeKey,
    Session,
    SessionError,
    SessionPool,
    UnknownName,
)
from trajforge.envs.wire import ImageFormat, encode_observation, json_safe

LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32)


@dataclass(frozen=True)
class ServedEnv:
    """One environment the server offers: what it is and how to open it for a policy."""

    name: str
    open: Callable[[str | None, str | None], gymnasium.Env]  # (policy id, profile) -> a fresh env
    platform: str = "web"
    description: str = ""
    tasks: tuple[str, ...] = field(default=())  # empty: the environment makes up its own
    screen: tuple[int, int] | None = None  # (height, width) of its screenshots, when fixed
    # Sessions that may share a worker thread (and so a Playwright driver); 1: a thread each.
    sessions_per_thread: int = 1


class NextEpisode(BaseModel):
    """The episode the client will ask for at its next reset (prepared meanwhile)."""

    model_config = ConfigDict(extra="forbid")
    task_id: str | None = None
    seed: int | None = None


class NewSession(BaseModel):
    model_config = ConfigDict(extra="forbid")
    env: str
    task_id: str | None = None
    seed: int | None = None
    policy_id: str | None = None
    profile: str | None = None  # the model profile text answers are read in (default the env's)
    image_format: ImageFormat = "png"
    jpeg_quality: int = Field(85, ge=1, le=100)
    next: NextEpisode | None = None


class StepRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    action: dict[str, Any] | str
    next: NextEpisode | None = None


class ResetRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    task_id: str | None = None
    seed: int | None = None
    next: NextEpisode | None = None


class Metrics:
    def __init__(self, pool: SessionPool):
        self.registry = CollectorRegistry()
        r = self.registry
        Gauge("trajforge_env_sessions_open", "Sessions open", registry=r).set_function(pool.open_count)
        self.reset_s = Histogram(
            "trajforge_env_reset_seconds", "Reset latency", ["env"], buckets=LATENCY_BUCKETS, registry=r
        )
        self.step_s = Histogram(
            "trajforge_env_step_seconds", "Step latency", ["env"], buckets=LATENCY_BUCKETS, registry=r
        )
        self.errors = Counter("trajforge_env_errors", "Errors answered, by kind", ["kind"], registry=r)
        self.reaped = Counter("trajforge_env_sessions_reaped", "Sessions reaped when idle", registry=r)
        self.resets = Counter(
            "trajforge_env_resets",
            "Resets by how they started (warm: a hand-over)",
            ["env", "start"],
            registry=r,
        )
        self.missed = Counter(
            "trajforge_env_warm_misses", "Cold resets that asked for another episode than the one announced",
            ["env"], registry=r,
        )  # fmt: skip
        self.counts = {"warm": 0, "cold": 0, "missed": 0}  # the same, for /v1/health

    def count_reset(self, env: str, start: str, missed: bool) -> None:
        self.resets.labels(env, start).inc()
        self.counts[start] += 1
        if missed:
            self.missed.labels(env).inc()
            self.counts["missed"] += 1


def create_app(
    envs: dict[str, ServedEnv], *, max_sessions: int = 8, idle_timeout: float = 300.0, warm: bool = True
) -> FastAPI:
    """The ASGI app over `envs`; sessions on local threads (serve it with uvicorn). `warm`:
    announced next episodes are prepared on a spare environment per session."""
    pool = SessionPool(
        lambda name, policy, profile: envs[name].open(policy, profile),
        max_sessions=max_sessions,
        idle_timeout=idle_timeout,
        warm=warm,
        sessions_per_thread=lambda name: envs[name].sessions_per_thread,
    )
    metrics = Metrics(pool)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        reaper = asyncio.create_task(_reap_forever(pool, metrics, idle_timeout))
        try:
            yield
        finally:
            reaper.cancel()
            await run_in_threadpool(pool.close_all)

    app = FastAPI(title="trajforge environments", lifespan=lifespan)
    app.state.pool, app.state.metrics = pool, metrics

    @app.exception_handler(SessionError)
    async def _session_error(request: Request, exc: SessionError):
        metrics.errors.labels(exc.kind).inc()
        headers = {"Retry-After": str(round(exc.retry_after))} if exc.retry_after else None
        body = {"error": {"kind": exc.kind, "message": str(exc), "field": exc.field}}
        return JSONResponse(body, status_code=exc.status, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def _bad_body(request: Request, exc: RequestValidationError):
        metrics.errors.labels("bad_request").inc()
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"] if p != "body")
        body = {"error": {"kind": "bad_request", "message": f"{where}: {first['msg']}", "field": where}}
        return JSONResponse(body, status_code=422)

    calls = SessionCalls(envs, pool, metrics)
    app.state.calls = calls

    @app.post("/v1/sessions")
    async def new_session(req: NewSession):
        wire = {"image_format": req.image_format, "jpeg_quality": req.jpeg_quality}
        session, body = await calls.open(
            req.env,
            task_id=req.task_id,
            seed=req.seed,
            policy_id=req.policy_id,
            profile=req.profile,
            wire=wire,
            nxt=req.next,
        )
        return JSONResponse({"session_id": session.id, **body})

    @app.post("/v1/sessions/{session_id}/reset")
    async def reset(session_id: str, req: ResetRequest | None = None):
        req = req or ResetRequest()
        return JSONResponse(await calls.reset(pool.get(session_id), req.task_id, req.seed, req.next))

    @app.post("/v1/sessions/{session_id}/step")
    async def step(session_id: str, req: StepRequest):
        # Already JSON-safe: a JSONResponse skips FastAPI's jsonable_encoder (about as long
        # again as json_safe on an info with a hundred elements).
        return JSONResponse(await calls.step(pool.get(session_id), req.action, req.next))

    @app.delete("/v1/sessions/{session_id}")
    async def delete(session_id: str):
        await calls.close(session_id)
        return {"closed": session_id}

    @app.get("/v1/envs")
    async def list_envs():
        return {
            "envs": [
                {
                    "name": e.name,
                    "platform": e.platform,
                    "description": e.description,
                    "tasks": list(e.tasks),
                    "screen": list(e.screen) if e.screen else None,
                }
                for e in envs.values()
            ]
        }

    @app.get("/v1/health")
    async def health():
        return {
            "status": "ok",
            "sessions_open": pool.open_count(),
            "max_sessions": max_sessions,
            "warm_pool": warm,
            "resets": dict(metrics.counts),
        }

    @app.get("/metrics")
    async def prometheus():
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    add_openenv_routes(app, calls)
    add_nemo_gym_routes(app, calls)
    return app


class SessionCalls:
    """What every protocol's routes do on a session (this server's own, OpenEnv's, NeMo
    Gym's: trajforge/envs/protocols/): open, reset, step and close it, timed and counted."""

    def __init__(self, envs: dict[str, ServedEnv], pool: SessionPool, metrics: Metrics):
        self.envs, self.pool, self.metrics = envs, pool, metrics

    async def open(
        self,
        env: str,
        *,
        task_id: str | None = None,
        seed: int | None = None,
        policy_id: str | None = None,
        profile: str | None = None,
        wire: dict | None = None,
        nxt: NextEpisode | None = None,
    ) -> tuple[Session, dict]:
        """A new session and its first reset's `{observation, info}`."""
        if env not in self.envs:
            raise _unknown_env(env, self.envs)
        if profile is not None and profile not in PROFILES:
            raise UnknownName(f"no model profile {profile!r}; known: {', '.join(PROFILES)}", field="profile")
        session = self.pool.open(env, policy_id, wire or {"image_format": "png"}, profile)
        try:
            return session, await self.reset(session, task_id, seed, nxt)
        except BaseException:
            await run_in_threadpool(self.pool.close, session.id, "its first reset failed")
            raise

    async def reset(
        self, session: Session, task_id: str | None, seed: int | None, nxt: NextEpisode | None = None
    ) -> dict:
        """`{observation, info}`: the prepared episode when it is the one asked for (warm),
        else a reset on the session's environment (cold); then `nxt` is prepared."""
        t = time.perf_counter()
        fn = self._answer_reset(session, task_id, seed)
        announced = self._next_of(session, nxt)
        key = (task_id, seed)
        missed = self.pool.is_prepared(session) not in (None, key)
        answer = await self._handed_over(session, key)
        start = "warm" if answer is not None else "cold"
        if answer is None:
            answer = await self._on(session, fn, reset=True)
        obs, info, png = answer
        session.ended = False
        self.metrics.reset_s.labels(session.env_name).observe(time.perf_counter() - t)
        self.metrics.count_reset(session.env_name, start, missed)
        self._announce(session, announced)
        return {"observation": encode_observation(obs, **session.wire, captured=png), "info": json_safe(info)}

    async def step(self, session: Session, action: dict | str, nxt: NextEpisode | None = None) -> dict:
        """`{observation, reward, terminated, truncated, info}`, JSON-safe."""
        if session.ended:
            raise EpisodeEnded(f"session {session.id}: the episode has ended; reset it", field="session_id")
        announced = self._next_of(session, nxt)
        t = time.perf_counter()
        obs, reward, terminated, truncated, info, png = await self._on(
            session, lambda env: (*env.step(action), captured_png(env)), reset=False
        )
        session.ended = bool(terminated or truncated)
        self.metrics.step_s.labels(session.env_name).observe(time.perf_counter() - t)
        self._announce(session, announced)
        return {
            "observation": encode_observation(obs, **session.wire, captured=png),
            "reward": float(reward),
            "terminated": bool(terminated),
            "truncated": bool(truncated),
            "info": json_safe(info),
        }

    def _answer_reset(self, session: Session, task_id, seed, field: str = "task_id"):
        served = self.envs[session.env_name]
        if task_id is not None and served.tasks and task_id not in served.tasks:
            raise UnknownName(f"environment {served.name!r} has no task {task_id!r}", field=field)
        options = {"task_id": task_id} if task_id is not None else None
        return lambda env: (*env.reset(seed=seed, options=options), captured_png(env))

    def _next_of(self, session: Session, nxt: NextEpisode | None):
        """(the announced episode, how to reset to it), checked before the request runs."""
        if nxt is None:
            return None
        return (nxt.task_id, nxt.seed), self._answer_reset(session, nxt.task_id, nxt.seed, "next.task_id")

    def _announce(self, session: Session, announced) -> None:
        if announced is not None:
            self.pool.announce(session, *announced)

    async def _handed_over(self, session: Session, key: EpisodeKey):
        """The prepared episode's answer, or None when the reset is cold."""
        future = self.pool.hand_over(session, key)
        if future is None:
            return None
        try:
            answer = await asyncio.wrap_future(future)
        except BaseException as exc:
            self.pool.handed_over(session, ok=False)
            if isinstance(exc, ValueError):  # as a cold reset answers it
                raise BadRequest(str(exc), field="task_id") from exc
            raise
        self.pool.handed_over(session, ok=True)
        return answer

    async def close(self, session_id: str, why: str = "deleted by the client") -> None:
        await run_in_threadpool(self.pool.close, session_id, why)

    def count_error(self, kind: str) -> None:
        self.metrics.errors.labels(kind).inc()

    async def _on(self, session: Session, fn, *, reset: bool):
        try:
            return await asyncio.wrap_future(self.pool.call(session, fn, reset=reset))
        except ValueError as exc:  # the environment refused the request's values
            raise BadRequest(str(exc), field="task_id" if reset else "action") from exc


async def _reap_forever(pool: SessionPool, metrics: Metrics, idle_timeout: float) -> None:
    every = max(0.2, min(5.0, idle_timeout / 4))
    while True:
        await asyncio.sleep(every)
        metrics.reaped.inc(await run_in_threadpool(pool.reap_idle))


def captured_png(env: gymnasium.Env) -> bytes | None:
    """The screenshot the environment captured for its latest observation, when it is a
    PNG (a GuiEnv's crawler observation): encode_observation sends it as is when its size
    is the observation's. Read on the session's thread, right after the call."""
    seen = getattr(env.unwrapped, "observation", None)
    if seen is None or getattr(seen, "image_format", None) != "png":
        return None
    return getattr(seen, "screenshot", None)


def _unknown_env(name: str, envs: dict) -> SessionError:
    return UnknownName(f"no environment {name!r}; served: {', '.join(sorted(envs))}", field="env")
