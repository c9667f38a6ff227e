"""Padding-free packing: several encoded samples in one row, no pad token, no cross-talk.

A bin is one row of at most `budget` tokens: the samples' per-token tensors end to end
(no attention_mask), their images' patches concatenated, and `position_ids` of shape
[4, 1, L], the convention transformers 5's Qwen2-VL / Qwen2.5-VL read for packed input:
row 0 the text positions, restarting at 0 at each sample, rows 1-3 the sample's own
M-RoPE positions (temporal, height, width), as if it were alone. From row 0 the model
builds the attention that stays inside a sample: a block-diagonal causal mask under SDPA
(transformers.masking_utils.find_packed_sequence_indices), cu_seqlens for
flash-attention's variable-length kernels when that is the attention implementation.

The weighted loss needs nothing more: each sample starts with its prompt (labelled
-100), so no token is trained to predict the next sample's first token, and
training.loss reduces over the bin's total weight exactly as over a padded batch of the
same samples (tests/training/test_packing.py: equal to 1e-5, gradients close).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import torch

from training.data import _TOKEN_FILL, IGNORE

IMAGE_TYPE = 1  # mm_token_type_ids: 0 text, 1 image, 2 video


def mrope_positions(
    mm_token_type_ids: torch.Tensor, image_grid_thw: torch.Tensor | None, spatial_merge_size: int
) -> torch.Tensor:
    """[3, T] M-RoPE positions of one sample (1-D token types), as Qwen2-VL's and
    Qwen2.5-VL's get_rope_index compute them for still images: text counts up by one on
    all three rows; an image of grid (t, h, w) patches takes positions start + (0, row,
    column) on the merged grid, and the text after it starts at start + max(h, w) / merge."""
    types = mm_token_type_ids.tolist()
    grids = iter(image_grid_thw.tolist() if image_grid_thw is not None else [])
    parts: list[torch.Tensor] = []
    pos = i = 0
    while i < len(types):
        j = i
        while j < len(types) and types[j] == types[i]:
            j += 1
        if types[i] == 0:
            parts.append(torch.arange(pos, pos + j - i).expand(3, -1))
            pos += j - i
        elif types[i] == IMAGE_TYPE:
            t, h, w = next(grids)
            if t != 1:
                raise ValueError(f"mrope_positions: an image grid with t={t} (videos are not packed)")
            h, w = h // spatial_merge_size, w // spatial_merge_size
            if h * w != j - i:
                raise ValueError(f"mrope_positions: {j - i} image tokens for a {h}x{w} merged grid")
            rows = torch.arange(h).repeat_interleave(w)
            cols = torch.arange(w).repeat(h)
            parts.append(torch.stack([torch.zeros(h * w, dtype=torch.long), rows, cols]) + pos)
            pos += max(h, w)
        else:
            raise ValueError(f"mrope_positions: token type {types[i]} (only text and images are packed)")
        i = j
    return torch.cat(parts, dim=1) if parts else torch.zeros(3, 0, dtype=torch.long)


def pack(encodings: list[dict[str, torch.Tensor]], spatial_merge_size: int = 2) -> dict[str, torch.Tensor]:
    """One packed row ([1, L] per-token tensors, [4, 1, L] position_ids) from
    training.data.encode_sample outputs; per-image tensors concatenated in order."""
    if not encodings:
        raise ValueError("pack: no sample")
    out: dict[str, torch.Tensor] = {}
    for key in dict.fromkeys(k for e in encodings for k in e):
        if key == "attention_mask":
            continue  # its absence is what tells the model the row is packed
        tensors = [e[key] for e in encodings if key in e]
        if len(tensors) != len(encodings) and key in _TOKEN_FILL:
            raise ValueError(f"pack: {key!r} is missing from some samples")
        joined = torch.cat(tensors, dim=0)
        out[key] = joined.unsqueeze(0) if key in _TOKEN_FILL else joined
    positions = []
    for e in encodings:
        n = e["input_ids"].shape[0]
        types = e.get("mm_token_type_ids", torch.zeros(n, dtype=torch.long))
        rope = mrope_positions(types, e.get("image_grid_thw"), spatial_merge_size)
        positions.append(torch.cat([torch.arange(n).unsqueeze(0), rope]))
    out["position_ids"] = torch.cat(positions, dim=1).unsqueeze(1)
    # a sample's first label never scores the previous sample's last token
    starts = torch.tensor([0] + [e["input_ids"].shape[0] for e in encodings[:-1]]).cumsum(0)
    out["labels"][0, starts] = IGNORE
    return out


def bins(
    encodings: Iterable[dict[str, torch.Tensor]], budget: int, max_samples: int | None = None
) -> Iterator[list[dict[str, torch.Tensor]]]:
    """Consecutive samples grouped into bins of at most `budget` tokens (and at most
    `max_samples` samples), in stream order: a bin is closed when the next sample would
    overflow it. A sample longer than the budget raises (its image cannot be split)."""
    current: list[dict[str, torch.Tensor]] = []
    used = 0
    for e in encodings:
        n = int(e["input_ids"].shape[0])
        if n > budget:
            raise ValueError(f"a sample of {n} tokens exceeds the packing budget of {budget} tokens")
        if current and (used + n > budget or (max_samples is not None and len(current) >= max_samples)):
            yield current
            current, used = [], 0
        current.append(e)
        used += n
    if current:
        yield current


def spatial_merge_size(source) -> int:
    """The vision tower's merge size (2 for Qwen2-VL / Qwen2.5-VL) from a model, its config
    or its processor (image_processor.merge_size)."""
    image_processor = getattr(source, "image_processor", None)
    if image_processor is not None and getattr(image_processor, "merge_size", None):
        return int(image_processor.merge_size)
    vision = getattr(getattr(source, "config", source), "vision_config", None)
    return int(getattr(vision, "spatial_merge_size", 2))


def attention_kernel(model) -> str:
    """A line for the log: how packed rows attend with this model's attention implementation."""
    impl = getattr(model.config, "_attn_implementation", None) or "eager"
    if "flash" in impl:
        return f"{impl}: variable-length kernels (cu_seqlens from the packed positions)"
    return f"{impl}: block-diagonal causal mask from the packed positions (no flash-attention)"
