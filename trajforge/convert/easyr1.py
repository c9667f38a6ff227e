"""EasyR1: Parquet per split with `prompt` (text with its `<image>` placeholder), `answer`
(the ground truth, rl.ground_truth), `images` (embedded bytes): EasyR1's default
prompt_key / answer_key / image_key; `system`, `key` and `sft_answer` beside them."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from .messages import messages
from .output import ParquetFiles
from .rl import ground_truth, image_struct
from .source import Item

NAME = "easyr1"


def schema():
    import pyarrow as pa

    return pa.schema([
        ("prompt", pa.string()), ("answer", pa.string()),
        ("images", pa.list_(pa.struct([("bytes", pa.binary()), ("path", pa.string())]))),
        ("system", pa.string()), ("key", pa.string()), ("kind", pa.string()),
        ("sft_answer", pa.string()), ("spans", pa.string())])


class Writer:
    def __init__(self, tmp: Path, dataset: str):
        self.files = ParquetFiles(tmp, schema(), subdir="")

    def write(self, item: Item) -> None:
        gt = ground_truth(item)
        self.files.write(item.split, {
            "prompt": messages(item)[1]["content"], "answer": gt, "images": [image_struct(item)],
            "system": item.system, "key": item.key, "kind": item.kind, "sft_answer": item.answer,
            "spans": json.dumps(item.spans, sort_keys=True) if item.spans else ""})

    def finish(self) -> dict:
        self.files.close()
        return {"files": [self.files.path(s).name for s in self.files.splits]}


def read_back(out: Path):
    import pyarrow.parquet as pq

    for path in sorted(out.glob("*.parquet")):
        for batch in pq.ParquetFile(path).iter_batches(batch_size=256):
            for row in batch.to_pylist():
                gt = json.loads(row["answer"])
                yield {"key": row["key"], "split": path.stem, "system": row["system"],
                       "prompt": row["prompt"], "answer": row["sft_answer"],
                       "image_sha256": hashlib.sha256(row["images"][0]["bytes"]).hexdigest(),
                       "point": gt["point"], "box": gt["box"]}
