"""Sampling G completions per prompt with the policy, for GRPO.

`encode_prompt` turns a reasoning-set sample into the processor's tensors for
its system and human turns, ending with the assistant header: the prompt SFT
trains on (training.data.render), so the policy acts as it learnt.
`sample_completions` left-pads a few prompts into one batch, samples
`group_size` completions of each with `model.generate` (pure sampling at
`temperature`: no top-k/top-p, so the sampling distribution is
softmax(logits / T), the one the log-probs describe), cuts each after its
first stop token and recomputes the sampling policy's log-probs of the
generated tokens by a no-grad forward pass (the same forward the update uses,
so on-policy ratios start at exactly 1). The image/video placeholder tokens
are never sampled (see `vision_token_ids`).

The result, `Rollouts`, keeps each prompt's tensors once and builds the model
inputs of any subset of rows on demand (micro-batches for the update).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from schemas.errors import SchemaError
from trajforge.vlm.messages import decode_image
from trajforge.vlm.transformers_backend import vision_token_ids

from .data import _conversation, render
from .grpo import sequence_logprobs

# Per-token tensors of a processor's output: left-padded with these values.
_TOKEN_KEYS = {"attention_mask": 0, "mm_token_type_ids": 0, "token_type_ids": 0}


# Config fields of Qwen2-VL / Qwen2.5-VL / Qwen3-VL naming their vision placeholder tokens.
def encode_prompt(
    processor, sample_json: dict, image: bytes, image_max_pixels: int | None = None
) -> dict[str, torch.Tensor]:
    """The processor's tensors (batch of one) for the sample's system and human turns and
    the assistant header: the exact prompt SFT trains on (training.data.render)."""
    if not image:
        raise SchemaError("sample has no image", field="image")
    system, human, gpt = _conversation(sample_json)
    prompt, _ = render(processor, system, human, gpt)
    img = decode_image(image, image_max_pixels)
    return dict(processor(text=[prompt], images=[img], return_tensors="pt"))


def stop_ids(model, tokenizer) -> list[int]:
    """Token ids that end a completion: the generation config's eos (one or a list) and
    the tokenizer's eos."""
    ids: set[int] = set()
    eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    for value in eos if isinstance(eos, (list, tuple)) else [eos]:
        if value is not None:
            ids.add(int(value))
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    return sorted(ids)


def pad_id_of(tokenizer) -> int:
    return tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id


@dataclass
class Rollouts:
    """N = prompts x group_size sampled rows; row r answers prompt `prompt_index[r]`.

    sequences [N, P + C]: left-padded prompt (width P) then the completion, padded
    after its stop token; gen_mask marks the generated tokens up to and including
    the stop token; old_logp their log-probs under the sampling policy (0 elsewhere).
    """

    prompts: list[dict[str, torch.Tensor]]
    prompt_index: list[int]
    sequences: torch.Tensor
    attention_mask: torch.Tensor
    gen_mask: torch.Tensor
    prompt_width: int
    texts: list[str]
    temperature: float
    old_logp: torch.Tensor | None = None
    extra: dict[str, torch.Tensor] = field(default_factory=dict)  # other per-token tensors

    @property
    def num_rows(self) -> int:
        return self.sequences.shape[0]

    def completion_lengths(self) -> torch.Tensor:
        return self.gen_mask.sum(-1)

    def model_inputs(self, rows: list[int] | None = None, device=None, dtype=None) -> dict[str, torch.Tensor]:
        """The forward-pass inputs of `rows` (all by default): token tensors sliced, the
        per-image tensors (pixel_values, image_grid_thw) of each row's prompt concatenated."""
        rows = list(range(self.num_rows)) if rows is None else list(rows)
        idx = torch.tensor(rows, dtype=torch.long)
        inputs = {"input_ids": self.sequences[idx], "attention_mask": self.attention_mask[idx]}
        inputs.update({k: v[idx] for k, v in self.extra.items()})
        per_image = [k for k in self.prompts[0] if k not in _TOKEN_KEYS and k != "input_ids"]
        for key in per_image:
            inputs[key] = torch.cat([self.prompts[self.prompt_index[r]][key] for r in rows], dim=0)
        if device is not None:
            inputs = {k: v.to(device) for k, v in inputs.items()}
        if dtype is not None and "pixel_values" in inputs:
            inputs["pixel_values"] = inputs["pixel_values"].to(dtype)
        return inputs

    def logprobs(self, model, rows: list[int] | None = None) -> torch.Tensor:
        """[len(rows), P + C] log-probs of the generated tokens under `model` (grad if enabled)."""
        rows = list(range(self.num_rows)) if rows is None else list(rows)
        device = next(model.parameters()).device
        inputs = self.model_inputs(rows, device=device, dtype=model.dtype)
        mask = self.gen_mask[torch.tensor(rows, dtype=torch.long)].to(device)
        return sequence_logprobs(model, inputs, mask, temperature=self.temperature)


def _left_pad(prompts: list[dict[str, torch.Tensor]], pad_id: int) -> dict[str, torch.Tensor]:
    """Left-pad the per-token tensors of batch-of-one encodings; concatenate the rest."""
    width = max(p["input_ids"].shape[1] for p in prompts)
    out = {}
    for key in prompts[0]:
        tensors = [p[key] for p in prompts]
        if key == "input_ids" or key in _TOKEN_KEYS:
            fill = pad_id if key == "input_ids" else _TOKEN_KEYS[key]
            out[key] = torch.cat(
                [
                    torch.cat([torch.full((1, width - t.shape[1]), fill, dtype=t.dtype), t], 1)
                    for t in tensors
                ],
                0,
            )
        else:
            out[key] = torch.cat(tensors, 0)
    return out


def _generated_mask(completion: torch.Tensor, stops: list[int]) -> torch.Tensor:
    """1 on each row's tokens up to and including its first stop token (all when none)."""
    is_stop = torch.isin(completion, torch.tensor(stops, dtype=completion.dtype, device=completion.device))
    # number of stop tokens strictly before t: 0 means t is still part of the answer
    before = torch.cumsum(is_stop.long(), dim=1) - is_stop.long()
    return (before == 0).long()


@torch.no_grad()
def sample_completions(
    model,
    processor,
    prompts: list[dict[str, torch.Tensor]],
    group_size: int,
    *,
    temperature: float = 1.0,
    max_new_tokens: int = 64,
    seed: int | None = None,
    old_logprobs: bool = True,
    logprob_batch: int | None = None,
) -> Rollouts:
    """`group_size` sampled completions of each prompt (rows grouped by prompt, in order).

    `old_logprobs` recomputes the sampling policy's log-probs (in chunks of
    `logprob_batch` rows); the model is in eval mode while sampling and put
    back in the mode it was in.
    """
    if temperature <= 0:
        raise ValueError(f"temperature={temperature}: GRPO needs sampling (temperature > 0)")
    if not prompts:
        raise ValueError("no prompts to sample from")
    tokenizer = processor.tokenizer
    pad_id = pad_id_of(tokenizer)
    stops = stop_ids(model, tokenizer)
    device = next(model.parameters()).device
    batch = _left_pad(prompts, pad_id)
    width = batch["input_ids"].shape[1]
    gen_inputs = {k: v.to(device) for k, v in batch.items()}
    if "pixel_values" in gen_inputs:
        gen_inputs["pixel_values"] = gen_inputs["pixel_values"].to(model.dtype)
    was_training = model.training
    model.eval()
    try:
        if seed is not None:
            torch.manual_seed(seed)
        out = model.generate(
            **gen_inputs,
            do_sample=True,
            temperature=temperature,
            top_k=0,
            top_p=1.0,
            max_new_tokens=max_new_tokens,
            num_return_sequences=group_size,
            pad_token_id=pad_id,
            eos_token_id=stops,
            suppress_tokens=vision_token_ids(model) or None,
            use_cache=True,
        ).cpu()
        completion = out[:, width:]
        gen = _generated_mask(completion, stops) if stops else torch.ones_like(completion)
        completion = torch.where(gen.bool(), completion, torch.full_like(completion, pad_id))
        n = out.shape[0]
        prompt_mask = batch["attention_mask"].repeat_interleave(group_size, 0)
        zeros = torch.zeros((n, width), dtype=torch.long)
        extra = {
            k: torch.cat(
                [
                    batch[k].repeat_interleave(group_size, 0),
                    torch.zeros_like(completion, dtype=batch[k].dtype),
                ],
                1,
            )
            for k in batch
            if k in _TOKEN_KEYS and k != "attention_mask"
        }
        texts = tokenizer.batch_decode(
            [row[m.bool()] for row, m in zip(completion, gen)], skip_special_tokens=True
        )
        rollouts = Rollouts(
            prompts=[{k: v.cpu() for k, v in p.items()} for p in prompts],
            prompt_index=[i for i in range(len(prompts)) for _ in range(group_size)],
            sequences=torch.cat([out[:, :width], completion], 1),
            attention_mask=torch.cat([prompt_mask, gen], 1),
            gen_mask=torch.cat([zeros, gen], 1),
            prompt_width=width,
            texts=texts,
            temperature=temperature,
            extra=extra,
        )
        if old_logprobs:
            step = logprob_batch or n
            rollouts.old_logp = torch.cat(
                [rollouts.logprobs(model, list(range(s, min(s + step, n)))).cpu() for s in range(0, n, step)],
                0,
            )
    finally:
        model.train(was_training)
    return rollouts
