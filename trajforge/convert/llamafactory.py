"""LLaMA-Factory: ShareGPT-style `messages` + `images` JSONL per split, `dataset_info.json`
registering each split (formatting "sharegpt", OpenAI-style role tags), images alongside
with paths relative to the folder (LLaMA-Factory's `media_dir`/`dataset_dir`)."""
from __future__ import annotations

import json
from pathlib import Path

from .messages import common_columns, messages, read_jsonl
from .output import ImageFiles, JsonlFiles
from .source import Item

NAME = "llamafactory"
TAGS = {"role_tag": "role", "content_tag": "content", "user_tag": "user",
        "assistant_tag": "assistant", "system_tag": "system"}


class Writer:
    def __init__(self, tmp: Path, dataset: str):
        self.tmp, self.dataset = tmp, dataset
        self.rows, self.images = JsonlFiles(tmp), ImageFiles(tmp)

    def write(self, item: Item) -> None:
        self.rows.write(item.split, {"messages": messages(item), "images": [self.images.put(item)],
                                     **common_columns(item)})

    def finish(self) -> dict:
        self.rows.close()
        info = {f"{self.dataset}_{s}": {"file_name": f"{s}.jsonl", "formatting": "sharegpt",
                                        "columns": {"messages": "messages", "images": "images"},
                                        "tags": TAGS}
                for s in self.rows.splits}
        (self.tmp / "dataset_info.json").write_text(json.dumps(info, indent=2) + "\n")
        return {"datasets": sorted(info)}


def read_back(out: Path):
    info = json.loads((out / "dataset_info.json").read_text())
    return read_jsonl(out, [d["file_name"] for d in info.values()])
