"""Plain `webdataset` reading shards from object storage.

webdataset (1.0) opens a URL through its `gopen` table, which knows pipe:, http(s),
gs (via gsutil) and a few more, but not s3://. `register_fsspec()` adds an fsspec
handler for s3:// (and the other object-store protocols), so a trainer's own
pipeline streams a published set with no copy on disk:

    from trajforge.read.webdataset_urls import register_fsspec, set_urls
    register_fsspec()                      # credentials/endpoint: AWS_* environment
    ds = wds.WebDataset(set_urls("s3://bucket/shards/sandbox", "train"), shardshuffle=False)

Without it, `pipe:` works as webdataset documents; `pipe_urls` gives
`pipe:python -m trajforge.store.object_cat <url>` for each shard (any fsspec URL).
"""

from __future__ import annotations

import shlex
import sys

from trajforge.publish.remote import read_remote_manifest

PROTOCOLS = ("s3", "s3a", "gcs", "az", "abfs", "memory")


def _gopen_fsspec(url: str, mode: str = "rb", bufsize: int = 8192, **kw):
    import fsspec

    if mode != "rb":
        raise ValueError(f"{url}: object-store shards are read-only here (mode {mode!r})")
    return fsspec.open(url, "rb").open()


def register_fsspec(protocols=PROTOCOLS) -> None:
    """Let webdataset's gopen open these protocols through fsspec (in this process;
    DataLoader workers forked from it inherit the table)."""
    import importlib

    gopen = importlib.import_module(
        "webdataset.gopen"
    )  # the module: the package re-exports a function by that name

    for proto in protocols:
        gopen.gopen_schemes[proto] = _gopen_fsspec


def set_urls(url: str, split: str | None = None, storage_options: dict | None = None) -> list[str]:
    """The shard URLs a published set's manifest lists (of one split, or all), in order."""
    manifest = read_remote_manifest(url, storage_options)
    return [
        f"{url.rstrip('/')}/{s['name']}" for s in manifest["shards"] if split is None or s["split"] == split
    ]


def pipe_urls(url: str, split: str | None = None, storage_options: dict | None = None) -> list[str]:
    """The same shards as `pipe:` URLs, for a webdataset that is not told about fsspec."""
    return [
        f"pipe:{shlex.quote(sys.executable)} -m trajforge.store.object_cat {shlex.quote(u)}"
        for u in set_urls(url, split, storage_options)
    ]
