"""Run by .venv-rl's Python (openenv-core 0.3.0) from test_openenv.py: OpenEnv's own
GenericEnvClient plays the scripted episodes on `trajforge serve` and prints what it saw.

stdin: {"base_url", "bad_url", "task_id", "episodes": {name: [action, ...]}}; stdout: one JSON
object. The episodes are played one after another on one connection (sync wrapper), then all
at once, one async client each.
"""

from __future__ import annotations

import asyncio
import base64
import json
import sys

from openenv.core.generic_client import GenericEnvClient


def main() -> None:
    spec = json.load(sys.stdin)
    out: dict = {"episodes": {}}
    with GenericEnvClient(base_url=spec["base_url"]).sync() as env:
        for name, actions in spec["episodes"].items():
            first = env.reset(seed=0, task_id=spec["task_id"], policy_id="openenv-test")
            shot = first.observation["screenshot"]
            played = {
                "reset_reward": first.reward,
                "reset_done": first.done,
                "screenshot": [shot["format"], shot["width"], shot["height"]],
                "png": base64.b64decode(shot["data"])[:8].hex(),
                "instruction": first.observation["instruction"],
                "rewards": [],
                "dones": [],
            }
            for action in actions:
                result = env.step(action)
                played["rewards"].append(result.reward)
                played["dones"].append(result.done)
                played["outcome"] = result.observation["info"].get("outcome")
                if result.done:
                    break
            played["state"] = env.state()
            out["episodes"][name] = played
        try:
            env.step({"type": "wait"})  # the episode has ended: the server says so
        except RuntimeError as exc:
            out["step_after_end"] = str(exc)
    try:
        with GenericEnvClient(base_url=spec["bad_url"]).sync() as env:
            env.reset()
    except RuntimeError as exc:
        out["unknown_env"] = str(exc)
    out["concurrent"] = asyncio.run(_at_once(spec))
    print(json.dumps(out))


async def _at_once(spec: dict) -> dict:
    async def play(actions: list) -> list:
        async with GenericEnvClient(base_url=spec["base_url"]) as env:
            await env.reset(seed=0, task_id=spec["task_id"], policy_id="openenv-async")
            return [(await env.step(action)).reward for action in actions]

    names = list(spec["episodes"])
    rewards = await asyncio.gather(*(play(spec["episodes"][n]) for n in names))
    return dict(zip(names, rewards, strict=True))


if __name__ == "__main__":
    main()
