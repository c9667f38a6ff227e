"""EasyR1: Parquet per split with `prompt` (text with its `<image>` placeholder), `answer`
(the ground truth, rl.ground_truth), `images` (embedded bytes): EasyR1's default
prompt_key / answer_key / image_key; `system`, `key` and `sft_answer` beside them."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from trajforge.convert.messages import messages
from trajforge.convert.output import ParquetFiles, parquet_rows
from trajforge.convert.rl import ground_truth, image_struct, write_reward
from trajforge.convert.source import Item

NAME = "easyr1"

# RL rows: the reward scores whole answers, token weights do not apply (convert manifest).
TOKEN_WEIGHTS = {
    "carried": False,
    "how": "not applicable: RL rows (the reward function scores the whole answer); the SFT spans "
    "travel in the `spans` column for reference only",
}
HOW = """## EasyR1

In the config (`python3 -m verl.trainer.main config=...` of EasyR1):

    data: {train_files: $OUT/train.parquet, val_files: $OUT/val.parquet,
           prompt_key: prompt, answer_key: answer, image_key: images}
    worker: {reward: {reward_type: batch, reward_function: $OUT/reward.py:compute_score_easyr1}}

`trajforge train rl --engine easyr1` writes the whole config.
"""


def schema():
    import pyarrow as pa

    return pa.schema(
        [
            ("prompt", pa.string()),
            ("answer", pa.string()),
            ("images", pa.list_(pa.struct([("bytes", pa.binary()), ("path", pa.string())]))),
            ("system", pa.string()),
            ("key", pa.string()),
            ("kind", pa.string()),
            ("sft_answer", pa.string()),
            ("spans", pa.string()),
        ]
    )


class Writer:
    def __init__(self, tmp: Path, dataset: str):
        self.tmp = tmp
        self.files = ParquetFiles(tmp, schema(), subdir="")

    def write(self, item: Item) -> None:
        gt = ground_truth(item)
        self.files.write(
            item.split,
            {
                "prompt": messages(item)[1]["content"],
                "answer": gt,
                "images": [image_struct(item)],
                "system": item.system,
                "key": item.key,
                "kind": item.kind,
                "sft_answer": item.answer,
                "spans": json.dumps(item.spans, sort_keys=True) if item.spans else "",
            },
        )

    def finish(self) -> dict:
        self.files.close()
        return {
            "files": [self.files.path(s).name for s in self.files.splits],
            "reward_function": {**write_reward(self.tmp, HOW), "name": "compute_score_easyr1"},
        }


def read_back(out: Path):
    for split, row in parquet_rows(out):
        gt = json.loads(row["answer"])
        yield {
            "key": row["key"],
            "split": split,
            "system": row["system"],
            "prompt": row["prompt"],
            "answer": row["sft_answer"],
            "image_sha256": hashlib.sha256(row["images"][0]["bytes"]).hexdigest(),
            "point": gt["point"],
            "box": gt["box"],
        }
