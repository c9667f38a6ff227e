"""hf-parquet: the Hub's layout. `data/<split>.parquet` with the same fixed columns in every
row (a field a sample lacks is null, never a missing column: the viewer's
DatasetGenerationCastError comes from columns present in some files only), the image as
datasets.Image (embedded bytes), and README.md: the dataset card with the YAML header the
Hub reads (configs and data_files per split, license, features) and the counts of
`trajforge stats`."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from trajforge.convert.output import ParquetFiles
from trajforge.convert.source import Item

NAME = "hf-parquet"

# Whether trajforge's action-aware token weights reach a trainer, and how (convert manifest).
TOKEN_WEIGHTS = {
    "carried": True,
    "how": "as data: the `spans` column (character offsets of the answer's action and "
    "coordinates); a trainer applies them only through trajforge's loss (training.loss)",
}
_STR = (
    "id",
    "split",
    "kind",
    "trajectory_id",
    "mode",
    "language",
    "platform",
    "app",
    "source_name",
    "model_profile",
    "coords",
    "action_type",
    "system",
    "prompt",
    "answer",
    "expression",
    "spans",
)


def features():
    import datasets as ds

    cols = {c: ds.Value("string") for c in _STR}
    cols.update(
        index=ds.Value("int64"),
        image=ds.Image(),
        image_width=ds.Value("int32"),
        image_height=ds.Value("int32"),
        point=ds.List(ds.Value("int64")),
        box=ds.List(ds.Value("int64")),
    )
    return ds.Features(cols)


class Writer:
    def __init__(self, tmp: Path, dataset: str):
        f = features()
        self.tmp, self.dataset, self.features = tmp, dataset, f
        self.files = ParquetFiles(tmp, f.arrow_schema, f)

    def write(self, item: Item) -> None:
        m = item.meta
        self.files.write(
            item.split,
            {
                "id": item.key,
                "split": item.split,
                "kind": item.kind,
                **{
                    k: (None if m.get(k) is None else str(m[k]))
                    for k in (
                        "trajectory_id",
                        "mode",
                        "language",
                        "platform",
                        "app",
                        "source_name",
                        "model_profile",
                        "coords",
                        "expression",
                    )
                },
                "action_type": item.action_type,
                "system": item.system,
                "prompt": item.prompt,
                "answer": item.answer,
                "spans": json.dumps(item.spans, sort_keys=True) if item.spans else None,
                "index": m.get("index"),
                "image": {"bytes": item.image, "path": f"{item.key}.{item.image_ext}"},
                "image_width": item.width,
                "image_height": item.height,
                "point": item.point,
                "box": item.box,
            },
        )

    def finish(self) -> dict:
        self.files.close()
        return {"data_files": {s: f"data/{s}.parquet" for s in self.files.splits}}


def read_back(out: Path):
    import datasets as ds

    files = {p.stem: str(p) for p in sorted((out / "data").glob("*.parquet"))}
    loaded = ds.load_dataset("parquet", data_files=files)
    for split, d in loaded.items():
        d = d.cast_column("image", ds.Image(decode=False))
        for row in d:
            yield {
                "key": row["id"],
                "split": split,
                "system": row["system"],
                "prompt": row["prompt"],
                "answer": row["answer"],
                "image_sha256": hashlib.sha256(row["image"]["bytes"]).hexdigest(),
                "point": row["point"],
                "box": row["box"],
            }
