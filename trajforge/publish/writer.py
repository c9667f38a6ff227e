"""Writing export shards: WebDataset tars rolled by count and bytes, each hashed
as it is written and journaled once it is durable (see `trajforge.publish.export`).

Reproducible: tar members carry mtime 0, uid/gid 0, fixed names and mode. A
finished shard is fsync'd, then its line goes to the staging folder's journal
(fsync'd too), so that a killed run can be resumed (`trajforge.publish.resume`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from trajforge.publish.samples import ShardSample, tar_file_bytes
from trajforge.publish.shards import ShardTarWriter
from trajforge.store.raw import atomic_write_bytes, path_error

JOURNAL = "journal.jsonl"  # in the staging folder: one line per finished shard
_MANIFEST_SHARD_FIELDS = ("name", "split", "samples", "trajectories", "bytes", "sha256")


class SplitWriter:
    """Writes one split's shards into the staging folder, rolling by count and bytes.

    A trajectory stays in one shard unless it alone is over a limit, so that a
    shard reader sees a trajectory's steps together.
    """

    def __init__(
        self,
        staging: Path,
        split: str,
        max_samples: int,
        max_bytes: int,
        journal: ShardJournal,
        resumed: list[dict] = (),
    ):
        self.staging, self.split = staging, split
        self.max_samples, self.max_bytes = max_samples, max_bytes
        self.journal = journal
        # Shards finished by a killed run: numbering goes on after them.
        self.shards: list[dict] = [{k: e[k] for k in _MANIFEST_SHARD_FIELDS} for e in resumed]
        self.image_exts: set[str] = {x for e in resumed for x in e["image_exts"]}  # for hf_features()
        self._tar = None

    def add_trajectory(self, samples: list[ShardSample]) -> None:
        try:
            self._add(samples)
        except OSError as exc:  # a full disk: say which shard could not be written
            raise self._write_error(exc) from exc

    def _write_error(self, exc: OSError) -> OSError:
        if exc.filename is not None:
            return exc
        where = self.staging / self._cur["name"] if self._tar is not None else self.staging
        return path_error(where, exc)

    def _add(self, samples: list[ShardSample]) -> None:
        sizes = [s.tar_bytes() for s in samples]
        if self._tar is not None and not self._fits(len(samples), sum(sizes)):
            self._close()
        for sample, size in zip(samples, sizes):
            if self._tar is not None and not self._fits(1, size):
                self._close()  # this trajectory alone is over a limit
            if self._tar is None:
                self._open()
            self._tar.write(sample.record())
            self.image_exts.add(sample.image_ext)
            cur = self._cur
            cur["samples"] += 1
            cur["payload"] += size
            cur["tids"].add(sample.trajectory_id)
            cur["exts"].add(sample.image_ext)
            cur["last"] = sample

    def _fits(self, n: int, size: int) -> bool:
        cur = self._cur
        return (
            cur["samples"] + n <= self.max_samples and tar_file_bytes(cur["payload"] + size) <= self.max_bytes
        )

    def _open(self) -> None:
        name = f"{self.split}-{len(self.shards):06d}.tar"
        f = open(self.staging / name, "wb")
        self._tar = ShardTarWriter(f, user="trajforge", group="trajforge", mode=0o644, mtime=0)
        self._cur = {
            "name": name,
            "f": f,
            "samples": 0,
            "payload": 0,
            "tids": set(),
            "exts": set(),
            "last": None,
        }

    def _close(self) -> None:
        f = self._cur["f"]
        digest = self._tar.close()
        os.fsync(f.fileno())
        f.close()
        cur = self._cur
        shard = {
            "name": cur["name"],
            "split": self.split,
            "samples": cur["samples"],
            "trajectories": len(cur["tids"]),
            "bytes": self._tar.size,
            "sha256": digest,
        }
        self.shards.append(shard)
        self._tar = None
        fsync_dir(self.staging)
        # Durable before it counts: the shard is fsync'd above, its line here.
        self.journal.append(
            dict(
                shard,
                last_trajectory_id=cur["last"].trajectory_id,
                last_key=cur["last"].key,
                image_exts=sorted(cur["exts"]),
            )
        )

    def finish(self) -> list[dict]:
        if self._tar is not None:
            try:
                self._close()
            except OSError as exc:
                raise self._write_error(exc) from exc
        return self.shards

    def abort(self) -> None:
        if self._tar is not None:
            try:
                self._tar.abort()
            finally:
                self._cur["f"].close()
                self._tar = None


class ShardJournal:
    """The staging folder's list of finished shards: JSON lines, each fsync'd."""

    def __init__(self, staging: Path):
        self.path = staging / JOURNAL

    def load(self) -> list[dict]:
        """The journaled shards; a torn last line (killed mid-write) is ignored."""
        try:
            lines = self.path.read_bytes().split(b"\n")
        except FileNotFoundError:
            return []
        entries = []
        for line in lines[:-1]:  # the part after the last newline was never finished
            try:
                entry = json.loads(line)
            except ValueError:
                break
            if not isinstance(entry, dict):
                break
            entries.append(entry)
        return entries

    def append(self, entry: dict) -> None:
        with open(self.path, "ab") as f:
            f.write(json.dumps(entry, sort_keys=True, ensure_ascii=False).encode() + b"\n")
            f.flush()
            os.fsync(f.fileno())

    def rewrite(self, entries: list[dict]) -> None:
        atomic_write_bytes(
            self.path,
            b"".join(json.dumps(e, sort_keys=True, ensure_ascii=False).encode() + b"\n" for e in entries),
        )


def fsync_dir(path: Path) -> None:
    """Makes a new entry in the folder durable (the staging folder's name)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
