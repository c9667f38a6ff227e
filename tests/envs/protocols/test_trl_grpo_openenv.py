"""TRL's GRPOTrainer over OpenEnv: `GRPOTrainer(environment_factory=...)` (trl 1.16) trains the
tiny Qwen2-VL on `trajforge serve`'s tiny app for one step, through training/engines/
trl_openenv.py's `GuiTools` (OpenEnv's GenericEnvClient; openenv-core in .venv,
scripts/setup_rl.sh) with image tool results and the processor's tool chat template
(trajforge/vlm/tool_template.py).

A random-weight model never writes a tool call, so the tiny model is first fitted (a few
dozen Adam steps) to answer each of the two prompts with one: a tap on Add (the verifier's
success) and `finish` (a failure). TRL's own loop then samples, parses, calls the tools,
feeds the screenshots back and trains; the rewards it logs are the environment's verdicts,
equal to `make()`'s for the same actions."""

from __future__ import annotations

import inspect
import json
import math
from functools import partial

import pytest

import trajforge.envs as tf_envs
from tests.envs import serving
from tests.envs.protocols.conftest import TASK, play_in_process
from tests.vlm.helpers import tiny_model_path
from training.engines.trl_openenv import GuiTools
from trajforge.store.raw import RawStore
from trajforge.vlm.tool_template import enable_tool_calling

pytestmark = pytest.mark.slow

PROMPTS = {"add": "Press the Add button.", "finish": "Say you are done."}


@pytest.fixture(scope="module")
def served(tiny_file, tmp_path_factory):
    """`trajforge serve` with a session for each of the trainer's four rollouts."""
    data = tmp_path_factory.mktemp("grpo-rollouts")
    with serving.serve(tiny_file, record_to=data, max_sessions=5) as server:
        yield {"url": server.url + "/openenv/tiny", "data": data}


@pytest.fixture(scope="module")
def processor():
    from trajforge.vlm.transformers_backend import load_processor

    return enable_tool_calling(load_processor(tiny_model_path()))


@pytest.fixture(scope="module")
def calls(scripted) -> dict:
    """The tool call each prompt's completion makes, and its text as the model writes it."""
    tap = scripted["episodes"]["add"][0]
    args = {"add": ("tap", {"x": tap["x"], "y": tap["y"]}), "finish": ("finish", {})}
    return {
        name: (
            tool,
            kw,
            f"<tool_call>\n{json.dumps({'name': tool, 'arguments': kw})}\n</tool_call><|im_end|>",
        )
        for name, (tool, kw) in args.items()
    }


def _rows() -> list[dict]:
    return [
        {"prompt": [{"role": "user", "content": text}], "task_id": TASK, "seed": 0}
        for text in PROMPTS.values()
    ]


def _tools(env) -> dict:
    """The environment's tools as TRL takes them (grpo_trainer: public functions of the class)."""
    names = [n for n, _ in inspect.getmembers(type(env), inspect.isfunction)]
    return {n: getattr(env, n) for n in names if n not in ("reset", "get_reward") and not n.startswith("_")}


def test_gui_tools_play_what_trl_parses(served, processor, calls, tiny_file):
    """The tool methods, called as TRL's loop calls them (the parsed call's name and
    arguments), play the served env: image results, the env's rewards, `make()`'s return."""
    from trl.chat_template_utils import parse_response

    expected = _make_returns(tiny_file)
    with GuiTools(served["url"], policy_id="grpo-direct") as env:
        for name, (tool, kw, text) in calls.items():
            first = env.reset(task_id=TASK, seed=0)
            assert first[0]["image"].size == (800, 600) and first[1]["text"] == "Task: Press Add once"
            tok = processor.tokenizer
            ids = tok(text, add_special_tokens=False)["input_ids"]
            prefix = tok("<|im_start|>assistant\n", add_special_tokens=False)["input_ids"]  # the prompt's end
            parsed = parse_response(tok, ids, prefix=prefix, tools=list(_tools(env).values()))
            call = parsed["tool_calls"][0]["function"]
            assert (call["name"], call["arguments"]) == (tool, kw)
            result = _tools(env)[call["name"]](**call["arguments"])
            assert result[0]["type"] == "image" and result[0]["image"].size == (800, 600)
            assert f"reward {expected[name]}, done True" in result[1]["text"]
            assert env.get_reward() == expected[name] and env.done
            assert "ended" in _tools(env)["tap"](x=1, y=1)[0]["text"] and env.rewards == [expected[name]]
    outcomes = _recorded(served, "grpo-direct")
    assert outcomes == ["failure", "success"]


def test_grpo_trainer_trains_on_the_served_env(served, processor, calls, tiny_file, tmp_path):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    model = _fit_tool_calls(processor, calls, served["url"])
    args = GRPOConfig(
        output_dir=str(tmp_path / "grpo"),
        use_cpu=True,
        max_steps=1,
        per_device_train_batch_size=4,
        num_generations=2,
        max_completion_length=160,
        max_tool_calling_iterations=1,
        temperature=0.5,
        beta=0.0,
        learning_rate=1e-4,
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        gradient_checkpointing=False,
        seed=0,
    )
    trainer = GRPOTrainer(
        model,
        args=args,
        train_dataset=Dataset.from_list(_rows()),
        processing_class=processor,
        environment_factory=partial(GuiTools, served["url"], policy_id="grpo-trl"),
    )
    trainer.train()
    envs = trainer._environment_pool[None]
    try:
        played = sorted((e.actions[0]["type"], e.get_reward()) for e in envs if e.actions)
    finally:
        for e in envs:
            e._close()
    expected = _make_returns(tiny_file)
    # Each prompt's two rollouts called its tool once; the episode then ended.
    assert played == [("done", expected["finish"])] * 2 + [("tap", expected["add"])] * 2
    assert expected == {"add": 1.0, "finish": 0.0}
    log = trainer.state.log_history[0]
    assert trainer.state.global_step == 1 and math.isfinite(log["loss"]) and log["num_tokens"] > 0
    # A prompt's two rollouts made the same call, so their advantages (and the update) are 0.
    assert log["frac_reward_zero_std"] == 1.0
    assert log["rewards/GuiTools/mean"] == pytest.approx(0.5) and log["reward"] == pytest.approx(0.5)
    assert log["tools/call_frequency"] >= 1.0 and log["tools/failure_frequency"] == 0.0
    assert _recorded(served, "grpo-trl") == ["failure", "failure", "success", "success"]


def _make_returns(tiny_file) -> dict:
    """`make()`'s episode return for each prompt's action on the same task and seed."""
    env = tf_envs.make(tiny_file)
    try:
        _, info = env.reset(seed=0, options={"task_id": TASK})
        tap = next(e for e in info["elements"] if e["role"] == "button" and e["name"] == "Add")
        x0, y0, x1, y1 = tap["bbox"]
        actions = {
            "add": [{"type": "tap", "x": (x0 + x1) / 2, "y": (y0 + y1) / 2}],
            "finish": [{"type": "done"}],
        }
        return {name: sum(play_in_process(env, a)) for name, a in actions.items()}
    finally:
        env.close()


def _recorded(served, policy: str) -> list[str]:
    trajs = RawStore(served["data"] / "raw").iter_trajectories("gym/tiny")
    return sorted(t.outcome for t in trajs if t.source_name.endswith(f":agent:{policy}"))


def _fit_tool_calls(processor, calls: dict, url: str):
    """The tiny model, fitted to answer each prompt (rendered as TRL renders it: the reset's
    screenshot and instruction appended, the tools in the system turn) with its tool call."""
    import torch
    from transformers import Qwen2VLForConditionalGeneration

    torch.manual_seed(0)
    model = Qwen2VLForConditionalGeneration.from_pretrained(tiny_model_path(), dtype=torch.float32)
    samples = []
    with GuiTools(url, policy_id="grpo-prep") as env:
        tools = list(_tools(env).values())
        for row, (_, _, text) in zip(_rows(), calls.values(), strict=True):
            observation = env.reset(task_id=row["task_id"], seed=row["seed"])
            prompt = [
                {
                    "role": "user",
                    "content": [{"type": "text", "text": row["prompt"][0]["content"]}, *observation],
                }
            ]
            enc = processor.apply_chat_template(
                [prompt],
                tools=tools,
                add_generation_prompt=True,
                tokenize=True,
                return_dict=True,
                return_tensors="pt",
            )
            target = processor.tokenizer(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
            ids = torch.cat([enc["input_ids"], target], dim=1)
            labels = torch.full_like(ids, -100)
            labels[:, -target.shape[1] :] = target
            extra = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels}
            if "mm_token_type_ids" in enc:  # the image tokens' marks, none in the answer
                extra["mm_token_type_ids"] = torch.cat(
                    [enc["mm_token_type_ids"], torch.zeros_like(target)], dim=1
                )
            samples.append({**enc, **extra})
    optim = torch.optim.Adam(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(300):
        losses = []
        for s in samples:
            loss = model(**s).loss
            loss.backward()
            losses.append(loss.item())
        optim.step()
        optim.zero_grad()
        if max(losses) < 0.002:
            break
    assert max(losses) < 0.002, losses
    return model
