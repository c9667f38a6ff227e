"""NeMo Gym's resources-server contract on `trajforge serve`: a NeMo Gym agent plays any
served environment as it plays a resources server.

A NeMo Gym rollout (its `simple_agent`, nemo_gym 0.4.0) posts the dataset row to
`/seed_session`, each of the model's function calls to `/{tool name}` with the call's
arguments, then `{responses_create_params, response, ...row}` to `/verify`, forwarding
the cookies each answer set. So:

    POST /seed_session   {env?, task_id?, seed?, policy_id?, ...row}  -> {session_id, observation, info}
                         (sets the `trajforge_session` cookie, as every answer of the `step` tool
                         does again: the agents forward the latest answer's cookies only;
                         `env` may be left out when one is served)
    POST /step           {action}: the tool; a unified action dict or the model's text answer
                         -> {observation, reward, terminated, truncated, info}
    POST /verify         {responses_create_params, response, ...} -> the request's fields and
                         {reward, mask_sample, outcome, reason, trajectory_id, env_steps, failure}
    POST /close_session  -> {closed}

`/verify` ends an episode the policy left open with a `done` action, so the environment's
verifier judges the end state; `reward` is the episode's return (its rewards summed, as
`make()` gives them). A session whose environment failed (a 503 on a step) verifies as
`mask_sample: true` with reward 0.0 and the failure: NeMo RL keeps a masked sample out of
the gradient, so an environment error is never a reward. `/verify` closes the session.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict

from trajforge.envs.sessions import EnvFailed, SessionError, UnknownName, UnknownSession

if TYPE_CHECKING:
    from trajforge.envs.server import SessionCalls
    from trajforge.envs.sessions import Session

COOKIE = "trajforge_session"


class SeedSession(BaseModel):
    model_config = ConfigDict(extra="allow")  # the rest of the row (responses_create_params, ...)
    env: str | None = None
    task_id: str | None = None
    seed: int | None = None
    policy_id: str | None = None
    profile: str | None = None


class StepTool(BaseModel):
    model_config = ConfigDict(extra="forbid")
    action: dict[str, Any] | str


@dataclass
class _Episode:
    session: Session
    episode_return: float = 0.0
    steps: int = 0
    info: dict = field(default_factory=dict)
    failure: str | None = None


def add_nemo_gym_routes(app: FastAPI, calls: SessionCalls) -> None:
    episodes: dict[str, _Episode] = {}

    def episode_of(request: Request) -> _Episode:
        sid = request.cookies.get(COOKIE)
        if sid is None:
            raise UnknownSession(f"no {COOKIE} cookie: POST /seed_session first", field=COOKIE)
        try:
            calls.pool.get(sid)  # 410 when reaped or closed
        except SessionError:
            episodes.pop(sid, None)
            raise
        if sid not in episodes:
            raise UnknownSession(f"session {sid} was not seeded through /seed_session", field=COOKIE)
        return episodes[sid]

    def forget_reaped() -> None:
        for sid in [sid for sid in episodes if not calls.pool.has(sid)]:
            episodes.pop(sid, None)

    @app.post("/seed_session")
    async def seed_session(req: SeedSession):
        forget_reaped()
        env = req.env or _the_one(calls)
        session, body = await calls.open(
            env, task_id=req.task_id, seed=req.seed, policy_id=req.policy_id, profile=req.profile
        )
        episodes[session.id] = _Episode(session, info=body["info"])
        return _with_cookie(JSONResponse({"session_id": session.id, **body}), session.id)

    @app.post("/step")
    async def step_tool(req: StepTool, request: Request):
        episode = episode_of(request)
        sid = episode.session.id
        try:
            body = await calls.step(episode.session, req.action)
        except SessionError as exc:  # the tool's answer to the model; the session goes on
            if isinstance(exc, EnvFailed):
                episode.failure = episode.failure or str(exc)
            calls.count_error(exc.kind)
            error = {"error": {"kind": exc.kind, "message": str(exc), "field": exc.field}}
            return _with_cookie(JSONResponse(error, status_code=exc.status), sid)
        episode.episode_return += body["reward"]
        episode.steps += 1
        episode.info = body["info"]
        return _with_cookie(JSONResponse(body), sid)

    @app.post("/verify")
    async def verify(request: Request):
        episode = episode_of(request)
        verdict = await _judge(calls, episode)
        episodes.pop(episode.session.id, None)
        try:
            await calls.close(episode.session.id, "verified")
        except SessionError:
            pass  # reaped meanwhile
        return JSONResponse({**(await _json(request)), **verdict})

    @app.post("/close_session")
    async def close_session(request: Request):
        episode = episode_of(request)
        episodes.pop(episode.session.id, None)
        await calls.close(episode.session.id)
        return {"closed": episode.session.id}


def _with_cookie(answer: JSONResponse, session_id: str) -> JSONResponse:
    # NeMo Gym's agents forward the cookies of the latest answer only (as its own session
    # middleware sets them on every answer), so every answer sets it again.
    answer.set_cookie(COOKIE, session_id, httponly=True)
    return answer


async def _judge(calls: SessionCalls, episode: _Episode) -> dict:
    """The episode's verdict; a `done` action first when the policy left it open."""
    if episode.failure is None and not episode.session.ended:
        try:
            body = await calls.step(episode.session, {"type": "done"})
            episode.episode_return += body["reward"]
            episode.steps += 1
            episode.info = body["info"]
        except EnvFailed as exc:
            episode.failure = str(exc)
    failed = episode.failure is not None
    info = episode.info
    return {
        "reward": 0.0 if failed else episode.episode_return,
        "mask_sample": failed,
        "failure": episode.failure,
        "outcome": "error" if failed else info.get("outcome"),
        "reason": info.get("reason"),
        "trajectory_id": info.get("trajectory_id"),
        "env_steps": episode.steps,
    }


async def _json(request: Request) -> dict:
    try:
        body = await request.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _the_one(calls: SessionCalls) -> str:
    if len(calls.envs) != 1:
        raise UnknownName(f"name the env: this server serves {', '.join(sorted(calls.envs))}", field="env")
    return next(iter(calls.envs))
