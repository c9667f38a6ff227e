"""Reading exported WebDataset shards: the manifest, the samples, their check.

A shard folder ($TRAJFORGE_DATA/shards/<dataset>/) holds `<split>-NNNNNN.tar`
files and `manifest.json`, written last by `trajforge.publish.export`. A sample is two
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
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

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
            raise ShardError(
                "shard entry incomplete", source=str(path), record=i, field=f"shards.{missing[0]}"
            )
        if not SHARD_NAME.match(str(shard["name"])):
            raise ShardError(
                f"bad shard name {shard['name']!r}", source=str(path), record=i, field="shards.name"
            )
    return manifest


def shard_paths(shard_dir: Path | str, split: str | None = None) -> list[Path]:
    """The shard files the manifest lists (of one split, or all), in order."""
    shard_dir = Path(shard_dir)
    manifest = read_manifest(shard_dir)
    return [shard_dir / s["name"] for s in manifest["shards"] if split is None or s["split"] == split]


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
        raise ShardError(
            f"not a JSON object: {type(sample).__name__}", source=str(tar_path), record=key, field="json"
        )
    return sample


def iter_samples(
    shard_dir: Path | str, split: str | None = None, *, images: bool = True
) -> Iterator[tuple[str, dict]]:
    """Every sample of a shard folder (or one split), shard by shard."""
    for path in shard_paths(shard_dir, split):
        yield from iter_tar_samples(path, images=images)


class ShardTarWriter:
    """Writes one shard's tar into an open binary file, hashing and counting it.

    The bytes are those of webdataset's TarWriter over tarfile (ustar headers,
    a sample's members in sorted order, two end blocks, padding to a whole
    10 KiB record): tests/export/test_shard_tar_writer.py compares them.
    Why not those two (benchmarks/shard_io.py, CPU per 34 MB): tarfile copies
    each member through a BytesIO in 16 KiB pieces and builds each header in
    Python (23 us); hashing what it wrote needed a wrapper that gathered the
    pieces again. Here a header is a patched template (tarfile's own), a
    member's bytes go to the file whole, and sha256 runs on a helper thread
    over the same buffers (hashlib lets go of the GIL), in order.
    `close()` ends the archive and returns its sha256; the caller fsyncs.
    """

    HASH_BATCH = 2 << 20  # bytes handed to the hashing thread at a time
    _IN_FLIGHT = 2  # batches hashed behind the writes at most (bounds held memory)

    def __init__(
        self, f, *, user: str = "trajforge", group: str = "trajforge", mode: int = 0o644, mtime: int = 0
    ):
        self.f, self.size = f, 0
        self._sha = hashlib.sha256()
        self._hasher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="shard-sha256")
        self._pending: deque = deque()
        self._unhashed: list = []
        self._unhashed_bytes = 0
        self._meta = dict(uname=user, gname=group, mode=mode, mtime=mtime)
        self._template = bytes(self._tarinfo("x", 0).tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape"))

    def _tarinfo(self, name: str, size: int) -> tarfile.TarInfo:
        info = tarfile.TarInfo(name)
        info.size = size
        for k, v in self._meta.items():
            setattr(info, k, v)
        return info

    def _header(self, name: str, size: int) -> bytes:
        raw = name.encode("utf-8", "surrogateescape")
        if len(raw) >= 100 or not name.isascii() or size >= 8**11:
            # Past a plain ustar header (tarfile adds a pax one): tarfile's own.
            return self._tarinfo(name, size).tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")
        h = bytearray(self._template)
        h[0:100] = raw.ljust(100, b"\0")
        h[124:136] = b"%011o\0" % size
        h[148:156] = b" " * 8  # the checksum counts its own field as spaces
        h[148:155] = b"%06o\0" % sum(h)
        return bytes(h)

    def write(self, record: dict[str, Any]) -> int:
        """A sample, webdataset style: {"__key__": key, ext: bytes, ...}; its payload bytes."""
        key = record["__key__"]
        pieces, payload = [], 0
        for ext in sorted(k for k in record if not k.startswith("_")):
            data = record[ext]
            if not isinstance(data, (bytes, bytearray, memoryview)):
                raise ValueError(f"sample {key}: member {ext} is {type(data).__name__}, not bytes")
            if not isinstance(data, bytes):  # hashed later, on the thread: must not change
                data = bytes(data)
            pieces += [self._header(f"{key}.{ext}", len(data)), data]
            payload += len(data)
            if len(data) % tarfile.BLOCKSIZE:
                pieces.append(tarfile.NUL * (tarfile.BLOCKSIZE - len(data) % tarfile.BLOCKSIZE))
        self._out(pieces)
        return payload

    def _out(self, pieces: list) -> None:
        for piece in pieces:
            self.f.write(piece)
            self.size += len(piece)
        # The pieces are the caller's immutable bytes (or ours): hashed without a
        # copy, a few MiB a hand-over (a hand-over per sample cost 20% more CPU).
        self._unhashed += pieces
        self._unhashed_bytes += sum(len(p) for p in pieces)
        if self._unhashed_bytes >= self.HASH_BATCH:
            self._submit()

    def _submit(self) -> None:
        self._pending.append(self._hasher.submit(self._hash, self._unhashed))
        self._unhashed, self._unhashed_bytes = [], 0
        while len(self._pending) > self._IN_FLIGHT:
            self._pending.popleft().result()

    def _hash(self, pieces: list) -> None:
        for piece in pieces:
            self._sha.update(piece)

    def close(self) -> str:
        """Writes the end of the archive; the sha256 of the whole file."""
        end = 2 * tarfile.BLOCKSIZE
        end += -(self.size + end) % tarfile.RECORDSIZE
        self._out([tarfile.NUL * end])
        self._submit()
        try:
            while self._pending:
                self._pending.popleft().result()
        finally:
            self._hasher.shutdown()
        self.f.flush()
        return self._sha.hexdigest()

    def abort(self) -> None:
        """Stops hashing (a failed write); the caller removes the file."""
        self._hasher.shutdown(cancel_futures=True)


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
