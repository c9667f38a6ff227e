"""The common writer side: an atomic output folder, batched Parquet/JSONL files, the manifest.

Everything is written in `<out>.partial-convert/` (a name that never looks complete);
`convert_manifest.json` is written there last, then the folder replaces `<out>` by
rename. A killed run leaves only the `.partial-convert` folder, which the next run
removes before it starts: a re-run restarts cleanly.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

MANIFEST = "convert_manifest.json"
PARTIAL = ".partial-convert"
BATCH = 256  # rows held before a Parquet row group / JSONL flush (flat memory)


def staging_dir(out: Path) -> Path:
    return out.with_name(out.name + PARTIAL)


def begin(out: Path) -> Path:
    tmp = staging_dir(out)
    shutil.rmtree(tmp, ignore_errors=True)  # a killed run's leftovers
    tmp.mkdir(parents=True)
    return tmp


def commit(tmp: Path, out: Path, manifest: dict) -> None:
    """Hash every file, write the manifest last, then swap the folder into place."""
    files = []
    for p in sorted(tmp.rglob("*")):
        if p.is_file():
            files.append(
                {"path": str(p.relative_to(tmp)), "bytes": p.stat().st_size, "sha256": sha256_file(p)}
            )
    manifest["files"] = files
    (tmp / MANIFEST).write_text(
        json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    old = out.with_name(out.name + ".old-convert")
    shutil.rmtree(old, ignore_errors=True)
    if out.exists():
        os.replace(out, old)
    os.replace(tmp, out)
    shutil.rmtree(old, ignore_errors=True)


def parquet_rows(out: Path, batch_size: int = 256):
    """(split, row) for every row of the <split>.parquet files of `out`, in batches (flat memory)."""
    import pyarrow.parquet as pq

    for path in sorted(out.glob("*.parquet")):
        for batch in pq.ParquetFile(path).iter_batches(batch_size=batch_size):
            for row in batch.to_pylist():
                yield path.stem, row


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class JsonlFiles:
    """One JSONL file per split, rows buffered BATCH at a time."""

    def __init__(self, root: Path, pattern: str = "{split}.jsonl"):
        self.root, self.pattern = root, pattern
        self._files: dict[str, object] = {}

    def write(self, split: str, row: dict) -> None:
        f = self._files.get(split)
        if f is None:
            f = self._files[split] = open(
                self.root / self.pattern.format(split=split), "w", encoding="utf-8", buffering=1 << 20
            )
        f.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")

    @property
    def splits(self) -> list[str]:
        return sorted(self._files)

    def close(self) -> None:
        for f in self._files.values():
            f.close()


class ImageFiles:
    """Images alongside, content-addressed (`images/<sha256>.<ext>`): the two modes of a
    step, or a screen's grounding samples, share one file."""

    def __init__(self, root: Path):
        self.root = root / "images"
        self.root.mkdir()
        self._seen: set[str] = set()

    def put(self, item) -> str:
        name = f"{item.image_sha256}.{item.image_ext}"
        if name not in self._seen:
            self._seen.add(name)
            (self.root / name).write_bytes(item.image)
        return f"images/{name}"


class ParquetFiles:
    """One Parquet file per split (`<split>.parquet` under `subdir`), written BATCH rows a
    row group with a fixed schema; `features` (datasets.Features) go into the schema
    metadata, so `datasets` reads the declared types (images as datasets.Image)."""

    def __init__(
        self, root: Path, schema, features=None, subdir: str = "data", pattern: str = "{split}.parquet"
    ):
        import pyarrow as pa

        self.dir = root / subdir if subdir else root
        self.dir.mkdir(parents=True, exist_ok=True)
        meta = dict(schema.metadata or {})
        if features is not None:
            meta[b"huggingface"] = json.dumps({"info": {"features": features.to_dict()}}).encode()
        self.schema = pa.schema(list(schema), metadata=meta)
        self.pattern = pattern
        self._writers, self._rows = {}, {}

    def path(self, split: str) -> Path:
        return self.dir / self.pattern.format(split=split)

    def write(self, split: str, row: dict) -> None:
        rows = self._rows.setdefault(split, [])
        rows.append(row)
        if len(rows) >= BATCH:
            self._flush(split)

    def _flush(self, split: str) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        rows = self._rows.get(split)
        if not rows:
            return
        if split not in self._writers:
            self._writers[split] = pq.ParquetWriter(self.path(split), self.schema)
        self._writers[split].write_table(pa.Table.from_pylist(rows, schema=self.schema))
        self._rows[split] = []

    @property
    def splits(self) -> list[str]:
        return sorted(set(self._writers) | {s for s, r in self._rows.items() if r})

    def close(self) -> None:
        for split in list(self._rows):
            self._flush(split)
        for w in self._writers.values():
            w.close()
