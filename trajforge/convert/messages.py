"""Shared by the chat formats: an Item as role/content messages, and back."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from trajforge.convert.source import Item, answer_point

IMAGE_TAG = "<image>"


def messages(item: Item) -> list[dict]:
    """system / user / assistant; the user turn keeps the set's `<image>` placeholder
    (the one image of the sample), as LLaMA-Factory and ms-swift expect it."""
    prompt = item.prompt if IMAGE_TAG in item.prompt else f"{IMAGE_TAG}\n{item.prompt}"
    return [
        {"role": "system", "content": item.system},
        {"role": "user", "content": prompt},
        {"role": "assistant", "content": item.answer},
    ]


def common_columns(item: Item) -> dict:
    """What every row carries beside the trainer's own columns (kept, not trained on)."""
    return {
        "id": item.key,
        "kind": item.kind,
        "action_type": item.action_type,
        # Character offsets into the assistant text (synthesis.reasoning_set.answer_spans):
        # the token-weight spans, as JSON text (a fixed type in every row).
        "spans": json.dumps(item.spans, sort_keys=True) if item.spans else "",
        "meta": json.dumps(item.meta, sort_keys=True, ensure_ascii=False),
    }


def read_jsonl(out: Path, files: list[str]):
    """Round-trip records of a messages+images JSONL output."""
    for name in files:
        split = Path(name).stem
        with open(out / name, encoding="utf-8") as f:
            for line in f:
                row = json.loads(line)
                msgs = {m["role"]: m["content"] for m in row["messages"]}
                [image] = row["images"]
                point, box = answer_point(row["kind"], msgs["assistant"])
                yield {
                    "key": row["id"],
                    "split": split,
                    "system": msgs["system"],
                    "prompt": msgs["user"],
                    "answer": msgs["assistant"],
                    "image_sha256": hashlib.sha256((out / image).read_bytes()).hexdigest(),
                    "point": point,
                    "box": box,
                    "row": row,
                }
