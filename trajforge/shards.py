"""Reading exported WebDataset shards: the manifest, the samples, their check.

A shard folder ($TRAJFORGE_DATA/shards/<dataset>/) holds `<split>-NNNNNN.tar`
files and `manifest.json`, written last by `trajforge.export`. A sample is two
tar members sharing a key (`<trajectory_id>_s0004`): the screenshot
(`.png`, `.jpg` or `.webp`) and `.json` (the step and its trajectory).

These readers use plain `tarfile` so that a check needs nothing else; training
reads the same shards with `webdataset` or `datasets`.
"""
from __future__ import annotations

import hashlib
import json
import re
import tarfile
from pathlib import Path
from typing import Any, Iterator

from schemas.errors import SchemaError

MANIFEST = "manifest.json"
# image_format of a step -> extension of its tar member.
IMAGE_EXT = {"png": "png", "jpeg": "jpg", "webp": "webp"}
IMAGE_EXTS = frozenset(IMAGE_EXT.values())
SHARD_NAME = re.compile(r"^([a-z][a-z0-9_]*)-(\d{6})\.tar$")

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_MAX_STEM = 64  # keeps `<stem>_s0000.json` inside a ustar name (100 chars)
_SHARD_FIELDS = ("name", "split", "samples", "trajectories", "bytes", "sha256")


class ShardError(SchemaError):
    """A shard folder or manifest that cannot be read (names the file and field)."""


def key_stem(trajectory_id: str) -> str:
    """The trajectory id made safe for a sample key: no dots, no slashes.

    webdataset splits a member name at its first dot, so a dot in a key would
    cut the sample in two. An id that had to change (or be cut) gets a short
    hash of the original, so two different ids never share a key.
    """
    clean = _UNSAFE.sub("_", trajectory_id)[:_MAX_STEM]
    if clean == trajectory_id and clean:
        return clean
    digest = hashlib.sha256(trajectory_id.encode()).hexdigest()[:8]
    return f"{clean}-{digest}" if clean else digest


def sample_key(trajectory_id: str, index: int) -> str:
    return f"{key_stem(trajectory_id)}_s{index:04d}"


def read_manifest(shard_dir: Path | str) -> dict[str, Any]:
    """The manifest of a shard folder, checked for the fields readers rely on."""
    shard_dir = Path(shard_dir)
    if not shard_dir.is_dir():
        raise ShardError("no such shard folder", source=str(shard_dir))
    path = shard_dir / MANIFEST
    if not path.is_file():
        raise ShardError("no manifest.json (export not finished?)", source=str(path))
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ShardError(f"not valid JSON: {exc}", source=str(path)) from None
    if not isinstance(manifest, dict):
        raise ShardError("is not a JSON object", source=str(path))
    for field, kind in (("dataset", str), ("version", str), ("splits", dict), ("shards", list)):
        if not isinstance(manifest.get(field), kind):
            raise ShardError(f"missing or not a {kind.__name__}", source=str(path), field=field)
    for i, shard in enumerate(manifest["shards"]):
        missing = [f for f in _SHARD_FIELDS if not isinstance(shard, dict) or f not in shard]
        if missing:
            raise ShardError("shard entry incomplete", source=str(path), record=i,
                             field=f"shards.{missing[0]}")
        if not SHARD_NAME.match(str(shard["name"])):
            raise ShardError(f"bad shard name {shard['name']!r}", source=str(path), record=i,
                             field="shards.name")
    return manifest


def shard_paths(shard_dir: Path | str, split: str | None = None) -> list[Path]:
    """The shard files the manifest lists (of one split, or all), in order."""
    shard_dir = Path(shard_dir)
    manifest = read_manifest(shard_dir)
    return [shard_dir / s["name"] for s in manifest["shards"]
            if split is None or s["split"] == split]


def iter_tar_samples(tar_path: Path | str, *, images: bool = True) -> Iterator[tuple[str, dict]]:
    """(key, {"png": bytes, "json": dict}) for each sample of one tar, in order.

    With images=False the image members are skipped unread (stats, checks).
    """
    tar_path = Path(tar_path)
    try:
        tar = tarfile.open(tar_path, "r:")
    except (tarfile.TarError, OSError) as exc:
        raise ShardError(f"cannot read the shard: {exc}", source=str(tar_path)) from None
    key, sample = None, {}
    with tar:
        try:
            for member in tar:
                if not member.isfile():
                    continue
                stem, _, ext = member.name.partition(".")
                if stem != key:
                    if key is not None:
                        yield key, sample
                    key, sample = stem, {}
                if ext in IMAGE_EXTS and not images:
                    continue
                data = tar.extractfile(member).read()
                sample[ext] = _parse_json(data, tar_path, stem) if ext == "json" else data
        except tarfile.TarError as exc:  # truncated or damaged past its first header
            raise ShardError(f"damaged shard: {exc}", source=str(tar_path), record=key) from None
    if key is not None:
        yield key, sample


def _parse_json(data: bytes, tar_path: Path, key: str) -> dict:
    try:
        sample = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ShardError(f"bad JSON: {exc}", source=str(tar_path), record=key, field="json") from None
    if not isinstance(sample, dict):  # readers index it by field name
        raise ShardError(f"not a JSON object: {type(sample).__name__}", source=str(tar_path),
                         record=key, field="json")
    return sample


def iter_samples(shard_dir: Path | str, split: str | None = None, *,
                 images: bool = True) -> Iterator[tuple[str, dict]]:
    """Every sample of a shard folder (or one split), shard by shard."""
    for path in shard_paths(shard_dir, split):
        yield from iter_tar_samples(path, images=images)


def verify(shard_dir: Path | str) -> list[str]:
    """Problems found comparing the shard files with the manifest (none: [])."""
    shard_dir = Path(shard_dir)
    problems = []
    for shard in read_manifest(shard_dir)["shards"]:
        path = shard_dir / shard["name"]
        if not path.is_file():
            problems.append(f"{path}: missing")
            continue
        size = path.stat().st_size
        if size != shard["bytes"]:
            problems.append(f"{path}: {size} bytes, manifest says {shard['bytes']}")
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
        if digest.hexdigest() != shard["sha256"]:
            problems.append(f"{path}: sha256 differs from the manifest")
    return problems


def hf_data_files(shard_dir: Path | str) -> dict[str, list[str]]:
    """{split: [shard paths]} for `datasets.load_dataset("webdataset", data_files=...)`.

    Splits without shards are left out (the builder rejects an empty list).
    """
    files: dict[str, list[str]] = {}
    for shard in read_manifest(shard_dir)["shards"]:
        files.setdefault(shard["split"], []).append(str(Path(shard_dir) / shard["name"]))
    return files


def sample_arrow_schema():
    """The Arrow schema of a sample's JSON: the step's row plus its trajectory's."""
    import pyarrow as pa

    from schemas.arrow import STEP_SCHEMA, TRAJECTORY_SCHEMA
    fields = list(STEP_SCHEMA)
    for f in TRAJECTORY_SCHEMA:
        if f.name == "trajectory_id":
            continue
        fields.append(f.with_name("trajectory_error") if f.name == "error" else f)
    fields.append(pa.field("schema_version", pa.string()))
    return pa.schema(fields)


def hf_features(image_exts=("png",)):
    """`datasets.Features` for loading the shards with the "webdataset" builder.

    The builder otherwise guesses types from the first five samples, and a
    field that is null in all of them (target, thought, x2...) then fails to
    cast later. Pass `features=hf_features(manifest["sample"]["image_exts"])`:

        manifest = read_manifest(d)
        ds = datasets.load_dataset("webdataset", data_files=hf_data_files(d), split="train",
                                   features=hf_features(manifest["sample"]["image_exts"]))
    """
    import datasets

    features = datasets.Features({"json": datasets.Features.from_arrow_schema(sample_arrow_schema())})
    for ext in image_exts:
        features[ext] = datasets.Image()
    features["__key__"] = datasets.Value("string")
    features["__url__"] = datasets.Value("string")
    return features
