"""Whole files under one prefix of object storage (an fsspec URL), for the curated
table and the shard sets: put, get, list, delete, each request with
trajforge/store/object_store.py's bounded retries and per-request timeout, and every
error naming the object.

A put of one object is atomic on S3 (and GCS, MinIO, moto): a reader sees the
whole object or none, never part of it. What a folder of objects lacks is a
rename; callers commit with a marker object put last (see shard_publish.py,
curated_object.py).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from trajforge.store.object_store import REQUEST_TIMEOUT_S, RETRIES, filesystem, put_if_absent, retry

T = TypeVar("T")

# A whole-file put of a big shard takes longer than one small request: its timeout
# grows with the size at this rate (a slow link still finishes; a dead one fails).
MIN_PUT_RATE = 4 * 2**20  # bytes/s


class ObjectFolder:
    """`url`: s3://bucket/prefix (any fsspec protocol); `storage_options` go to fsspec."""

    def __init__(
        self,
        url: str,
        storage_options: dict | None = None,
        *,
        attempts: int = RETRIES,
        timeout: float = REQUEST_TIMEOUT_S,
    ):
        self.url = url.rstrip("/")
        self.protocol = self.url.split("://", 1)[0]
        self.storage_options = dict(storage_options or {})
        self.fs = filesystem(self.url, storage_options)
        self.root = self.fs._strip_protocol(self.url)
        self.attempts, self.timeout = attempts, timeout

    def child(self, name: str) -> ObjectFolder:
        return ObjectFolder(
            f"{self.url}/{name}", self.storage_options, attempts=self.attempts, timeout=self.timeout
        )

    def path(self, name: str) -> str:
        return f"{self.root}/{name}"

    def url_of(self, name: str) -> str:
        return f"{self.url}/{name}"

    def _retry(self, op: Callable[[], T], what: str) -> T:
        return retry(op, what, self.attempts)

    # -- writing ------------------------------------------------------------------
    def put_bytes(self, name: str, data: bytes, what: str = "object") -> None:
        p = self.path(name)
        self._retry(lambda: self.fs.pipe_file(p, data, timeout=self.timeout), f"{what} {self.url_of(name)}")

    def put_file(self, name: str, local: Path, what: str = "object") -> int:
        """One object from a local file, put whole (a retry puts it again from the start)."""
        p, size = self.path(name), Path(local).stat().st_size
        timeout = max(self.timeout, size / MIN_PUT_RATE)
        self._retry(lambda: self.fs.put_file(str(local), p, timeout=timeout), f"{what} {self.url_of(name)}")
        return size

    def put_if_absent(self, name: str, data: bytes, what: str = "object") -> bool:
        p = self.path(name)
        return self._retry(
            lambda: put_if_absent(self.fs, p, data, self.timeout), f"{what} {self.url_of(name)}"
        )

    def remove(self, name: str, what: str = "object") -> None:
        p = self.path(name)

        def rm():
            try:
                self.fs.rm_file(p, timeout=self.timeout)
            except FileNotFoundError:
                pass

        self._retry(rm, f"removing {what} {self.url_of(name)}")

    # -- reading ------------------------------------------------------------------
    def get_bytes(self, name: str, what: str = "object") -> bytes:
        p = self.path(name)
        return self._retry(lambda: self.fs.cat_file(p, timeout=self.timeout), f"{what} {self.url_of(name)}")

    def get_or_none(self, name: str, what: str = "object") -> bytes | None:
        try:
            return self.get_bytes(name, what)
        except FileNotFoundError:
            return None

    def get_file(self, name: str, local: Path, size: int | None = None, what: str = "object") -> None:
        """Download to `local` through a temporary name (a cut download is never taken as whole)."""
        local = Path(local)
        local.parent.mkdir(parents=True, exist_ok=True)
        tmp = local.with_name(f".{local.name}.part")
        p = self.path(name)
        timeout = max(self.timeout, (size or 0) / MIN_PUT_RATE)
        try:
            self._retry(lambda: self.fs.get_file(p, str(tmp), timeout=timeout), f"{what} {self.url_of(name)}")
            tmp.replace(local)
        finally:
            tmp.unlink(missing_ok=True)

    def sizes(self, prefix: str = "") -> dict[str, int]:
        """{name relative to this folder: size} of every object under `prefix` (recursive)."""
        base = self.path(prefix).rstrip("/") if prefix else self.root

        def find():
            try:
                return self.fs.find(base, detail=True, timeout=self.timeout)
            except FileNotFoundError:
                return {}

        found = self._retry(find, f"listing {self.protocol}://{base}")
        return {
            p[len(self.root) + 1 :]: int(info.get("size") or 0)
            for p, info in found.items()
            if info.get("type", "file") == "file"
        }
