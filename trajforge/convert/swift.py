"""ms-swift: `messages` + `images` JSONL per split; a grounding sample also carries
`objects` ({"ref": [expression], "bbox": [[x0, y0, x1, y1]], "bbox_type": "norm1"}) as
ms-swift's grounding datasets do. The box is the normalised one (0-1 of the screenshot):
"real" and "norm1" are the only types ms-swift knows, and a grid box typed anything else
is read as pixels and rescaled wrong; from "norm1" its template writes each model's own
frame where a lab's prompt uses `<ref-object>` / `<bbox>`. The answers themselves keep the
literal coordinates of the set's profile (the text every other format trains on; ms-swift's
rendering of `<bbox>` depends on the template and QWENVL_BBOX_FORMAT). Image paths are
relative to the output folder: ms-swift opens them from the working directory or
$ROOT_IMAGE_DIR. The token-weight spans stay in the `spans` column: ms-swift's built-in
loss scales weigh by template rule, so trajforge's loss-scale plugin
(training/engines/swift_plugin.py, `--loss_scale trajforge --remove_unused_columns false`)
turns them into per-token scales."""

from __future__ import annotations

from pathlib import Path

from trajforge.convert.messages import common_columns, messages, read_jsonl
from trajforge.convert.output import ImageFiles, JsonlFiles
from trajforge.convert.source import Item

NAME = "swift"

# Whether trajforge's action-aware token weights reach the trainer, and how (convert manifest).
TOKEN_WEIGHTS = {
    "carried": True,
    "how": "the `spans` column; ms-swift's loss-scale mechanism applies them through trajforge's "
    "plugin (training/engines/swift_plugin.py: --loss_scale trajforge --loss_type trajforge_weighted "
    "--remove_unused_columns false)",
}


class Writer:
    def __init__(self, tmp: Path, dataset: str):
        self.rows, self.images = JsonlFiles(tmp), ImageFiles(tmp)

    def write(self, item: Item) -> None:
        row = {"messages": messages(item), "images": [self.images.put(item)], **common_columns(item)}
        if item.kind == "grounding":
            row["objects"] = {
                "ref": [item.meta["expression"]],
                "bbox": [list(item.meta["box_norm"])],
                "bbox_type": "norm1",
            }
        self.rows.write(item.split, row)

    def finish(self) -> dict:
        self.rows.close()
        return {"files": [f"{s}.jsonl" for s in self.rows.splits]}


def read_back(out: Path):
    files = sorted(p.name for p in out.glob("*.jsonl"))
    for rec in read_jsonl(out, files):
        row = rec["row"]
        if row["kind"] == "grounding":  # the box as ms-swift reads it: from `objects`
            rec["box_norm"] = row["objects"]["bbox"][0]
        yield rec
