"""The reasoning set as model inputs: streamed samples, chat-templated, weighted labels.

A sample (synthesis.set_writer) holds `conversations` (system, human, gpt; the human
text starts with "<image>\\n") and `spans` ({"action": [[s, e], ...], "coords": [...]}:
character offsets into the gpt text). `encode_sample` renders the processor's chat
template with the screenshot in place of the marker, and tokenises the prompt
(through the processor: image tokens expanded) and the answer (through the fast
tokenizer, with offsets) separately, so that every answer token's characters are
known exactly. A token overlapping a coordinates span weighs α_g, else one
overlapping an action span α_a, else 1; the prompt is labelled -100. The answer
ends with the template's end-of-turn token (weight 1) so the model learns to stop.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import torch

from schemas.errors import SchemaError
from schemas.model_profiles import manifest_profile
from training.token_weights import token_weights
from trajforge.publish.shards import MANIFEST, read_manifest
from trajforge.read.loader import read_split
from trajforge.vlm.messages import decode_image

IGNORE = -100
IMAGE_MARKER = "<image>"
# Per-token tensors (right-padded by collate, with these fill values); the rest
# (pixel_values, image_grid_thw) are per image patch / per image and are concatenated.
_TOKEN_FILL = {
    "input_ids": None,
    "attention_mask": 0,
    "labels": IGNORE,
    "weights": 0.0,
    "mm_token_type_ids": 0,
    "token_type_ids": 0,
}


class ReasoningSample(tuple):
    """(key, json, image bytes), with `.source`: the shard file it came from."""

    def __new__(cls, key: str, sample_json: dict, image: bytes | None, source: str):
        obj = super().__new__(cls, (key, sample_json, image))
        obj.source = source
        return obj

    @property
    def key(self) -> str:
        return self[0]

    @property
    def json(self) -> dict:
        return self[1]

    @property
    def image(self) -> bytes | None:
        return self[2]


def iter_reasoning_samples(
    shards_dir: str | Path,
    split: str = "train",
    mode: str | None = None,
    *,
    rank: int = 0,
    world_size: int = 1,
) -> Iterator[ReasoningSample]:
    """Stream the samples of one split, shard by shard (never all in memory), through
    the documented loader (trajforge.read.loader.read_split).

    `mode` keeps only "direct" or "reason" samples. Under DDP each rank takes every
    world_size-th sample (after the mode filter), so ranks see disjoint data.
    """
    n = 0
    for sample in read_split(shards_dir, split):
        j = sample["json"]
        if mode is not None and j.get("mode") != mode:
            continue
        if n % world_size == rank:
            yield ReasoningSample(sample["key"], j, sample["image"], str(Path(shards_dir) / sample["shard"]))
        n += 1


TEMPLATE_BACKEND = "template"  # synthesis.step_cot.TEMPLATE: the thoughts a template wrote


class TemplateThoughtsError(ValueError):
    """A full training run was asked to learn template-written thoughts."""


def thought_backend_share(shards_dir: str | Path) -> dict[str, float]:
    """{thought backend: share of the samples} of a reasoning set: the manifest's
    summary.thought_backend_share, else its summary.thought_backends counts (sets written
    before the share was stated), else counted over the samples' own `thought_backend`
    (a sample without one counts as "unknown"). {} for a set without samples."""
    shards_dir = Path(shards_dir)
    manifest = json.loads((shards_dir / MANIFEST).read_text(encoding="utf-8"))
    summary = manifest.get("summary") or {}
    share = summary.get("thought_backend_share")
    if isinstance(share, dict) and share:
        return {str(k): float(v) for k, v in share.items()}
    counts = summary.get("thought_backends")
    if not (isinstance(counts, dict) and counts):
        counts = {}
        for split in sorted({s["split"] for s in manifest.get("shards", [])}):
            for sample in read_split(shards_dir, split):
                backend = str(sample["json"].get("thought_backend") or "unknown")
                counts[backend] = counts.get(backend, 0) + 1
    total = sum(counts.values())
    return {str(k): v / total for k, v in sorted(counts.items())} if total else {}


def template_thought_gate(
    shards_dir: str | Path, *, full_run: bool, trains_thoughts: bool, allow: bool
) -> dict[str, Any]:
    """Refuse (TemplateThoughtsError) a full run that trains on thoughts when any of the
    set's thoughts were written by the template backend, unless `allow`
    (config allow_template_thoughts). Returns what the run reports about it:
    thought_backend_share, template_share and template_thoughts ("none", "not trained",
    "tiny model", "allowed")."""
    share = thought_backend_share(shards_dir)
    template = share.get(TEMPLATE_BACKEND, 0.0)
    out = {"thought_backend_share": share, "template_share": template}
    if template == 0.0:
        return {**out, "template_thoughts": "none"}
    if not trains_thoughts:
        return {**out, "template_thoughts": "not trained"}
    if not full_run:
        return {**out, "template_thoughts": "tiny model"}
    if allow:
        return {**out, "template_thoughts": "allowed"}
    raise TemplateThoughtsError(
        f"{shards_dir}: {template:.0%} of the set's thoughts were written by the template backend "
        f"(thought backends {share}); a full training run on reason-then-act samples would teach "
        "that fixed phrasing as reasoning. Write the thoughts with a VLM (cot_steps with a model), "
        "train direct-act samples only (mode_filter: direct), or set "
        "allow_template_thoughts: true to train on them anyway."
    )


class FrameMismatchError(ValueError):
    """A full training run would feed the set's images in another frame than its answers'."""


def set_profile(shards_dir: str | Path):
    """The model profile a set's manifest names (schemas.model_profiles.ModelProfile), or
    None for a set written before profiles (answers in pixels of the stored screenshot).
    Training, evaluation (training.evaluate.run_eval) and the agent it plays read it here."""
    return manifest_profile(read_manifest(Path(shards_dir)))


def frame_gate(shards_dir: str | Path, image_max_pixels: int | None, *, full_run: bool) -> dict[str, Any]:
    """Does this run feed the set's images in the frame its answers are written in?

    A set written for a profile stores each image at that profile's frame (a
    smart_resize size, so the processor leaves it alone); an image_max_pixels cap
    below its largest image (manifest `frames.max_pixels`, else the profile's
    max_pixels) would shrink some images again and move every
    pixel answer of theirs (grid answers are relative and survive). A set that names
    no profile has its answers in pixels of the stored screenshot, which the
    processor resizes. A full run raises FrameMismatchError for either; the tiny
    random-weights model only reports it. Returns {"model_profile", "frame"
    ("kept", "no profile", "capped")} for the run's metrics."""
    manifest = read_manifest(Path(shards_dir))
    profile = set_profile(shards_dir)
    largest = (manifest.get("frames") or {}).get("max_pixels")
    if profile is not None and not isinstance(largest, int):
        largest = profile.max_pixels  # not stated: as large as the profile allows
    if profile is None:
        problem, status = (
            (
                "its manifest names no model profile: the answers are pixels of the "
                "stored screenshot, and the processor's smart_resize moves them; write "
                "the set again (write_reasoning_set with ReasoningSetOptions(profile=...))"
            ),
            "no profile",
        )
    elif profile.coords == "pixels" and image_max_pixels is not None and image_max_pixels < largest:
        problem, status = (
            (
                f"it is written for {profile.name} (images up to {largest} "
                f"pixels, answers in their pixels) but image_max_pixels="
                f"{image_max_pixels} shrinks them out of that frame; set "
                f"image_max_pixels >= {largest} (or null), or write the "
                f"set for a profile with max_pixels <= {image_max_pixels}"
            ),
            "capped",
        )
    else:
        return {"model_profile": profile.name, "frame": "kept"}
    if full_run:
        raise FrameMismatchError(f"{shards_dir}: {problem}")
    return {"model_profile": None if profile is None else profile.name, "frame": status, "detail": problem}


def shuffled(samples: Iterable, buffer: int, seed: int) -> Iterator:
    """A seeded shuffle through a bounded buffer (buffer <= 1: the stream order)."""
    if buffer <= 1:
        yield from samples
        return
    rng = random.Random(seed)
    pool: list = []
    for s in samples:
        pool.append(s)
        if len(pool) >= buffer:
            yield pool.pop(rng.randrange(len(pool)))
    rng.shuffle(pool)
    yield from pool


def _conversation(sample_json: dict) -> tuple[str | None, str, str]:
    """(system, human text without the image marker, gpt text), checked."""
    conv = sample_json.get("conversations")
    if not isinstance(conv, list) or not conv:
        raise SchemaError("missing or empty", field="conversations")
    by_role: dict[str, str] = {}
    for i, turn in enumerate(conv):
        if not isinstance(turn, dict) or not isinstance(turn.get("value"), str):
            raise SchemaError("turn without a text value", field=f"conversations[{i}].value")
        if turn.get("from") not in ("system", "human", "gpt") or turn["from"] in by_role:
            raise SchemaError(
                f"unexpected or repeated role {turn.get('from')!r} (one system, human, gpt)",
                field=f"conversations[{i}].from",
            )
        by_role[turn["from"]] = turn["value"]
    for role in ("human", "gpt"):
        if role not in by_role:
            raise SchemaError(f"no {role} turn", field="conversations")
    human = by_role["human"]
    if not human.startswith(IMAGE_MARKER):
        raise SchemaError(f"human text does not start with {IMAGE_MARKER!r}", field="conversations.human")
    return by_role.get("system"), human[len(IMAGE_MARKER) :].lstrip("\n"), by_role["gpt"]


def _spans(sample_json: dict, gpt_len: int) -> dict[str, list[tuple[int, int]]]:
    spans = sample_json.get("spans")
    if not isinstance(spans, dict) or "action" not in spans or "coords" not in spans:
        raise SchemaError("missing (need {'action': [...], 'coords': [...]})", field="spans")
    out = {}
    for kind in ("action", "coords"):
        if not isinstance(spans[kind], list):
            raise SchemaError("not a list of [start, end]", field=f"spans.{kind}")
        out[kind] = []
        for i, span in enumerate(spans[kind]):
            ok = (
                isinstance(span, (list, tuple))
                and len(span) == 2
                and all(isinstance(x, int) for x in span)
                and 0 <= span[0] < span[1] <= gpt_len
            )
            if not ok:
                raise SchemaError(
                    f"{span!r} is not [start, end] inside the gpt text ({gpt_len} chars)",
                    field=f"spans.{kind}[{i}]",
                )
            out[kind].append((span[0], span[1]))
    return out


def render(processor, system: str | None, human: str, gpt: str) -> tuple[str, str]:
    """(prompt, answer) strings of the chat template: the prompt is everything before
    the gpt text, the answer the gpt text plus the template's end-of-turn token."""
    messages = ([{"role": "system", "content": system}] if system is not None else []) + [
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": human}]},
        {"role": "assistant", "content": gpt},
    ]
    full = processor.apply_chat_template(messages, tokenize=False)
    before = processor.apply_chat_template(messages[:-1], tokenize=False)
    start = full.find(gpt, len(before))
    if start < 0:
        raise SchemaError(
            "the chat template does not contain the gpt text verbatim", field="conversations.gpt"
        )
    end_of_turn = full[start + len(gpt) :].rstrip()
    return full[:start], gpt + end_of_turn


def encode_sample(
    processor,
    sample_json: dict,
    image: bytes | None,
    max_length: int,
    image_max_pixels: int | None = None,
    *,
    alpha_action: float = 2.0,
    alpha_coord: float = 4.0,
) -> dict[str, torch.Tensor]:
    """input_ids, attention_mask, pixel_values, image_grid_thw, labels, weights for one sample
    (1-D per-token tensors; no batch dimension on them).

    Raises SchemaError naming the field at fault (the caller adds file and key) for a
    sample without image, spans or conversations, a span outside the gpt text, or one
    longer than max_length (its image tokens cannot be cut, nor its answer).
    """
    if not image:
        raise SchemaError("sample has no image", field="image")
    system, human, gpt = _conversation(sample_json)
    spans = _spans(sample_json, len(gpt))
    prompt, answer = render(processor, system, human, gpt)
    try:
        img = decode_image(image, image_max_pixels)
    except Exception as exc:  # noqa: BLE001 - PIL raises many types for bad bytes
        raise SchemaError(f"cannot decode the image: {exc}", field="image") from None
    enc = processor(text=[prompt], images=[img], return_tensors="pt")
    tok = processor.tokenizer(answer, add_special_tokens=False, return_offsets_mapping=True)
    answer_ids = torch.tensor(tok["input_ids"], dtype=torch.long)
    n_prompt, n_answer = enc["input_ids"].shape[1], len(answer_ids)
    if n_prompt + n_answer > max_length:
        raise SchemaError(
            f"{n_prompt} prompt + {n_answer} answer tokens exceed max_length={max_length}", field="max_length"
        )
    weights = token_weights(tok["offset_mapping"], spans, alpha_action, alpha_coord)
    out: dict[str, torch.Tensor] = {
        "input_ids": torch.cat([enc["input_ids"][0], answer_ids]),
        "attention_mask": torch.ones(n_prompt + n_answer, dtype=torch.long),
        "labels": torch.cat([torch.full((n_prompt,), IGNORE, dtype=torch.long), answer_ids]),
        "weights": torch.cat([torch.zeros(n_prompt), torch.tensor(weights, dtype=torch.float32)]),
    }
    for key, value in enc.items():
        if key in out:
            continue
        if key in _TOKEN_FILL:  # e.g. mm_token_type_ids: the answer is text
            out[key] = torch.cat([value[0], torch.zeros(n_answer, dtype=value.dtype)])
        else:
            out[key] = value
    return out


def collate(encodings: list[dict[str, torch.Tensor]], pad_id: int = 0) -> dict[str, torch.Tensor]:
    """A batch: per-token tensors right-padded (labels -100, weights 0, mask 0) and
    stacked; per-image tensors concatenated."""
    if not encodings:
        raise ValueError("collate: empty batch")
    width = max(e["input_ids"].shape[0] for e in encodings)
    batch: dict[str, torch.Tensor] = {}
    for key in dict.fromkeys(k for e in encodings for k in e):
        tensors = [e[key] for e in encodings if key in e]
        if key in _TOKEN_FILL:
            fill = pad_id if _TOKEN_FILL[key] is None else _TOKEN_FILL[key]
            batch[key] = torch.stack(
                [torch.cat([t, torch.full((width - t.shape[0],), fill, dtype=t.dtype)]) for t in tensors]
            )
        else:
            batch[key] = torch.cat(tensors, dim=0)
    return batch


def encoded_stream(
    samples: Iterable[ReasoningSample],
    processor,
    *,
    max_length: int,
    image_max_pixels: int | None,
    alpha_action: float,
    alpha_coord: float,
    skip_bad: bool = False,
    skipped: dict[str, int] | None = None,
) -> Iterator[dict[str, torch.Tensor]]:
    """encode_sample over a stream. A bad sample raises SchemaError naming its shard file,
    key and field; with skip_bad it is skipped and counted in `skipped` by field."""
    for sample in samples:
        try:
            yield encode_sample(
                processor,
                sample.json,
                sample.image,
                max_length,
                image_max_pixels,
                alpha_action=alpha_action,
                alpha_coord=alpha_coord,
            )
        except SchemaError as exc:
            located = exc.located(source=sample.source, record=sample.key)
            if not skip_bad:
                raise located from None
            if skipped is not None:
                skipped[exc.field or "sample"] = skipped.get(exc.field or "sample", 0) + 1
