"""ms-swift plugin (`--external_plugins` this file): trajforge's action-aware SFT loss.

Registers with ms-swift 4.6's own registries:

- loss scale `trajforge` (`--loss_scale trajforge`): ms-swift hands a loss scale the
  template's contexts, the messages and the row's extra columns (`inputs.extra_kwargs`,
  here the converter's `spans` column). The answer (the last assistant message) is
  split into runs of tokens of equal weight, each token weighed by
  training.token_weights from the characters it covers (1, alpha_action, alpha_coord),
  and handed back as token-id contexts. Token ids, not substrings: cutting the text at
  a span's characters would tokenise it differently from the whole answer (`"click`
  or ` 300` are single pre-tokens), so the model would learn tokenisations it never
  produces. The end-of-turn suffix weighs 1 without the template's trailing newline,
  as training.data trains it. The tokenizer is the model's own, from
  $TRAJFORGE_SWIFT_TOKENIZER (the model directory; training/engines/swift.py sets it).
- loss `trajforge_weighted` (`--loss_type trajforge_weighted`): ms-swift's own loss
  divides Σ w·nll by the number of trained tokens; this one by Σ w, the normalisation of
  training.loss.weighted_token_loss (see docs/training.md for gradient accumulation
  and several devices).

- template `trajforge_qwen2_vl`: ms-swift's qwen2_vl with the image pad ids of the
  model's own tokenizer (for a Qwen2-VL whose vocabulary is not Qwen's, e.g. the tiny one).

Alphas: $TRAJFORGE_ALPHA_ACTION, $TRAJFORGE_ALPHA_COORD (default 2 and 4).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch
from swift.loss.base import BaseLoss
from swift.loss.mapping import loss_map
from swift.loss_scale.base import LossScale
from swift.loss_scale.mapping import loss_scale_map
from swift.template.register import register_template
from swift.template.templates.qwen import Qwen2VLTemplate, QwenTemplateMeta

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # loaded by path: the repo's modules
from training.token_weights import ALPHA_ACTION, ALPHA_COORD, token_weights  # noqa: E402

LOSS_SCALE = "trajforge"
TEMPLATE = "trajforge_qwen2_vl"
LOSS_TYPE = "trajforge_weighted"
TOKENIZER_ENV = "TRAJFORGE_SWIFT_TOKENIZER"


def _alphas() -> tuple[float, float]:
    return (
        float(os.environ.get("TRAJFORGE_ALPHA_ACTION", ALPHA_ACTION)),
        float(os.environ.get("TRAJFORGE_ALPHA_COORD", ALPHA_COORD)),
    )


def parse_spans(value) -> dict[str, list[tuple[int, int]]]:
    """The `spans` column (JSON text or a dict) as {"action": [...], "coords": [...]}."""
    if isinstance(value, str):
        value = json.loads(value) if value else None
    if not isinstance(value, dict) or not all(isinstance(value.get(k), list) for k in ("action", "coords")):
        raise ValueError(f"row field `spans`: expected {{'action': [...], 'coords': [...]}}, got {value!r}")
    return {k: [(int(a), int(b)) for a, b in value[k]] for k in ("action", "coords")}


class SpanLossScale(LossScale):
    """Per-token scales of the answer from the row's `spans` column."""

    is_binary = False  # ms-swift then keeps `loss_scale` beside the labels

    def __init__(self, base_strategy="default"):
        super().__init__(base_strategy)
        self._tokenizer = None
        self._row = None  # (answer text, spans) of the row being encoded

    @property
    def tokenizer(self):
        if self._tokenizer is None:
            path = os.environ.get(TOKENIZER_ENV)
            if not path:
                raise ValueError(
                    f"loss_scale {LOSS_SCALE}: set ${TOKENIZER_ENV} to the model directory "
                    "(its tokenizer maps the spans' characters to tokens)"
                )
            from transformers import AutoTokenizer

            self._tokenizer = AutoTokenizer.from_pretrained(path)
        return self._tokenizer

    def __call__(self, context_list, context_types, messages, **kwargs):
        if "spans" not in kwargs:
            raise ValueError(
                f"loss_scale {LOSS_SCALE}: the row has no `spans` column (convert the set with "
                "`trajforge convert --to swift`)"
            )
        answers = [m["content"] for m in messages if m["role"] == "assistant" and m["content"] is not None]
        self._row = (answers[-1], parse_spans(kwargs["spans"])) if answers else None
        try:
            return super().__call__(context_list, context_types, messages, **kwargs)
        finally:
            self._row = None

    def get_loss_scale(self, context, **kwargs):
        if not isinstance(context, str):
            return super().get_loss_scale(context)
        if self._row is not None and context == self._row[0]:
            return self._answer_runs(*self._row)
        # The end-of-turn suffix: trained, its trailing newline not (as training.data).
        kept = context.rstrip()
        if kept and kept != context:
            return [kept, context[len(kept) :]], [1.0, 0.0]
        return [context], [1.0]

    def _answer_runs(self, answer: str, spans):
        enc = self.tokenizer(answer, add_special_tokens=False, return_offsets_mapping=True)
        for kind, items in spans.items():
            for a, b in items:
                if not 0 <= a < b <= len(answer):
                    raise ValueError(
                        f"row field `spans.{kind}`: [{a}, {b}] outside the answer ({len(answer)} chars)"
                    )
        weights = token_weights(enc["offset_mapping"], spans, *_alphas())
        runs, scales = [], []
        for token, weight in zip(enc["input_ids"], weights):
            if scales and scales[-1] == weight:
                runs[-1].append(token)
            else:
                runs.append([token])
                scales.append(weight)
        return runs, scales


class WeightedTokenLoss(BaseLoss):
    """Σ w·nll / Σ w over the micro-batch (w: ms-swift's loss_scale of each label)."""

    def __call__(self, outputs, labels, *, num_items_in_batch=None, loss_scale=None, **kwargs):
        from swift.trainers import per_token_loss_func

        if loss_scale is None:
            raise ValueError(f"loss_type {LOSS_TYPE} needs per-token scales: --loss_scale {LOSS_SCALE}")
        if self.trainer is not None and self.trainer.template.sequence_parallel_size > 1:
            raise ValueError(f"loss_type {LOSS_TYPE} does not support sequence parallelism")
        nll = per_token_loss_func(outputs, labels)  # flat, labels shifted (rolled) by one
        trained = torch.roll(labels, shifts=-1, dims=-1).reshape(-1) != -100
        w = torch.where(trained, loss_scale.reshape(-1).to(nll.dtype), torch.zeros_like(nll))
        total = w.sum()
        if total <= 0:
            raise ValueError("no trained token in the batch (all labels -100 or zero weight)")
        loss = (nll * w).sum() / total
        if num_items_in_batch is not None:
            # The trainer sums these over accumulation steps (and devices) and expects each
            # to be its share of num_items_in_batch: the token share of this micro-batch.
            loss = loss * (trained.sum() / num_items_in_batch)
        return loss


class VocabQwen2VLTemplate(Qwen2VLTemplate):
    """ms-swift's qwen2_vl template with the image and video pad ids read from the
    tokenizer: ms-swift hard-codes Qwen2-VL's (151655, 151656), so a Qwen2-VL with another
    vocabulary (the tiny model: 1024 words) got one pad per image instead of its grid."""

    def _init_placeholder_tokens(self):
        self.image_token_id = self.tokenizer.convert_tokens_to_ids("<|image_pad|>")
        self.video_token_id = self.tokenizer.convert_tokens_to_ids("<|video_pad|>")
        super()._init_placeholder_tokens()


register_template(QwenTemplateMeta(TEMPLATE, template_cls=VocabQwen2VLTemplate), exist_ok=True)
loss_scale_map[LOSS_SCALE] = SpanLossScale
loss_map[LOSS_TYPE] = WeightedTokenLoss
