"""Shard sets on object storage: written through a local folder, published with the
manifest last.

Every set writer (trajforge.publish.export, synthesis.set_writer, synthesis.grounding_writer)
writes a folder: `<split>-NNNNNN.tar`, `quarantine.jsonl`, `manifest.json` last, with
a resumable staging folder inside. For an s3:// destination the same writer runs
on a local mirror and `publish_set` copies the finished set up:

1. the manifest already there, if it differs from the new one, is removed first:
   from then on a consumer finds no manifest (the set is being replaced) instead
   of an old manifest whose shard names now hold new bytes;
2. each listed shard is put whole (a single put is atomic: an object is whole or
   absent), then the other files (quarantine);
3. the manifest is put LAST: a consumer that sees it sees every shard it lists;
4. tars that the new manifest does not list (an earlier, bigger export) are removed.

A failure at 2 raises ObjectStoreError naming the object, and no manifest is put.
A killed run leaves the local staging folder, so the next run resumes the export
(trajforge.publish.resume) and publishes again; shards are re-put whole, so nothing
half-written or duplicated is ever listed.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from trajforge.publish.shards import MANIFEST, SHARD_NAME, ShardError, read_manifest
from trajforge.store.object_folder import ObjectFolder
from trajforge.store.object_store import is_url


@dataclass
class PublishResult:
    url: str
    shards: int  # shards put
    bytes: int  # bytes put (shards and other files)
    removed: int  # stale tars removed
    unchanged: bool  # the destination already held this set: nothing put


def spool_dir(url: str) -> Path:
    """The local mirror of a set at `url`: $TRAJFORGE_SPOOL_DIR (else the temp folder)
    /shards/<protocol>/<bucket>/<prefix>; fixed per URL so a killed export resumes."""
    base = Path(os.environ.get("TRAJFORGE_SPOOL_DIR") or Path(tempfile.gettempdir()) / "trajforge-spool")
    protocol, path = url.rstrip("/").split("://", 1)
    return base / "shards" / protocol / path


@contextmanager
def shard_destination(
    dest: str | Path, *, local: Path | None = None, storage_options: dict | None = None
) -> Iterator[Path]:
    """The folder a set writer writes to; a URL's set is published when the block ends.

        with shard_destination("s3://bucket/shards/sandbox") as out:
            export_shards(store, out, ...)

    A local `dest` is yielded as it is (nothing else happens). For a URL, `local`
    (default: spool_dir(dest)) holds the set, which stays there after publishing so
    that readers on this node can use it. An exception inside the block publishes
    nothing.
    """
    if not is_url(dest):
        yield Path(dest)
        return
    folder = Path(local) if local is not None else spool_dir(str(dest))
    folder.mkdir(parents=True, exist_ok=True)
    yield folder
    publish_set(folder, str(dest), storage_options)


def _top_level_files(local_dir: Path) -> list[Path]:
    """Files a set holds beside its shards (quarantine.jsonl...); hidden files, the
    staging folder and the manifest itself are not published."""
    return sorted(
        p
        for p in local_dir.iterdir()
        if p.is_file() and not p.name.startswith(".") and p.name != MANIFEST and not SHARD_NAME.match(p.name)
    )


def publish_set(
    local_dir: Path | str, url: str, storage_options: dict | None = None, **folder_kw
) -> PublishResult:
    """Put the finished set in `local_dir` at `url`, manifest last (see the module doc)."""
    local_dir = Path(local_dir)
    manifest = read_manifest(local_dir)  # a set without its manifest is not finished
    manifest_bytes = (local_dir / MANIFEST).read_bytes()
    listed = [s["name"] for s in manifest["shards"]]
    for i, s in enumerate(manifest["shards"]):
        path = local_dir / s["name"]
        if not path.is_file() or path.stat().st_size != s["bytes"]:
            raise ShardError(
                f"listed shard missing or not {s['bytes']} bytes: nothing published",
                source=str(path),
                record=i,
                field="shards.bytes",
            )
    dest = ObjectFolder(url, storage_options, **folder_kw)
    remote = dest.sizes()
    old_manifest = dest.get_or_none(MANIFEST, "manifest") if MANIFEST in remote else None
    if old_manifest == manifest_bytes and all(
        remote.get(s["name"]) == s["bytes"] for s in manifest["shards"]
    ):
        return PublishResult(dest.url, 0, 0, 0, unchanged=True)
    if old_manifest is not None:
        dest.remove(MANIFEST, "old manifest")
    put = 0
    for name in listed:
        put += dest.put_file(name, local_dir / name, "shard")
    for path in _top_level_files(local_dir):
        put += dest.put_file(path.name, path, "file")
    dest.put_bytes(MANIFEST, manifest_bytes, "manifest")  # the commit
    stale = [n for n in remote if "/" not in n and SHARD_NAME.match(n) and n not in set(listed)]
    for name in stale:
        dest.remove(name, "stale shard")
    return PublishResult(dest.url, len(listed), put + len(manifest_bytes), len(stale), unchanged=False)


def _manifest_bytes(dest: ObjectFolder) -> bytes:
    data = dest.get_or_none(MANIFEST, "manifest")
    if data is None:
        raise ShardError(
            "no manifest.json (export not finished, or being replaced)", source=dest.url_of(MANIFEST)
        )
    return data


def read_remote_manifest(url: str, storage_options: dict | None = None) -> dict:
    """The manifest of a set at `url`, checked as trajforge.publish.shards.read_manifest checks a folder's."""
    dest = ObjectFolder(url, storage_options)
    data = _manifest_bytes(dest)
    with tempfile.TemporaryDirectory(prefix="trajforge-manifest-") as tmp:
        (Path(tmp) / MANIFEST).write_bytes(data)
        try:
            return read_manifest(tmp)
        except ShardError as err:  # name the object, not the temporary copy
            raise ShardError(
                err.reason, source=dest.url_of(MANIFEST), record=err.record, field=err.field
            ) from None


@contextmanager
def fetched_set(url: str, storage_options: dict | None = None) -> Iterator[Path]:
    """A set at `url` downloaded into a temporary folder (for `trajforge stats` and
    `validate`, which read every byte anyway): the manifest, the shards it lists and
    any other tar under the prefix (validate reports unlisted ones)."""
    dest = ObjectFolder(url, storage_options)
    manifest_bytes = _manifest_bytes(dest)
    with tempfile.TemporaryDirectory(prefix="trajforge-set-") as tmp:
        folder = Path(tmp)
        (folder / MANIFEST).write_bytes(manifest_bytes)
        manifest = json.loads(manifest_bytes)
        listed = {s.get("name") for s in manifest.get("shards", []) if isinstance(s, dict)}
        for name, size in sorted(dest.sizes().items()):
            if "/" in name or name == MANIFEST:
                continue
            if name in listed or name.endswith(".tar") or name.endswith(".jsonl"):
                dest.get_file(name, folder / name, size, "shard" if name.endswith(".tar") else "file")
        yield folder
