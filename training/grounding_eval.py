"""Offline grounding evaluation: point-in-box accuracy on a held-out split of a grounding set.

Each sample (synthesis/grounding_samples.py) is asked with its own system and human
turns and its screen record's image (the model profile's frame), greedily, through the
same generation path as the step evaluation (training.evaluate: a PolicyBackend over the
checkpoint, or any VLMBackend). The answer's `point_2d` (else the centre of its
`bbox_2d`, else a bare "(x, y)") is read in the set's profile frame
(schemas.model_profiles.from_model) and is correct when it lies inside the sample's
normalised box, edges included; an answer that does not parse is wrong.

Accuracy comes overall and by role, size bucket, language and expression kind:
{"n", "correct", "accuracy"} per value.
"""

from __future__ import annotations

import json
import re
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from schemas.agent_prompt import conversation_messages
from schemas.errors import SchemaError
from schemas.model_profiles import ModelProfile, manifest_profile, model_profile
from trajforge.publish.shards import read_manifest
from trajforge.read.loader import read_split
from trajforge.vlm.backends import VLMBackend, VLMRequest

BREAKDOWNS = ("role", "size_bucket", "language", "kind")
_PAIR = re.compile(r"\(\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)\s*\)")


def predicted_point(text: str) -> list[float] | None:
    """The answer's point as the model wrote it (frame pixels or grid), or None."""
    start = text.find("{")
    if start >= 0:
        try:
            obj, _ = json.JSONDecoder().raw_decode(text[start:])
        except json.JSONDecodeError:
            obj = None
        if isinstance(obj, dict):
            p, b = obj.get("point_2d"), obj.get("bbox_2d")
            if isinstance(p, list) and len(p) == 2:
                return p
            if isinstance(b, list) and len(b) == 4 and all(isinstance(v, (int, float)) for v in b):
                return [(b[0] + b[2]) / 2, (b[1] + b[3]) / 2]
    m = _PAIR.search(text)
    return [float(m.group(1)), float(m.group(2))] if m else None


def score_grounding(text: str, sample: dict, screenshot: dict, profile: ModelProfile) -> dict:
    """{"parsed", "inside"} for one answer; `screenshot`: the record's recorded size."""
    point = predicted_point(text)
    if point is None:
        return {"parsed": False, "inside": False}
    try:
        x, y = profile.from_model(point, int(screenshot["width"]), int(screenshot["height"]))
    except (SchemaError, ValueError):
        return {"parsed": False, "inside": False}
    x0, y0, x1, y1 = sample["box_norm"]
    return {"parsed": True, "inside": x0 <= x <= x1 and y0 <= y <= y1}


def _messages(sample: dict, image: bytes) -> list[dict]:
    turns = {t["from"]: t["value"] for t in sample["conversations"]}
    return conversation_messages(turns["system"], turns["human"], image)


def offline_grounding_accuracy(
    model: str | Path | VLMBackend,
    shards_dir: str | Path,
    split: str = "test",
    max_samples: int | None = None,
    *,
    max_new_tokens: int = 48,
    batch_size: int = 8,
    device: str = "auto",
    dtype: str = "auto",
    image_max_pixels: int | None = None,
) -> dict:
    """Greedy point-in-box accuracy of `model` on the samples of `split`."""
    from training.policy_backend import policy_backend_for  # defers torch

    manifest = read_manifest(Path(shards_dir))
    if manifest.get("kind") != "grounding":
        raise ValueError(f"{shards_dir}: manifest kind {manifest.get('kind')!r}, not a grounding set")
    profile = manifest_profile(manifest) or model_profile(None)
    backend = (
        model
        if not isinstance(model, (str, Path))
        else policy_backend_for(model, device=device, dtype=dtype, image_max_pixels=image_max_pixels)
    )
    started = time.perf_counter()
    tally = Tally()
    pending: list[tuple[VLMRequest, dict, dict]] = []

    def flush():
        answers = backend.generate([r for r, _, _ in pending], max_new_tokens, temperature=0.0)
        for text, (_, s, shot) in zip(answers, pending):
            tally.add(s, score_grounding(text if isinstance(text, str) else text[0], s, shot, profile))
        pending.clear()

    done = False
    for record in read_split(shards_dir, split):
        rec, image = record["json"], record["image"]
        for s in rec.get("samples", []):
            if max_samples is not None and tally.n + len(pending) >= max_samples:
                done = True
                break
            pending.append(
                (
                    VLMRequest(
                        messages=_messages(s, image),
                        key=s["id"],
                        metadata={"width": rec["image"]["width"], "height": rec["image"]["height"]},
                    ),
                    s,
                    rec["screenshot"],
                )
            )
            if len(pending) >= batch_size:
                flush()
        if done:
            break
    if pending:
        flush()
    return {
        "checkpoint_id": backend.model_id,
        "split": split,
        "profile": profile.name,
        **tally.result(),
        "wall_s": round(time.perf_counter() - started, 3),
    }


class Tally:
    """Correct / total overall and per value of each breakdown."""

    def __init__(self) -> None:
        self.n = self.parsed = self.correct = 0
        self.by: dict[str, dict[str, list[int]]] = {b: defaultdict(lambda: [0, 0]) for b in BREAKDOWNS}

    def add(self, sample: dict, score: dict) -> None:
        self.n += 1
        self.parsed += score["parsed"]
        self.correct += score["inside"]
        values = {
            "role": sample["element"]["role"],
            "size_bucket": sample["size_bucket"],
            "language": sample["language"],
            "kind": sample["kind"],
        }
        for b, v in values.items():
            cell = self.by[b][v]
            cell[0] += 1
            cell[1] += score["inside"]

    def result(self) -> dict[str, Any]:
        rate = lambda c, d: c / d if d else 0.0  # noqa: E731
        return {
            "samples": self.n,
            "parse_rate": rate(self.parsed, self.n),
            "point_in_box": rate(self.correct, self.n),
            **{
                f"by_{b}": {
                    v: {"n": n, "correct": c, "accuracy": rate(c, n)} for v, (n, c) in sorted(cells.items())
                }
                for b, cells in self.by.items()
            },
        }
