"""Run in .venv-trainers by tests/envs/test_verl_agent_loop.py: verl 0.9's own rollout path
over training.engines.verl_agent_loop.GuiAgentLoop, with the tiny Qwen2-VL as the model server.

    python verl_rollout.py SERVER_URL MODEL_DIR WORK_DIR

verl's side is verl's: its config (ppo_trainer.yaml composed by hydra, the loop named
through `rollout.agent.agent_loop_config_path`), RLHFDataset and collate_fn over the
parquet training.engines.env_tasks writes, AgentLoopWorker (hydra-instantiates the loop by
`agent_name`, pads and post-processes every AgentLoopOutput into one DataProto),
LLMServerClient (verl's client of its model servers). What stands in is the model
server behind that client, which runs outside verl's loop anyway: `TinyReplica` is
the vLLM replica actor (token-in, token-out: the tiny model's `generate` on CPU over
the prompt ids and images it is sent) and `Balancer` the global load-balancer actor,
both awaited as Ray handles are (`handle.method.remote(...)`).

Prints one JSON line: per episode the raw AgentLoopOutput (before verl pads it), the
model's generations for it, and what the DataProto batch holds for it.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import torch
import verl
from hydra import compose, initialize_config_dir
from transformers import AutoModelForImageTextToText, AutoProcessor
from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
from verl.protocol import DataProto
from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn
from verl.workers.rollout.llm_server import LLMServerClient
from verl.workers.rollout.replica import TokenOutput

from training.engines.env_tasks import write_env_tasks

URL, MODEL, WORK = sys.argv[1], sys.argv[2], Path(sys.argv[3])
MAX_TOKENS_PER_TURN = 24


class _Remote:
    """`handle.method.remote(...)`, awaited: as a Ray actor method is called."""

    def __init__(self, fn):
        self.remote = fn


class TinyReplica:
    """The model server: generate from token ids (and the images their pads stand for)."""

    def __init__(self, path: str):
        torch.manual_seed(0)
        self.model = AutoModelForImageTextToText.from_pretrained(path, dtype=torch.float32).eval()
        self.processor = AutoProcessor.from_pretrained(path)
        tok = self.processor.tokenizer
        self.stop = [tok.convert_tokens_to_ids("<|im_end|>"), tok.convert_tokens_to_ids("<|endoftext|>")]
        # Random weights would now and then emit a vision placeholder, which a trained model
        # never writes (its pads would then outnumber the images): those are never sampled.
        vision = ("<|vision_start|>", "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>")
        self.suppress = [tok.convert_tokens_to_ids(t) for t in vision]
        self.calls: list[dict] = []
        self.lock = asyncio.Lock()
        self.generate = _Remote(self._generate)

    async def _generate(self, *, request_id, prompt_ids, sampling_params, image_data=None, **kwargs):
        async with self.lock:  # one model, one request at a time
            loop = asyncio.get_running_loop()
            out = await loop.run_in_executor(
                None, self._run, list(prompt_ids), dict(sampling_params), image_data
            )
        self.calls.append(
            {"prompt_ids": list(prompt_ids), "token_ids": out.token_ids, "images": len(image_data or [])}
        )
        return out

    def _run(self, prompt_ids, params, images) -> TokenOutput:
        inputs = {
            "input_ids": torch.tensor([prompt_ids]),
            "attention_mask": torch.ones(1, len(prompt_ids), dtype=torch.long),
        }
        if images:
            inputs.update(self.processor.image_processor(images=images, return_tensors="pt"))
        temperature = float(params.get("temperature") or 0.0)
        with torch.no_grad():
            gen = self.model.generate(
                **inputs,
                max_new_tokens=int(params["max_tokens"]),
                do_sample=temperature > 0,
                temperature=temperature if temperature > 0 else None,
                top_p=float(params.get("top_p", 1.0)) if temperature > 0 else None,
                top_k=None,
                eos_token_id=self.stop,
                pad_token_id=self.stop[-1],
                suppress_tokens=self.suppress,
                output_logits=True,
                return_dict_in_generate=True,
            )
        new = gen.sequences[0, len(prompt_ids) :].tolist()
        logprobs = [
            float(torch.log_softmax(step[0].float(), dim=-1)[t])
            for step, t in zip(gen.logits, new, strict=True)
        ]
        return TokenOutput(
            token_ids=new,
            log_probs=logprobs if params.get("logprobs") else None,
            stop_reason="completed",
            num_preempted=0,
            extra_fields={"global_steps": 0},
        )


class Balancer:
    """verl's global load balancer actor: one replica."""

    def __init__(self, replica: TinyReplica):
        async def fields():
            return []

        async def acquire(request_id, **kwargs):
            return "replica-0", replica

        self.require_acquire_fields = _Remote(fields)
        self.require_release_fields = _Remote(fields)
        self.acquire_server = _Remote(acquire)
        self.release_server = _Remote(lambda **kwargs: None)


def verl_config():
    (WORK / "agent_loop.yaml").write_text(
        "- name: trajforge_gui\n"
        "  _target_: training.engines.verl_agent_loop.GuiAgentLoop\n"
        f"  server_url: {URL}\n"
        f"  max_tokens_per_turn: {MAX_TOKENS_PER_TURN}\n"
    )
    config_dir = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        return compose(
            config_name="ppo_trainer",
            overrides=[
                f"actor_rollout_ref.model.path={MODEL}",
                "actor_rollout_ref.rollout.name=vllm",
                "actor_rollout_ref.rollout.calculate_log_probs=True",
                f"actor_rollout_ref.rollout.agent.agent_loop_config_path={WORK / 'agent_loop.yaml'}",
                "data.max_prompt_length=2048",
                "data.max_response_length=2048",
                "trainer.experiment_name=verl-loop-test",
            ],
        )


async def main() -> dict:
    config = verl_config()
    replica = TinyReplica(MODEL)
    worker = AgentLoopWorker(config, LLMServerClient(config, load_balancer_handle=Balancer(replica)))

    rows = write_env_tasks(URL, WORK / "train.parquet", seed=7)
    dataset = RLHFDataset(
        data_files=[str(WORK / "train.parquet")],
        tokenizer=worker.tokenizer,
        config=config.data,
        processor=worker.processor,
    )
    batch = DataProto.from_single_dict(collate_fn([dataset[i] for i in range(len(dataset))]))

    raw: dict[int, dict] = {}
    postprocess = AgentLoopWorker._agent_loop_postprocess

    async def keep_raw(self, output, validate, **kwargs):
        raw[int(kwargs["extra_info"]["index"])] = output.model_dump(exclude={"multi_modal_data"}) | {
            "image_sizes": [list(im.size) for im in output.multi_modal_data["images"]],
        }
        return await postprocess(self, output, validate, **kwargs)

    AgentLoopWorker._agent_loop_postprocess = keep_raw
    out = await worker.generate_sequences(batch)

    tok = worker.tokenizer
    b, nt = out.batch, out.non_tensor_batch
    episodes = []
    for i in range(len(out)):
        index = int(nt["extra_info"][i]["index"])
        ids = raw[index]["prompt_ids"] + raw[index]["response_ids"]
        calls = [c for c in replica.calls if ids[: len(c["prompt_ids"])] == c["prompt_ids"]]
        prompt_len = b["prompts"].shape[1]
        attention = b["attention_mask"][i]
        episodes.append(
            {
                "raw": raw[index],
                "calls": calls,
                "agent_name": nt["agent_name"][i],
                "extra_info": {k: v for k, v in nt["extra_info"][i].items()},
                "vision_start": tok.convert_tokens_to_ids("<|vision_start|>"),
                "image_pad": tok.convert_tokens_to_ids("<|image_pad|>"),
                "batch": {
                    "responses": b["responses"][i].tolist(),
                    "response_mask": b["response_mask"][i].tolist(),
                    "prompts": b["prompts"][i].tolist(),
                    "prompt_attention": attention[:prompt_len].tolist(),
                    "response_attention": attention[prompt_len:].tolist(),
                    "rm_scores": b["rm_scores"][i].tolist(),
                    "rollout_log_probs": b["rollout_log_probs"][i].tolist(),
                    "position_ids_shape": list(b["position_ids"][i].shape),
                    "image_grid_thw": nt["multi_modal_inputs"][i]["image_grid_thw"].tolist(),
                    "num_turns": int(nt["__num_turns__"][i]),
                    "trajectory_id": nt["trajectory_id"][i],
                },
            }
        )
    return {"rows": rows, "episodes": episodes, "batch_keys": sorted(b.keys())}


print(json.dumps(asyncio.run(main()), default=str))
