"""A TRL environment over a served trajforge environment, played through OpenEnv's client.

TRL's `GRPOTrainer(environment_factory=...)` (trl 1.16) makes one instance per rollout (and
reuses them, calling `reset(**row)` before each): the instance's public methods are the
model's tools, `reset`'s return is appended to the prompt's last user turn, and
`get_reward()` scores the finished rollout. Here every instance holds one OpenEnv
`GenericEnvClient` WebSocket to `trajforge serve`'s `/openenv/ENV` (one trajforge session,
opened at the first reset), so

    from functools import partial
    from training.engines.trl_openenv import GuiTools
    trainer = GRPOTrainer(model, args=GRPOConfig(...), train_dataset=rows,  # prompt, task_id, seed
                          processing_class=enable_tool_calling(processor),  # trajforge.vlm.tool_template
                          environment_factory=partial(GuiTools, "http://envs:8700/openenv/tiny",
                                                      policy_id="ckpt-1200"))

- `reset(task_id=, seed=)` (the row's columns) starts an episode and returns the screenshot
  and the instruction as content parts (`{"type": "image", "image": PIL}`, text);
- the tools `tap`, `type_text`, `key`, `scroll`, `finish` send unified actions
  (schemas/actions.py) and return the next screenshot with the step's reward, `done` and
  outcome as text: TRL puts image tool results into the model's next input;
- `get_reward()` is the episode's return (the sum of the environment's step rewards, so
  the verifier's verdict), None when the environment failed (TRL leaves a None out of
  the reward); the episode is recorded by the server under `policy_id`.

A tool called after the episode ended answers so without a step. `actions` and `rewards`
keep what the rollout did. Imports openenv (openenv-core, scripts/setup_rl.sh) and PIL.
"""

from __future__ import annotations

import base64
import io
from typing import Any

from PIL import Image


class GuiTools:
    def __init__(self, base_url: str, *, policy_id: str | None = None, **reset_data: Any):
        """`base_url`: `http://HOST:PORT/openenv/ENV`; `reset_data`: more of every reset's data
        (`profile`, `image_format`, a default `task_id` or `seed`)."""
        self._base_url = base_url
        self._reset_data = {**reset_data, **({"policy_id": policy_id} if policy_id else {})}
        self._client = None
        self.actions: list[dict] = []
        self.rewards: list[float] = []
        self.done = False
        self.failed: str | None = None

    def reset(self, task_id: str | None = None, seed: int | None = None, **row: Any) -> list[dict]:
        """Start an episode of `task_id` (else the environment's next) at `seed`."""
        if self._client is None:
            from openenv.core.generic_client import GenericEnvClient

            self._client = GenericEnvClient(base_url=self._base_url).sync()
            self._client.connect()
        data = dict(self._reset_data)
        data.update({k: v for k, v in (("task_id", task_id), ("seed", seed)) if v is not None})
        self.actions, self.rewards, self.done, self.failed = [], [], False, None
        result = self._client.reset(**data)
        obs = result.observation
        return [_image(obs), {"type": "text", "text": f"Task: {obs.get('instruction') or ''}"}]

    def tap(self, x: float, y: float) -> list:
        """Tap (click) a point of the screen.

        Args:
            x: The point's x coordinate, in screenshot pixels from the left.
            y: The point's y coordinate, in screenshot pixels from the top.
        """
        return self._act({"type": "tap", "x": float(x), "y": float(y)})

    def type_text(self, text: str) -> list:
        """Type text into the focused field.

        Args:
            text: The text to type.
        """
        return self._act({"type": "type", "text": text})

    def key(self, name: str) -> list:
        """Press a key.

        Args:
            name: The key's name, such as Enter, Tab, Escape or Backspace.
        """
        return self._act({"type": "key", "text": name})

    def scroll(self, direction: str) -> list:
        """Scroll the screen.

        Args:
            direction: One of up, down, left, right.
        """
        return self._act({"type": "scroll", "direction": direction})

    def finish(self) -> list:
        """Say that the task is done."""
        return self._act({"type": "done"})

    def get_reward(self) -> float | None:
        """The episode's return; None when the environment failed."""
        return None if self.failed else float(sum(self.rewards))

    def _act(self, action: dict) -> list:
        if self._client is None or self.done:
            return [{"type": "text", "text": "The episode has ended: no more actions."}]
        self.actions.append(action)
        try:
            result = self._client.step(action)
        except RuntimeError as exc:  # OpenEnv's client raises the server's errors
            if "EXECUTION_ERROR" in str(exc):  # env_failed: the episode has no verdict
                self.failed, self.done = str(exc), True
            raise
        self.rewards.append(float(result.reward or 0.0))
        self.done = bool(result.done)
        info = result.observation.get("info") or {}
        text = f"reward {result.reward}, done {self.done}"
        if info.get("outcome"):
            text += f", outcome {info['outcome']}"
        return [_image(result.observation), {"type": "text", "text": text}]

    def __enter__(self) -> GuiTools:
        return self

    def __exit__(self, *exc) -> None:
        self._close()

    def _close(self) -> None:
        """Close the WebSocket (the server records an episode in play as the client's failure)."""
        if self._client is not None:
            self._client.close()
            self._client = None


def _image(observation: dict) -> dict:
    shot = observation["screenshot"]
    img = Image.open(io.BytesIO(base64.b64decode(shot["data"]))).convert("RGB")
    return {"type": "image", "image": img}
