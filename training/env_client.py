"""An asyncio client of the environment server (`trajforge serve`), for rollout loops that
run as coroutines (verl's agent loops share one event loop per worker).

`trajforge.envs.RemoteEnv` is the same API as a (blocking) gymnasium.Env; this client
needs only httpx and PIL, so it loads in a trainer's venv where neither gymnasium nor
a browser is installed. The wire format is docs/rl-environments.md's: the screenshot
comes back as a PIL image, everything else as the server's JSON. `EnvClient` is its
blocking twin, for frameworks whose environments step synchronously (SkyRL-Gym, GEM;
training/engines/gui_episode.py plays a session as a text policy's turns).

The server's errors raise EnvServerError (status, kind, field); EnvFailed, one of them,
when the environment itself failed (503: a crashed browser; the server records the
episode as `error`) or the server could not be reached: the episode is lost, and a
caller may play it again on a new session. A 429 (every session in use) is waited
out, as its Retry-After says, up to `open_timeout` seconds: with many rollouts in
flight, sessions free up as episodes end. Nothing here turns an error into a reward.
"""

from __future__ import annotations

import asyncio
import base64
import io
import time
from dataclasses import dataclass
from typing import Any

import httpx
from PIL import Image


class EnvServerError(RuntimeError):
    def __init__(self, status: int, kind: str, message: str, field: str | None = None):
        super().__init__(f"{status} {kind}: {message}")
        self.status, self.kind, self.field = status, kind, field


class EnvFailed(EnvServerError):
    """The environment failed (503) or the server was out of reach (status 0)."""


@dataclass
class Answer:
    """One answer of the server: the observation (screenshot as a PIL image), and for a
    step the reward and the episode's end."""

    observation: dict[str, Any]
    info: dict[str, Any]
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated


class AsyncEnvClient:
    """Sessions on one server. `async with AsyncEnvClient(url) as c: ...` or `await c.aclose()`."""

    def __init__(
        self,
        url: str,
        *,
        timeout: float = 120.0,
        open_timeout: float = 600.0,
        max_connections: int = 64,
    ):
        self.url = url.rstrip("/")
        self.open_timeout = open_timeout
        limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
        self._http = httpx.AsyncClient(base_url=self.url, timeout=timeout, limits=limits)

    async def __aenter__(self) -> AsyncEnvClient:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def envs(self) -> list[dict]:
        answer = await self._send("GET", "/v1/envs")
        _raise_for(answer)
        return answer.json()["envs"]

    async def open(
        self,
        env: str,
        *,
        task_id: str | None = None,
        seed: int | None = None,
        policy_id: str | None = None,
        profile: str | None = None,
        image_format: str = "png",
    ) -> tuple[str, Answer]:
        """A new session and its first reset: (session id, the reset's answer)."""
        body = _open_body(env, task_id, seed, policy_id, profile, image_format)
        deadline = time.monotonic() + self.open_timeout
        answer = await self._send("POST", "/v1/sessions", body)
        while (wait := _full_wait(answer, deadline)) is not None:
            await asyncio.sleep(wait)
            answer = await self._send("POST", "/v1/sessions", body)
        _raise_for(answer)
        data = answer.json()
        return data["session_id"], _answer(data)

    async def step(self, session_id: str, action: dict | str) -> Answer:
        answer = await self._send("POST", f"/v1/sessions/{session_id}/step", {"action": action})
        _raise_for(answer)
        return _answer(answer.json())

    async def close(self, session_id: str) -> None:
        """Delete the session (an episode still open is recorded as a failure that says so)."""
        answer = await self._send("DELETE", f"/v1/sessions/{session_id}")
        if answer.status_code not in (200, 404, 410):
            _raise_for(answer)

    async def _send(self, method: str, path: str, body: dict | None = None) -> httpx.Response:
        try:
            return await self._http.request(method, path, json=body)
        except httpx.TransportError as e:
            raise EnvFailed(0, "unreachable", f"{method} {self.url}{path}: {type(e).__name__}: {e}") from e


class EnvClient:
    """AsyncEnvClient's blocking twin, plus `reset` of a session already open (an env object
    that plays many episodes keeps its session). `with EnvClient(url) as c: ...`."""

    def __init__(self, url: str, *, timeout: float = 120.0, open_timeout: float = 600.0):
        self.url = url.rstrip("/")
        self.open_timeout = open_timeout
        self._http = httpx.Client(base_url=self.url, timeout=timeout)

    def __enter__(self) -> EnvClient:
        return self

    def __exit__(self, *exc) -> None:
        self.disconnect()

    def disconnect(self) -> None:
        self._http.close()

    def open(
        self,
        env: str,
        *,
        task_id: str | None = None,
        seed: int | None = None,
        policy_id: str | None = None,
        profile: str | None = None,
        image_format: str = "png",
    ) -> tuple[str, Answer]:
        """A new session and its first reset: (session id, the reset's answer)."""
        body = _open_body(env, task_id, seed, policy_id, profile, image_format)
        deadline = time.monotonic() + self.open_timeout
        answer = self._send("POST", "/v1/sessions", body)
        while (wait := _full_wait(answer, deadline)) is not None:
            time.sleep(wait)
            answer = self._send("POST", "/v1/sessions", body)
        _raise_for(answer)
        data = answer.json()
        return data["session_id"], _answer(data)

    def reset(self, session_id: str, *, task_id: str | None = None, seed: int | None = None) -> Answer:
        answer = self._send("POST", f"/v1/sessions/{session_id}/reset", {"task_id": task_id, "seed": seed})
        _raise_for(answer)
        return _answer(answer.json())

    def step(self, session_id: str, action: dict | str) -> Answer:
        answer = self._send("POST", f"/v1/sessions/{session_id}/step", {"action": action})
        _raise_for(answer)
        return _answer(answer.json())

    def close(self, session_id: str) -> None:
        """Delete the session (an episode still open is recorded as a failure that says so)."""
        answer = self._send("DELETE", f"/v1/sessions/{session_id}")
        if answer.status_code not in (200, 404, 410):
            _raise_for(answer)

    def _send(self, method: str, path: str, body: dict | None = None) -> httpx.Response:
        try:
            return self._http.request(method, path, json=body)
        except httpx.TransportError as e:
            raise EnvFailed(0, "unreachable", f"{method} {self.url}{path}: {type(e).__name__}: {e}") from e


def _open_body(env, task_id, seed, policy_id, profile, image_format) -> dict:
    return {
        "env": env,
        "task_id": task_id,
        "seed": seed,
        "policy_id": policy_id,
        "profile": profile,
        "image_format": image_format,
    }


def _answer(data: dict) -> Answer:
    """A reset's or a step's JSON as an Answer (a reset has no reward)."""
    return Answer(
        decode_observation(data["observation"]),
        data["info"],
        float(data.get("reward") or 0.0),
        bool(data.get("terminated", False)),
        bool(data.get("truncated", False)),
    )


def decode_observation(wire: dict) -> dict:
    """The observation with its screenshot as an RGB PIL image."""
    obs = dict(wire)
    shot = wire["screenshot"]
    obs["screenshot"] = Image.open(io.BytesIO(base64.b64decode(shot["data"]))).convert("RGB")
    return obs


def _full_wait(answer: httpx.Response, deadline: float) -> float | None:
    """Seconds to wait before asking again for a session the full server refused (429),
    within the deadline; None: ask no more (answered, or out of time)."""
    if answer.status_code != 429 or time.monotonic() >= deadline:
        return None
    return min(_retry_after(answer), max(0.0, deadline - time.monotonic()))


def _retry_after(answer: httpx.Response) -> float:
    try:
        return max(0.2, min(10.0, float(answer.headers.get("Retry-After", 1))))
    except ValueError:
        return 1.0


def _raise_for(answer: httpx.Response) -> None:
    if answer.status_code < 400:
        return
    try:
        err = answer.json()["error"]
    except (ValueError, KeyError, TypeError):
        err = {"kind": "http", "message": answer.text[:500], "field": None}
    error = EnvFailed if answer.status_code == 503 else EnvServerError
    raise error(answer.status_code, err.get("kind", "http"), err.get("message", ""), err.get("field"))
