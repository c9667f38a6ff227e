"""LLaMA-Factory: ShareGPT-style `messages` + `images` JSONL per split, `dataset_info.json`
registering each split (formatting "sharegpt", OpenAI-style role tags), images alongside
with paths relative to the folder (LLaMA-Factory's `media_dir`/`dataset_dir`). The manifest's
`image_max_pixels` is the largest image's pixel count: LLaMA-Factory shrinks any image above its
own `image_max_pixels` (default 768*768) before the processor, which would move a screenshot
out of the frame its pixel answers are written in, so the YAML must set at least this."""

from __future__ import annotations

import json
from pathlib import Path

from trajforge.convert.messages import common_columns, messages, read_jsonl
from trajforge.convert.output import ImageFiles, JsonlFiles
from trajforge.convert.source import Item

NAME = "llamafactory"

# Whether trajforge's action-aware token weights reach the trainer, and how (convert manifest).
TOKEN_WEIGHTS = {
    "carried": False,
    "how": "not carried: LLaMA-Factory's supervised processor masks whole turns (a label is the "
    "token or IGNORE_INDEX), its loss is the plain mean cross-entropy and a dataset column cannot "
    "reach it; the `spans` column is written but LLaMA-Factory does not read it, so every answer "
    "token trains with weight 1",
}
TAGS = {
    "role_tag": "role",
    "content_tag": "content",
    "user_tag": "user",
    "assistant_tag": "assistant",
    "system_tag": "system",
}


class Writer:
    def __init__(self, tmp: Path, dataset: str):
        self.tmp, self.dataset = tmp, dataset
        self.rows, self.images = JsonlFiles(tmp), ImageFiles(tmp)
        self.max_pixels = 0

    def write(self, item: Item) -> None:
        self.rows.write(
            item.split,
            {"messages": messages(item), "images": [self.images.put(item)], **common_columns(item)},
        )
        self.max_pixels = max(self.max_pixels, item.width * item.height)

    def finish(self) -> dict:
        self.rows.close()
        info = {
            f"{self.dataset}_{s}": {
                "file_name": f"{s}.jsonl",
                "formatting": "sharegpt",
                "columns": {"messages": "messages", "images": "images"},
                "tags": TAGS,
            }
            for s in self.rows.splits
        }
        (self.tmp / "dataset_info.json").write_text(json.dumps(info, indent=2) + "\n")
        return {"datasets": sorted(info), "image_max_pixels": self.max_pixels}


def read_back(out: Path):
    info = json.loads((out / "dataset_info.json").read_text())
    return read_jsonl(out, [d["file_name"] for d in info.values()])
