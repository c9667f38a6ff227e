"""The common reader: any of the project's sets, streamed as flat `Item`s.

A reasoning set (manifest kind "reasoning_set", the Chinese set too) gives one item per
shard sample (kind "action"); a grounding set (kind "grounding") gives one item per
grounding sample inside each screen record (kind "grounding"), all sharing the screen's
image. Formats write from `Item`s only, so a new set kind plugs in here.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from schemas.errors import SchemaError
from trajforge.publish.shards import IMAGE_EXTS, ShardError, iter_tar_samples, read_manifest

SET_KINDS = {"reasoning_set": "action", "grounding": "grounding"}
NO_POINT = [-100, -100]


class ConvertError(SchemaError):
    """Input that cannot be converted (names the path, record and field)."""


@dataclass
class Item:
    key: str
    split: str
    kind: str  # "action" | "grounding"
    image: bytes
    image_ext: str
    width: int
    height: int
    system: str
    prompt: str
    answer: str
    point: list[int] | None  # in the profile's frame (pixels or grid), as the answer writes it
    box: list[int] | None
    action_type: str
    spans: dict | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def image_sha256(self) -> str:
        return hashlib.sha256(self.image).hexdigest()


def open_set(set_dir: Path | str) -> dict:
    """The set's manifest; ConvertError when the folder is not one of the project's sets."""
    set_dir = Path(set_dir)
    try:
        manifest = read_manifest(set_dir)
    except ShardError as err:
        raise ConvertError(f"not a set: {err}", source=str(set_dir)) from None
    if manifest.get("kind") not in SET_KINDS:
        raise ConvertError(
            f"manifest kind {manifest.get('kind')!r} is not a set ({' or '.join(SET_KINDS)})",
            source=str(set_dir / "manifest.json"),
            field="kind",
        )
    return manifest


def _turn(conv: list[dict], who: str) -> str:
    return next(t["value"] for t in conv if t["from"] == who)


def iter_items(set_dir: Path | str, manifest: dict | None = None) -> Iterator[Item]:
    """Every item of the set, split by split in manifest order; one shard sample in memory."""
    set_dir = Path(set_dir)
    manifest = manifest or open_set(set_dir)
    kind = SET_KINDS[manifest["kind"]]
    for shard in manifest["shards"]:
        path = set_dir / shard["name"]
        for key, members in iter_tar_samples(path):
            exts = [e for e in members if e in IMAGE_EXTS]
            if len(exts) != 1 or "json" not in members:
                raise ConvertError(
                    "expected one image and one json member",
                    source=str(path),
                    record=key,
                    field="image" if len(exts) != 1 else "json",
                )
            try:
                yield from _items(kind, key, shard["split"], members["json"], members[exts[0]], exts[0])
            except (KeyError, TypeError, StopIteration) as err:
                raise ConvertError(
                    f"sample lacks {err!r}", source=str(path), record=key, field="json"
                ) from None


def _items(kind, key, split, j, image, ext) -> Iterator[Item]:
    w, h = j["image"]["width"], j["image"]["height"]
    meta = {
        k: j.get(k)
        for k in (
            "trajectory_id",
            "index",
            "language",
            "platform",
            "app",
            "source_name",
            "model_profile",
            "coords",
            "task_id",
        )
    }
    if kind == "action":
        conv = j["conversations"]
        point = j["answer"]["point_2d"]
        meta.update(mode=j["mode"], target_box=j.get("target_box"), action=j.get("action"))
        yield Item(
            key,
            split,
            kind,
            image,
            ext,
            w,
            h,
            _turn(conv, "system"),
            _turn(conv, "human"),
            _turn(conv, "gpt"),
            None if point == NO_POINT else list(point),
            None,
            j["answer"]["action_type"],
            j.get("spans"),
            meta,
        )
        return
    for s in j["samples"]:
        conv = s["conversations"]
        yield Item(
            s["id"],
            split,
            kind,
            image,
            ext,
            w,
            h,
            _turn(conv, "system"),
            _turn(conv, "human"),
            _turn(conv, "gpt"),
            list(s["point"]),
            list(s["box"]),
            "ground",
            None,
            {**meta, "mode": s["kind"], "expression": s["expression"], "box_norm": s["box_norm"]},
        )


def answer_point(kind: str, answer: str) -> tuple[list[int] | None, list[int] | None]:
    """(point, box) read back from an answer text: what a trainer's reward parser sees."""
    if kind == "grounding":
        obj = json.loads(answer)
        return obj["point_2d"], obj["bbox_2d"]
    body = answer[answer.index("<answer>") + len("<answer>") : answer.rindex("</answer>")]
    point = json.loads(body)["point_2d"]
    return (None if point == NO_POINT else point), None
