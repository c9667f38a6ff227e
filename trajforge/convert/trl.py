"""TRL: a `datasets` Parquet dataset per split of `messages` (content as typed parts:
{"type": "image"} then {"type": "text"}) and `images` (datasets.Image, embedded bytes),
what TRL's SFTTrainer takes for a vision-language model; `load_dataset("parquet")` reads
the declared Features from the files."""

from __future__ import annotations

import hashlib
from pathlib import Path

from trajforge.convert.messages import IMAGE_TAG, common_columns, messages
from trajforge.convert.output import ParquetFiles
from trajforge.convert.source import Item, answer_point

NAME = "trl"

# Whether trajforge's action-aware token weights (reasoning 1, action 2, coordinates 4) reach
# the trainer, and how: written into the convert manifest.
TOKEN_WEIGHTS = {
    "carried": True,
    "how": "the `spans` column (character offsets of the answer's action and coordinates); "
    "trajforge's TRL trainer (training.engines.trl_sft, engine trl) turns them into per-token weights",
}


def features():
    import datasets as ds

    part = {"type": ds.Value("string"), "text": ds.Value("string")}
    return ds.Features(
        {
            "messages": ds.List({"role": ds.Value("string"), "content": ds.List(part)}),
            "images": ds.List(ds.Image()),
            "id": ds.Value("string"),
            "kind": ds.Value("string"),
            "action_type": ds.Value("string"),
            "spans": ds.Value("string"),
            "meta": ds.Value("string"),
        }
    )


def _parts(m: dict) -> list[dict]:
    if m["role"] != "user":
        return [{"type": "text", "text": m["content"]}]
    text = m["content"].replace(IMAGE_TAG + "\n", "", 1).replace(IMAGE_TAG, "", 1)
    return [{"type": "image", "text": None}, {"type": "text", "text": text}]


class Writer:
    def __init__(self, tmp: Path, dataset: str):
        f = features()
        self.files = ParquetFiles(tmp, f.arrow_schema, f)

    def write(self, item: Item) -> None:
        self.files.write(
            item.split,
            {
                "messages": [{"role": m["role"], "content": _parts(m)} for m in messages(item)],
                "images": [{"bytes": item.image, "path": None}],
                **common_columns(item),
            },
        )

    def finish(self) -> dict:
        self.files.close()
        return {"data_files": {s: f"data/{s}.parquet" for s in self.files.splits}}


def read_back(out: Path):
    """Through `datasets` itself (images decoded off: the bytes compared as stored)."""
    import datasets as ds

    files = {p.stem: str(p) for p in sorted((out / "data").glob("*.parquet"))}
    loaded = ds.load_dataset("parquet", data_files=files)
    for split, d in loaded.items():
        d = d.cast_column("images", ds.List(ds.Image(decode=False)))
        for row in d:
            text = {m["role"]: "".join(p["text"] or "" for p in m["content"]) for m in row["messages"]}
            user = next(m for m in row["messages"] if m["role"] == "user")
            assert user["content"][0]["type"] == "image"
            prompt = f"{IMAGE_TAG}\n{text['user']}"
            point, box = answer_point(row["kind"], text["assistant"])
            yield {
                "key": row["id"],
                "split": split,
                "system": text["system"],
                "prompt": prompt,
                "answer": text["assistant"],
                "image_sha256": hashlib.sha256(row["images"][0]["bytes"]).hexdigest(),
                "point": point,
                "box": box,
            }
