"""Streaming loaders for training: a PyTorch dataset over a shard folder, and `datasets`.

`ShardDataset(shard_dir, split)` streams one split of an export with the
`webdataset` library: the shard list comes from the manifest, shards are split
by node (rank / world_size) and by DataLoader worker, samples pass a seeded
shuffle buffer and come out decoded as plain dicts:

    {"key": "<trajectory>_s0004", "image": PIL image or uint8 CHW tensor,
     "shard": "train-000003.tar", "trajectory_id": ..., "index": ...,
     "action": {...}, "task": {...}, ...}   # every field of the sample's JSON

    ds = ShardDataset(d, "train", shuffle=1000, seed=0)
    loader = DataLoader(ds, batch_size=32, num_workers=8, collate_fn=collate_lists)
    for epoch in range(n):
        ds.set_epoch(epoch)          # new shard order and buffer shuffle
        for batch in loader: ...

Two modes:

- Default (`resampled=False`): each epoch reads every sample of the split
  exactly once across all ranks and workers (shards are dealt out, so a rank's
  share is whole shards; a rank or worker dealt none reads nothing).
- `resampled=True` for DDP: every rank draws shards with replacement, endless,
  and an epoch is cut at `epoch_samples` samples per rank (default: the split's
  samples / world_size). All ranks therefore see the same number of samples
  and none runs out early, which would hang a collective.

The samples of the synthesised sets (the reasoning, Chinese and grounding sets)
carry JSON fields of their own named like the loader's (`image`: the frame), so
they are read with `fields="nested"`: the sample's JSON comes whole under
`"json"` beside `key`, `image` and `shard`. `read_split` reads one split so, in
file order, images undecoded; training reads its sets through it
(training.data.iter_reasoning_samples, training.grounding_eval):

    for sample in read_split(d, "train"):   # {"key", "image": bytes, "shard", "json": {...}}

`load_hf(shard_dir, split)` is the one-call `datasets.load_dataset("webdataset",
...)` with the declared features (see `trajforge.publish.shards.hf_features`).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from itertools import islice
from pathlib import Path
from typing import Any

import webdataset as wds
from webdataset.tariterators import group_by_keys, tar_file_expander
from webdataset.utils import make_seed

from trajforge.publish.remote import read_remote_manifest
from trajforge.publish.shards import IMAGE_EXTS, ShardError, hf_data_files, hf_features, read_manifest
from trajforge.store.object_store import is_url

# image= argument -> webdataset image spec (PIL RGB, or torch uint8 CHW RGB).
IMAGE_SPECS = {"pil": "pil", "tensor": "torchrgb8"}
FIELDS = ("flat", "nested")  # the JSON's fields beside the loader's, or whole under "json"
REQUIRED_FIELDS = ("trajectory_id", "index", "action")
_OWN_FIELDS = ("key", "image", "shard")  # added beside the JSON's fields


def _tar_error(exn: Exception) -> bool:
    """webdataset handler: re-raise a tar/stream error as a ShardError naming the shard.

    webdataset appends (stream, url) to the exception's args before calling us.
    """
    if isinstance(exn, ShardError):
        raise exn
    url = next((a for a in reversed(exn.args) if isinstance(a, str) and a.endswith(".tar")), None)
    first = exn.args[0] if exn.args else exn
    raise ShardError(f"cannot read the shard: {type(exn).__name__}: {first}", source=url) from exn


def _rank_and_world(rank: int | None, world_size: int | None) -> tuple[int, int]:
    if (rank is None) != (world_size is None):
        raise ValueError("give both rank and world_size, or neither")
    if rank is None:
        import torch.distributed as dist  # deferred: torch is heavy, and only a loop needs it

        # Read here, in the main process: DataLoader workers have no process group.
        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
        return 0, 1
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is not in [0, world_size={world_size})")
    return rank, world_size


def _worker() -> tuple[int, int]:
    import torch.utils.data  # deferred: torch is heavy, and only a loop needs it

    info = torch.utils.data.get_worker_info()
    return (0, 1) if info is None else (info.id, info.num_workers)


def _share(n: int, part: int, parts: int) -> int:
    """Part `part` of n split into `parts` near-equal whole pieces (they sum to n)."""
    return n // parts + (1 if part < n % parts else 0)


class ShardDataset(wds.DataPipeline):
    """One split of a shard folder as a streaming, decoded PyTorch IterableDataset.

    shuffle: shuffle-buffer size in samples (0: file order, for evaluation).
    seed: with the epoch, rank and worker, fixes shard order and buffer shuffle.
    rank, world_size: the node split; default torch.distributed's, else 0 of 1.
    resampled, epoch_samples: see the module doc (epoch_samples is per rank).
    image: "pil", "tensor" (uint8, 3 x H x W) or "bytes" (undecoded).
    fields: "flat" (the export's samples: their JSON's fields beside key, image and
    shard) or "nested" (any set's: the JSON whole under "json"); see the module doc.
    """

    def __init__(
        self,
        shard_dir: Path | str,
        split: str = "train",
        *,
        shuffle: int = 1000,
        seed: int = 0,
        rank: int | None = None,
        world_size: int | None = None,
        resampled: bool = False,
        epoch_samples: int | None = None,
        image: str = "pil",
        storage_options: dict | None = None,
        fields: str = "flat",
    ):
        # A folder, or a set published to object storage (s3://bucket/prefix, see
        # trajforge.publish.remote): shards then stream through fsspec, never land on disk.
        self.remote = is_url(str(shard_dir))
        self.storage_options = storage_options
        self.shard_dir = str(shard_dir).rstrip("/") if self.remote else Path(shard_dir)
        manifest = (
            read_remote_manifest(self.shard_dir, storage_options)
            if self.remote
            else read_manifest(self.shard_dir)
        )
        shards = [s for s in manifest["shards"] if s["split"] == split]
        if not shards:
            raise ShardError(
                f"no shards for split {split!r} (splits: {sorted(manifest['splits'])})",
                source=f"{self.shard_dir}/manifest.json",
                field="shards.split",
            )
        if image != "bytes" and image not in IMAGE_SPECS:
            raise ValueError(f"image must be one of {sorted(IMAGE_SPECS) + ['bytes']}, not {image!r}")
        if shuffle < 0:
            raise ValueError(f"shuffle buffer size {shuffle} is negative")
        if fields not in FIELDS:
            raise ValueError(f"fields must be one of {list(FIELDS)}, not {fields!r}")
        self.fields = fields
        self.split, self.urls = split, [f"{self.shard_dir}/{s['name']}" for s in shards]
        self.samples = sum(s["samples"] for s in shards)  # the whole split, all ranks
        self.rank, self.world_size = _rank_and_world(rank, world_size)
        if not resampled and len(self.urls) < self.world_size:
            raise ValueError(
                f"split {split!r} has {len(self.urls)} shards for {self.world_size} "
                "ranks: some ranks would read nothing; export smaller shards or "
                "use resampled=True"
            )
        self.shuffle_size, self.seed, self.epoch = shuffle, seed, 0
        self.resampled = resampled
        if epoch_samples is not None and epoch_samples < 1:
            raise ValueError(f"epoch_samples must be positive, not {epoch_samples}")
        self.epoch_samples = epoch_samples or max(1, self.samples // self.world_size)
        self.image = image
        self._decode_image = None if image == "bytes" else wds.imagehandler(IMAGE_SPECS[image])
        super().__init__(self._shard_urls, self._samples, self._shuffled, self._decoded)

    def set_epoch(self, epoch: int) -> None:
        """Reshuffle for this epoch. Call before iterating the DataLoader; workers
        copy the dataset when an epoch starts (so not with persistent_workers=True)."""
        self.epoch = epoch

    def with_epoch(self, nsamples: int) -> ShardDataset:
        """Bound a resampled epoch at nsamples per rank (webdataset's name; here the
        bound is per rank and dealt out over the DataLoader workers, not per worker)."""
        if not self.resampled:
            raise ValueError("with_epoch bounds a resampled stream; this one reads each sample once")
        if nsamples < 1:
            raise ValueError(f"with_epoch: nsamples must be positive, not {nsamples}")
        self.epoch_samples = nsamples
        return self

    def __iter__(self) -> Iterator[dict[str, Any]]:
        samples = self.iterator1()
        if self.resampled:  # the rank's bound, dealt out over its workers
            worker, workers = _worker()
            samples = islice(samples, _share(self.epoch_samples, worker, workers))
        return samples

    # -- pipeline stages (webdataset calls them in order) --

    def _shard_urls(self) -> Iterator[dict[str, str]]:
        worker, workers = _worker()
        if self.resampled:
            # Each rank and worker draws on its own stream: with replacement, endless.
            rng = random.Random(make_seed(self.seed, self.epoch, self.rank, worker))
            while True:
                yield {"url": rng.choice(self.urls)}
        urls = list(self.urls)
        if self.shuffle_size:  # same order on every rank, so that the deal stays disjoint
            random.Random(make_seed(self.seed, self.epoch)).shuffle(urls)
        for url in urls[self.rank :: self.world_size][worker::workers]:
            yield {"url": url}

    def _samples(self, urls: Iterator[dict]) -> Iterator[dict]:
        if not self.remote:
            return wds.tarfile_to_samples(handler=_tar_error)(urls)
        # webdataset's gopen has no s3:// handler: open each shard as an fsspec stream
        # and hand it to webdataset's own tar expander and key grouping.
        files = tar_file_expander(self._object_streams(urls), handler=_tar_error)
        return group_by_keys(files, handler=_tar_error)

    def _object_streams(self, urls: Iterator[dict]) -> Iterator[dict]:
        import fsspec  # deferred: only a set at a URL needs it

        for sample in urls:
            try:
                stream = fsspec.open(sample["url"], "rb", **(self.storage_options or {})).open()
            except Exception as exn:
                exn.args = exn.args + (sample["url"],)
                _tar_error(exn)  # raises a ShardError naming the shard
                continue
            try:  # asked for the next shard: this one is read to its end
                yield {**sample, "stream": stream}
            finally:
                stream.close()

    def _shuffled(self, samples: Iterator[dict]) -> Iterator[dict]:
        if not self.shuffle_size:
            return samples
        worker, _ = _worker()
        seed = make_seed(self.seed, self.epoch, self.rank, worker)
        return wds.shuffle(self.shuffle_size, initial=min(100, self.shuffle_size), seed=seed)(samples)

    def _decoded(self, samples: Iterator[dict]) -> Iterator[dict[str, Any]]:
        for raw in samples:
            yield self.decode(raw)

    def decode(self, raw: dict) -> dict[str, Any]:
        """A raw webdataset sample as the training dict; ShardError names shard, key and field."""
        url, key = raw.get("__url__"), raw.get("__key__")
        where = {"source": url, "record": key}
        exts = sorted(k for k in raw if k in IMAGE_EXTS)
        if len(exts) != 1:
            raise ShardError(
                f"expected one image member ({'/'.join(sorted(IMAGE_EXTS))}), found {exts or 'none'}",
                field="image",
                **where,
            )
        if "json" not in raw:
            raise ShardError("no .json member", field="json", **where)
        try:
            obj = json.loads(raw["json"])
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ShardError(f"bad JSON: {exc}", field="json", **where) from None
        if not isinstance(obj, dict):
            raise ShardError("JSON is not an object", field="json", **where)
        for field in REQUIRED_FIELDS + _OWN_FIELDS if self.fields == "flat" else ():
            if (field in obj) != (field in REQUIRED_FIELDS):
                raise ShardError(
                    "missing" if field in REQUIRED_FIELDS else "clashes with a loader field",
                    field=f"json.{field}",
                    **where,
                )
        data = raw[exts[0]]
        if self._decode_image is None:
            image = data
        else:
            try:
                image = self._decode_image(exts[0], data)
            except Exception as exc:  # PIL raises several types for a damaged image
                raise ShardError(f"cannot decode the image: {exc}", field=exts[0], **where) from None
        shard = str(url).rsplit("/", 1)[-1]
        if self.fields == "nested":
            return {"key": key, "image": image, "shard": shard, "json": obj}
        return {"key": key, "image": image, "shard": shard, **obj}


def read_split(shard_dir: Path | str, split: str) -> Iterator[dict[str, Any]]:
    """Every sample of one split in file order, {"key", "image" (bytes), "shard", "json"}
    (ShardDataset with fields="nested", no shuffle, one rank); nothing for a split the
    manifest lists no shard of."""
    manifest = (
        read_remote_manifest(str(shard_dir).rstrip("/"))
        if is_url(str(shard_dir))
        else read_manifest(Path(shard_dir))
    )
    if not any(s["split"] == split for s in manifest["shards"]):
        return iter(())
    return iter(
        ShardDataset(shard_dir, split, shuffle=0, rank=0, world_size=1, image="bytes", fields="nested")
    )


def collate_lists(batch: list[dict[str, Any]]) -> dict[str, Any]:
    """DataLoader collate_fn: a dict of lists (fields may be None, images differ in size).

    Tensor images of one shape are stacked (B x 3 x H x W): a worker then hands
    the batch over in one shared-memory block, not one per image (1.5x at 448x448
    with 2 workers, measured).
    """
    if not batch:
        return {}
    out = {k: [sample[k] for sample in batch] for k in batch[0]}
    images = out.get("image")
    import torch  # deferred: torch is heavy, and only a loop needs it

    if all(isinstance(im, torch.Tensor) for im in images) and len({tuple(im.shape) for im in images}) == 1:
        out["image"] = torch.stack(images)
    return out


def load_hf(shard_dir: Path | str, split: str, **kwargs):
    """`datasets.load_dataset("webdataset", ...)` for one split of a shard folder.

    Every split gets the same declared columns (the dataset's image extensions,
    `json`, `__key__`, `__url__`): one fixed key set per dataset, so a field
    that is null in the first samples cannot break the type guess. A sample's
    image sits in the column of its extension; the others are None. Only this
    split's shards are read. kwargs go to load_dataset (cache_dir, streaming...).
    """
    import datasets  # deferred: heavy, and optional (load_hf only)

    manifest = read_manifest(shard_dir)
    files = hf_data_files(shard_dir)
    if split not in files:
        raise ShardError(
            f"no shards for split {split!r} (splits with shards: {sorted(files)})",
            source=str(Path(shard_dir) / "manifest.json"),
            field="shards.split",
        )
    return datasets.load_dataset(
        "webdataset",
        data_files={split: files[split]},
        split=split,
        features=hf_features(manifest["sample"]["image_exts"]),
        **kwargs,
    )
