"""Run by .venv-rl's Python (skyrl-gym 0.4.0, gem-llm 0.1.0, openrlhf 0.11.2) from
test_text_frameworks.py: one framework's own classes play scripted answer texts on
`trajforge serve` through its adapter (training/engines/{skyrl_gym_env,gem_env,
openrlhf_agent}.py) and print what they saw. The model is the only stand-in: the texts.

argv[1]: skyrl | gem | openrlhf. stdin: {"url", "env", "task_id", "episodes": {name:
[answer text, ...]}}; stdout: one JSON object {name: {...}, ...}.
"""

from __future__ import annotations

import asyncio
import importlib.machinery
import importlib.util
import json
import sys
import types
from copy import deepcopy
from pathlib import Path
from types import SimpleNamespace

import numpy as np
from PIL import Image


def skyrl(spec: dict) -> dict:
    import skyrl_gym
    from omegaconf import OmegaConf

    from training.engines.skyrl_gym_env import ENV_CLASS

    config = OmegaConf.create({"server_url": spec["url"], "policy_id": "skyrl-test"})
    out = {}
    for name, answers in spec["episodes"].items():
        # As SkyRL's generator makes one: the row's other fields as extras, max_turns added.
        row = {"extra_info": {"env": spec["env"], "task_id": spec["task_id"], "seed": 0}, "max_turns": 5}
        env = skyrl_gym.make(ENV_CLASS, env_config=config, extras=row)
        try:
            messages, meta = env.init([{"role": "user", "content": "the row's prompt"}])
            played = {"first": _turns(messages), "meta": meta, "rewards": [], "dones": [], "next": []}
            for text in answers:
                step = env.step(text)
                played["rewards"].append(step["reward"])
                played["dones"].append(step["done"])
                played["next"].append(_turns(step["observations"]))
                played["metadata"] = step["metadata"]
                if step["done"]:
                    break
        finally:
            env.close()
        out[name] = played
    # SkyRL's max_turns spent before the environment ends the episode: done, session deleted.
    env = skyrl_gym.make(ENV_CLASS, env_config=config, extras={**row, "max_turns": 1})
    env.init([])
    step = env.step(spec["episodes"]["idle"][0])
    env.close()
    out["max_turns_1"] = {"done": step["done"], "reward": step["reward"], "metadata": step["metadata"]}
    return out


def gem_(spec: dict) -> dict:
    import gem

    from training.engines.gem_env import ENV_ID
    from training.env_client import EnvFailed

    env = gem.make(
        ENV_ID, server_url=spec["url"], env=spec["env"], task_id=spec["task_id"], policy_id="gem-test"
    )
    out = {}
    try:  # one env object, one session: each reset starts the next episode on it
        for name, answers in spec["episodes"].items():
            obs, info = env.reset(seed=0)
            played = {
                "obs": obs,
                "image": list(info["image"].size),
                "render": list(env.render().shape),
                "env_instruction": info["env_instruction"][:200],
                "rewards": [],
                "terminated": [],
                "truncated": [],
            }
            for text in answers:
                obs, reward, terminated, truncated, info = env.step(text)
                played["rewards"].append(reward)
                played["terminated"].append(terminated)
                played["truncated"].append(truncated)
                played["outcome"] = info["outcome"]
                if terminated or truncated:
                    break
            out[name] = played
    finally:
        env.close()
    try:
        gem.make(ENV_ID, server_url=spec["url"], task_id=spec["task_id"])
    except ValueError as e:
        out["no_env"] = str(e)
    gone = gem.make(ENV_ID, server_url=spec["closed_url"], env=spec["env"])
    try:  # a server out of reach is the environment's failure: raised, never a reward
        gone.reset(seed=0)
    except EnvFailed as e:
        out["unreachable"] = [type(e).__name__, e.kind]
    finally:
        gone.close()
    return out


def openrlhf(spec: dict) -> dict:
    agent_api = _openrlhf_agent_api()
    from training.engines import openrlhf_agent

    assert issubclass(openrlhf_agent.AgentExecutor, agent_api.AgentExecutorBase)
    executor = openrlhf_agent.AgentExecutor(server_url=spec["url"], policy_id="openrlhf-test")
    out = {}
    for name, answers in spec["episodes"].items():
        label = json.dumps({"env": spec["env"], "task_id": spec["task_id"], "seed": 0})
        engine = ScriptedEngine(answers)
        params = SimpleNamespace(max_tokens=None, logprobs=None)  # vLLM's SamplingParams' fields it reads
        result = asyncio.run(
            executor.execute("the row's prompt", label, params, 1 << 16, ByteTokenizer(), engine, None)
        )
        out[name] = {
            "reward": result["reward"],
            "scores": float(result["scores"]),
            "turns": len(result["action_ranges"]),
            "prompts": engine.prompts,
            "images": [list(i.size) for i in result["images"]],
            "extra_logs": result["extra_logs"],
            # The instance's reset/step contract alone, step by step:
            "rewards": asyncio.run(_by_instance(openrlhf_agent, spec, label, answers)),
        }
    return out


async def _by_instance(module, spec: dict, label: str, answers: list[str]) -> list[float]:
    agent = module.GuiAgentInstance(server_url=spec["url"], policy_id="openrlhf-instance")
    await agent.reset({"observation": "the row's prompt", "label": label})
    rewards = []
    try:
        for text in answers:
            result = await agent.step({"observation_text": "", "action_text": text, "label": label})
            rewards.append(result["rewards"].item())
            if result["done"]:
                break
    finally:
        agent.close()
    return rewards


class ScriptedEngine:
    """The model: answers the episode's texts in order (what `llm_engine.generate` returns)."""

    def __init__(self, answers: list[str]):
        self.answers, self.prompts = list(answers), []

    async def generate(self, prompt_ids, sampling_params, multi_modal_data=None):
        self.prompts.append(bytes(prompt_ids).decode())
        text = self.answers[len(self.prompts) - 1]
        output = SimpleNamespace(
            token_ids=list(text.encode()), text=text, finish_reason="stop", logprobs=None
        )
        return SimpleNamespace(outputs=[output])


class ByteTokenizer:
    """The model's tokenizer: a byte per token, no chat template (.venv-rl has no torch)."""

    def __call__(self, text: str, add_special_tokens: bool = False, return_tensors: str | None = None):
        return {"input_ids": np.array([list(text.encode())], dtype=np.int64)}

    def decode(self, ids, skip_special_tokens: bool = False) -> str:
        return bytes(ids).decode()


def _openrlhf_agent_api():
    """openrlhf.utils.agent, the agent API's own module. openrlhf.utils' __init__ imports the
    trainer's stack (torch, transformers, sympy), which .venv-rl leaves out, so the package
    is entered without running it."""
    import openrlhf

    folder = Path(openrlhf.__file__).parent / "utils"
    package = types.ModuleType("openrlhf.utils")
    package.__path__ = [str(folder)]
    package.__spec__ = importlib.machinery.ModuleSpec("openrlhf.utils", None, is_package=True)
    sys.modules.setdefault("openrlhf.utils", package)
    return importlib.import_module("openrlhf.utils.agent")


def _turns(messages: list[dict]) -> list[dict]:
    """Messages as JSON: an image part as its size."""
    out = []
    for m in messages:
        content = m["content"]
        if isinstance(content, list):
            content = [
                {"type": "image", "size": list(p["image"].size)}
                if isinstance(p.get("image"), Image.Image)
                else deepcopy(p)
                for p in content
            ]
        out.append({"role": m["role"], "content": content})
    return out


if __name__ == "__main__":
    run = {"skyrl": skyrl, "gem": gem_, "openrlhf": openrlhf}[sys.argv[1]]
    print(json.dumps(run(json.load(sys.stdin)), default=str))
