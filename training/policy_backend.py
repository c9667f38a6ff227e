"""The policy being trained, as a trajforge VLM backend (training.agent.TextAgent drives it);
`policy_backend_for` loads a checkpoint directory as one.

`PolicyBackend` answers chat requests with an in-memory model and processor
(no reload between updates); its `model_id` is the checkpoint id, which the
rollouts record as their provenance. Its prompt is the reasoning set's
(`prompt = "reasoning_set"`): the agents read that attribute (training.agent.TextAgent
in the RL loops, crawlers.agent.AgentPolicy in a crawl), so a model trained on the set
acts with the prompt it learnt from, also through training.rollouts.rejection_sample,
which builds its own TextAgent per rollout.

With `record=True` every generate call keeps, per sample, the processor's
prompt tensors and the sampled answer token ids (cut after the first
end-of-turn token): online RL recomputes the log-probs of exactly what was
sampled, under the policy and the reference model (`answer_logprobs`).
Requests go through the model one at a time: an agent asks for one action per
step, and unpadded prompts make the recomputation exact.

Several episodes may play at once (rollouts on a pool's envs, one driver thread
each): `generate` holds a lock from its `torch.manual_seed` to the end of its
sampling, so a request's answer depends only on its prompt and seed, as when the
episodes play one after another; each recorded generation carries its request's
"episode" (the agent puts it in the metadata), and `take_generations(episode)`
hands back that episode's only, whichever thread asks and in whatever order the
episodes end.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path

import torch

from trajforge.vlm.backends import VLMRequest, check_sampling
from trajforge.vlm.transformers_backend import TransformersBackend, vision_token_ids

from .generation import stop_ids
from .precision import forward_context

log = logging.getLogger(__name__)


@dataclass
class Generation:
    """One request's prompt tensors (on CPU) and its sampled answers (token ids and text)."""

    request: VLMRequest
    prompt: dict[str, torch.Tensor]
    answer_ids: list[torch.Tensor] = field(default_factory=list)  # 1-D, one per sample
    texts: list[str] = field(default_factory=list)


class PolicyBackend:
    """A VLMBackend over `model` + `processor` (see the module docstring)."""

    def __init__(
        self,
        model,
        processor,
        model_id: str,
        *,
        max_image_pixels: int | None = None,
        prompt: str = "reasoning_set",
        set_mode: str = "direct",
        record: bool = False,
        mixed_precision: bool = True,
        profile: str | None = None,
    ):
        self.model = model
        self.mixed_precision = mixed_precision  # bf16 autocast over fp32 weights on cuda
        self.processor = processor
        self.prompt = prompt
        self.set_mode = set_mode
        # The reasoning set's model profile (its manifest's): the RL loops make their envs
        # with it (the env reads the answer in its frame, the agent frames the screenshot
        # to it). None: the default profile.
        self.profile = profile
        self.record = record
        self.generations: list[Generation] = []
        self._lock = threading.RLock()  # one generate at a time (the seed is torch's global)
        self._encoder = TransformersBackend.from_loaded(
            model, processor, model_id, max_image_pixels=max_image_pixels
        )
        self.tokenizer = self._encoder.tokenizer
        self.pad_id = self._encoder.pad_id
        self.stop_ids = stop_ids(model, self.tokenizer)

    @property
    def model_id(self) -> str:
        return self._encoder.model_id

    @model_id.setter
    def model_id(self, value: str) -> None:
        self._encoder._model_id = value

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def encode(self, request: VLMRequest) -> dict[str, torch.Tensor]:
        return self._encoder.encode(request)

    def take_generations(self, episode: str | None = None) -> list[Generation]:
        """The recorded generations not taken yet (and forget them), in the order they were
        made; with `episode`, only that episode's (its requests' metadata "episode")."""
        with self._lock:
            if episode is None:
                out, self.generations = self.generations, []
                return out
            out = [g for g in self.generations if g.request.metadata.get("episode") == episode]
            self.generations = [g for g in self.generations if g.request.metadata.get("episode") != episode]
            return out

    def generate(
        self,
        requests: list[VLMRequest],
        max_new_tokens: int,
        *,
        temperature: float = 0.0,
        n: int = 1,
        seed: int | None = None,
    ) -> list[str] | list[list[str]]:
        check_sampling(n, temperature)
        sample_kw = (
            {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0}
            if temperature > 0
            else {"do_sample": False, "temperature": None, "top_k": None, "top_p": None}
        )
        with self._lock:
            return self._generate(requests, max_new_tokens, sample_kw, n, seed)

    def _generate(
        self, requests: list[VLMRequest], max_new_tokens: int, sample_kw: dict, n: int, seed: int | None
    ) -> list[str] | list[list[str]]:
        was_training = self.model.training
        self.model.eval()
        results: list[list[str]] = []
        try:
            for i, req in enumerate(requests):
                enc = self.encode(req)
                batch = {k: v.to(self.device) for k, v in enc.items()}
                if "pixel_values" in batch:
                    batch["pixel_values"] = batch["pixel_values"].to(self.model.dtype)
                if seed is not None:
                    torch.manual_seed(seed + i)
                with torch.inference_mode(), forward_context(self.model, self.mixed_precision):
                    out = self.model.generate(
                        **batch,
                        max_new_tokens=max_new_tokens,
                        num_return_sequences=n,
                        pad_token_id=self.pad_id,
                        suppress_tokens=vision_token_ids(self.model) or None,
                        **sample_kw,
                    )
                answers = [self.trim(row) for row in out[:, batch["input_ids"].shape[1] :].cpu()]
                texts = self.tokenizer.batch_decode(answers, skip_special_tokens=True)
                if self.record:
                    self.generations.append(
                        Generation(req, {k: v.cpu() for k, v in enc.items()}, answers, texts)
                    )
                results.append(texts)
        finally:
            self.model.train(was_training)
        return [r[0] for r in results] if n == 1 else results

    def trim(self, ids: torch.Tensor) -> torch.Tensor:
        """The answer up to and including its first stop token (what follows is padding)."""
        stops = torch.isin(ids, torch.tensor(self.stop_ids)).nonzero() if self.stop_ids else torch.empty(0, 1)
        end = int(stops[0, 0]) + 1 if len(stops) else len(ids)
        return ids[:end].clone()


def answer_batch(
    prompt: dict[str, torch.Tensor], answer_ids: torch.Tensor, device=None
) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """(batch of one: prompt + answer, gen_mask [1, T] = 1 on the answer's tokens) for
    training.grpo.sequence_logprobs. Per-token keys are extended over the answer."""
    answer = answer_ids.reshape(1, -1).to(prompt["input_ids"].dtype)
    batch = dict(prompt)
    batch["input_ids"] = torch.cat([prompt["input_ids"], answer], dim=1)
    batch["attention_mask"] = torch.cat([prompt["attention_mask"], torch.ones_like(answer)], dim=1)
    for key in ("mm_token_type_ids", "token_type_ids"):  # text tokens: type 0
        if key in batch:
            batch[key] = torch.cat([prompt[key], torch.zeros_like(answer)], dim=1)
    gen_mask = torch.zeros_like(batch["input_ids"], dtype=torch.float32)
    gen_mask[:, prompt["input_ids"].shape[1] :] = 1.0
    if device is not None:
        batch = {k: v.to(device) for k, v in batch.items()}
        gen_mask = gen_mask.to(device)
    return batch, gen_mask


def answer_logprobs(
    model, prompt: dict[str, torch.Tensor], answer_ids: torch.Tensor, temperature: float = 1.0
) -> torch.Tensor:
    """Log-probs [len(answer)] of `answer_ids` after `prompt` (a Generation's tensors) under
    `model` at the sampling temperature; with grad unless the caller disables it."""
    from training.grpo import sequence_logprobs

    device = next(model.parameters()).device
    batch, gen_mask = answer_batch(prompt, answer_ids, device)
    if "pixel_values" in batch:
        batch["pixel_values"] = batch["pixel_values"].to(model.dtype)
    lp = sequence_logprobs(model, batch, gen_mask, temperature=temperature)
    return lp[0, prompt["input_ids"].shape[1] :]


def policy_backend_for(
    path: str | Path,
    *,
    device: str = "auto",
    dtype: str = "auto",
    image_max_pixels: int | None = None,
    set_mode: str = "direct",
    record: bool = False,
    profile: str | None = None,
):
    """A checkpoint directory as a PolicyBackend (reasoning-set prompt, id = checkpoint id);
    `profile`: the model profile of the set it was trained on (training.data.set_profile)."""
    from training.checkpoint import checkpoint_id_of, load_policy
    from training.config import resolve_model_path

    path = resolve_model_path(str(path))
    model, processor = load_policy(path, device=device, dtype=dtype, gradient_checkpointing=False)
    return PolicyBackend(
        model,
        processor,
        checkpoint_id_of(path),
        max_image_pixels=image_max_pixels,
        set_mode=set_mode,
        record=record,
        profile=profile,
    )
