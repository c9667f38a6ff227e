"""ms-swift: `messages` + `images` JSONL per split; a grounding sample also carries
`objects` ({"ref": [expression], "bbox": [[x0, y0, x1, y1]]}, in the profile's frame;
`bbox_type` "real" for pixels, "norm1000" on the 0-1000 grid) as ms-swift's grounding
datasets do. The token-weight spans stay in the `spans` column (ms-swift's `loss_scale`
weighs by template rule, not per character)."""
from __future__ import annotations

from pathlib import Path

from .messages import common_columns, messages, read_jsonl
from .output import ImageFiles, JsonlFiles
from .source import Item

NAME = "swift"
_BBOX_TYPE = {"pixels": "real", "grid1000": "norm1000", "grid999": "norm1000"}


class Writer:
    def __init__(self, tmp: Path, dataset: str):
        self.rows, self.images = JsonlFiles(tmp), ImageFiles(tmp)

    def write(self, item: Item) -> None:
        row = {"messages": messages(item), "images": [self.images.put(item)], **common_columns(item)}
        if item.kind == "grounding":
            row["objects"] = {"ref": [item.meta["expression"]], "bbox": [item.box],
                              "bbox_type": _BBOX_TYPE[item.meta["coords"] or "pixels"]}
        self.rows.write(item.split, row)

    def finish(self) -> dict:
        self.rows.close()
        return {"files": [f"{s}.jsonl" for s in self.rows.splits]}


def read_back(out: Path):
    files = sorted(p.name for p in out.glob("*.jsonl"))
    for rec in read_jsonl(out, files):
        row = rec["row"]
        if row["kind"] == "grounding":  # the box as ms-swift reads it: from `objects`
            rec["box"] = row["objects"]["bbox"][0]
        yield rec
