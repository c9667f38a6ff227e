"""RemoteEnv: the gymnasium interface over the environment server's HTTP API.

    env = RemoteEnv("http://127.0.0.1:8700", "tiddlywiki", policy_id="run-17")
    obs, info = env.reset(options={"task_id": "create_tiddler"})
    obs, reward, terminated, truncated, info = env.step({"type": "tap", "x": 512, "y": 300})
    env.close()

A trainer that knows its next episode announces it, and the server prepares it
while this one plays (the warm pool: the reset that asks for it is a hand-over):

    env.announce_next(task_id="create_tiddler", seed=8)   # sent with the next request
    obs, info = env.reset(seed=8, options={"task_id": "create_tiddler"})

The server's errors come back as RemoteEnvError with its status, kind and
field; a 503 (the environment failed) is never turned into a reward.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import httpx
import numpy as np
from gymnasium import spaces

from trajforge.envs.spaces import GuiActions
from trajforge.envs.wire import ImageFormat, decode_observation


class RemoteEnvError(RuntimeError):
    def __init__(self, status: int, kind: str, message: str, field: str | None):
        super().__init__(f"{status} {kind}: {message}")
        self.status, self.kind, self.field = status, kind, field


class RemoteEnv(gymnasium.Env):
    metadata = {"render_modes": ["rgb_array"]}

    def __init__(
        self,
        url: str,
        env: str,
        *,
        policy_id: str | None = None,
        profile: str | None = None,
        image_format: ImageFormat = "png",
        timeout: float = 120.0,
    ):
        self.url, self.env_name, self.policy_id, self.profile = url.rstrip("/"), env, policy_id, profile
        self.image_format = image_format
        self._http = httpx.Client(base_url=self.url, timeout=timeout)
        self.session_id: str | None = None
        self._last: dict | None = None
        self._next: dict | None = None  # the next episode, to announce with the next request
        height, width = self._screen()
        self.observation_space = spaces.Dict(
            {
                "screenshot": spaces.Box(0, 255, shape=(height, width, 3), dtype=np.uint8),
                "a11y": spaces.Text(max_length=1 << 20),
                "instruction": spaces.Text(max_length=1 << 16),
                "url": spaces.Text(max_length=1 << 14),
            }
        )
        self.action_space = GuiActions(width, height)  # the served env's: sample() gives a random action
        self.render_mode = "rgb_array"

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        task_id = (options or {}).get("task_id")
        if self.session_id is None:
            body = self._post(
                "/v1/sessions",
                {
                    "env": self.env_name,
                    "task_id": task_id,
                    "seed": seed,
                    "policy_id": self.policy_id,
                    "profile": self.profile,
                    "image_format": self.image_format,
                    **self._announced(),
                },
            )
            self.session_id = body["session_id"]
        else:
            body = self._post(
                f"/v1/sessions/{self.session_id}/reset",
                {"task_id": task_id, "seed": seed, **self._announced()},
            )
        obs = self._observe(body)
        return obs, body["info"]

    def step(self, action: dict | str):
        if self.session_id is None:
            raise RuntimeError("call reset() before step()")
        body = self._post(f"/v1/sessions/{self.session_id}/step", {"action": action, **self._announced()})
        obs = self._observe(body)
        return obs, body["reward"], body["terminated"], body["truncated"], body["info"]

    def announce_next(self, task_id: str | None = None, seed: int | None = None) -> None:
        """Name the episode the next reset will ask for (`options={"task_id": task_id}`,
        `seed`): sent with the next request, the server prepares it meanwhile. A reset that
        asks for another one is a cold reset, as without an announcement."""
        self._next = {"task_id": task_id, "seed": seed}

    def _announced(self) -> dict:
        announced, self._next = self._next, None
        return {"next": announced} if announced is not None else {}

    def render(self):
        return None if self._last is None else self._last["screenshot"]

    def close(self):
        if self.session_id is not None:
            try:
                self._http.delete(f"/v1/sessions/{self.session_id}")
            finally:
                self.session_id = None
        self._http.close()

    def _screen(self) -> tuple[int, int]:
        answer = self._http.get("/v1/envs")
        answer.raise_for_status()
        for served in answer.json()["envs"]:
            if served["name"] == self.env_name:
                return tuple(served["screen"] or (1, 1))
        names = ", ".join(e["name"] for e in answer.json()["envs"])
        raise RemoteEnvError(404, "unknown_name", f"{self.url} serves no {self.env_name!r} ({names})", "env")

    def _observe(self, body: dict) -> dict:
        self._last = decode_observation(body["observation"])
        return self._last

    def _post(self, path: str, payload: dict[str, Any]) -> dict:
        answer = self._http.post(path, json=payload)
        if answer.status_code >= 400:
            try:
                err = answer.json()["error"]
            except (ValueError, KeyError, TypeError):
                err = {"kind": "http", "message": answer.text[:500], "field": None}
            raise RemoteEnvError(answer.status_code, err["kind"], err["message"], err.get("field"))
        return answer.json()
