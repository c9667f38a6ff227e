"""verl: Parquet per split with `data_source`, `prompt` (chat messages, the user turn with
its `<image>` placeholder), `images` (embedded bytes), `ability`, `reward_model`
{style: "rule", ground_truth}, `extra_info` (split, index, key, the SFT answer text, spans),
the columns verl's RLHFDataset reads."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from trajforge.convert.messages import messages
from trajforge.convert.output import ParquetFiles, parquet_rows
from trajforge.convert.rl import ground_truth, image_struct, write_reward
from trajforge.convert.source import Item

NAME = "verl"

# RL rows: the reward scores whole answers, token weights do not apply (convert manifest).
TOKEN_WEIGHTS = {
    "carried": False,
    "how": "not applicable: RL rows (the reward module scores the whole answer); the SFT spans "
    "travel in extra_info for reference only",
}
HOW = """## verl

    python -m verl.trainer.main_ppo \\
        data.train_files=$OUT/train.parquet data.val_files=$OUT/val.parquet \\
        reward.custom_reward_function.path=$OUT/reward.py \\
        reward.custom_reward_function.name=compute_score ...

`trajforge train rl --engine verl` writes the whole command (GRPO with the KL loss and
success-adaptive negative scaling, rollout n = the group size).
"""


def schema():
    import pyarrow as pa

    msg = pa.struct([("role", pa.string()), ("content", pa.string())])
    return pa.schema(
        [
            ("data_source", pa.string()),
            ("prompt", pa.list_(msg)),
            ("images", pa.list_(pa.struct([("bytes", pa.binary()), ("path", pa.string())]))),
            ("ability", pa.string()),
            ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
            (
                "extra_info",
                pa.struct(
                    [
                        ("split", pa.string()),
                        ("index", pa.int64()),
                        ("key", pa.string()),
                        ("kind", pa.string()),
                        ("answer", pa.string()),
                        ("spans", pa.string()),
                    ]
                ),
            ),
        ]
    )


class Writer:
    def __init__(self, tmp: Path, dataset: str):
        self.dataset, self.n = dataset, 0
        self.tmp = tmp
        self.files = ParquetFiles(tmp, schema(), subdir="")

    def write(self, item: Item) -> None:
        gt = ground_truth(item)
        self.files.write(
            item.split,
            {
                "data_source": f"trajforge/{self.dataset}",
                "prompt": messages(item)[:2],
                "images": [image_struct(item)],
                "ability": "gui_" + item.kind,
                "reward_model": {"style": "rule", "ground_truth": gt},
                "extra_info": {
                    "split": item.split,
                    "index": self.n,
                    "key": item.key,
                    "kind": item.kind,
                    "answer": item.answer,
                    "spans": json.dumps(item.spans, sort_keys=True) if item.spans else "",
                },
            },
        )
        self.n += 1

    def finish(self) -> dict:
        self.files.close()
        return {
            "files": [self.files.path(s).name for s in self.files.splits],
            "reward_function": {**write_reward(self.tmp, HOW), "name": "compute_score"},
        }


def read_back(out: Path):
    for split, row in parquet_rows(out):
        msgs = {m["role"]: m["content"] for m in row["prompt"]}
        gt = json.loads(row["reward_model"]["ground_truth"])
        yield {
            "key": row["extra_info"]["key"],
            "split": split,
            "system": msgs["system"],
            "prompt": msgs["user"],
            "answer": row["extra_info"]["answer"],
            "image_sha256": hashlib.sha256(row["images"][0]["bytes"]).hexdigest(),
            "point": gt["point"],
            "box": gt["box"],
        }
