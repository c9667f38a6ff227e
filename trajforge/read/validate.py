"""`trajforge validate`: check a shard folder against its manifest, sample by sample.

Shard level: every listed shard exists, its bytes, sha256, sample and
trajectory counts match the manifest, and no unlisted `.tar` lies beside them.
Sample level: the key is `<trajectory>_s0004` (no dots), the sample has its
JSON and exactly one image, the JSON validates against the schema
(`schemas.arrow.row_to_step` / `row_to_trajectory`), and its trajectory id and
index give back the key. Across the folder: no key twice, a trajectory in one
split only, its steps 0..num_steps-1 all present (with index gaps allowed, as
a curated export's manifest says by `"index_gaps": true`: every index < num_steps).

A reasoning set (manifest kind "reasoning_set", synthesis/set_writer.py) is
checked as what it is: keys `<trajectory>_sNNNN_<mode>`, each JSON answer
parses back to the recorded action, its token spans slice what they claim,
the mode agrees with the answer (a thought only in "reason"), and every step
comes in both modes (the 1:1 mix). The shard-level checks are the same.

Held out: no task template and no instruction (trajforge.publish.holdout's
normalised form) may appear in more than one split; each one that does is a
problem naming the template or instruction and its splits (counted in
`Report.templates_in_several_splits` / `instructions_in_several_splits`).

The scan goes on past a problem so one run lists them all; each problem is a
`SchemaError` naming the shard file, the sample key and the field.
"""

from __future__ import annotations

import hashlib
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from schemas.errors import SchemaError
from trajforge.publish.shards import MANIFEST, read_manifest
from trajforge.read.sample_checks import sample_checker
from trajforge.read.split_groups import SplitGroups


@dataclass
class Report:
    shard_dir: Path
    shards: int = 0
    samples: int = 0
    trajectories: int = 0
    bytes: int = 0
    problems: list[SchemaError] = field(default_factory=list)
    templates_in_several_splits: int = 0
    instructions_in_several_splits: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        head = "ok" if self.ok else f"FAILED ({len(self.problems)} problem(s))"
        return (
            f"{head}: {self.shard_dir}: {self.shards} shards, {self.samples} samples, "
            f"{self.trajectories} trajectories, {self.bytes / 1e6:.1f} MB"
        )


@dataclass
class _Traj:
    split: str
    shard: str
    num_steps: int | None = None
    indices: set[int] = field(default_factory=set)


def validate(shard_dir: Path | str, *, images: bool = True, allow_index_gaps: bool | None = None) -> Report:
    """Check a shard folder; a manifest that cannot be read raises ShardError.

    With images=False the image members are not opened (their header is
    otherwise parsed by PIL to check the format; pixels are not decoded).
    allow_index_gaps: None follows the manifest's `index_gaps`.
    """
    shard_dir = Path(shard_dir)
    manifest = read_manifest(shard_dir)
    report = Report(shard_dir=shard_dir)
    problem = report.problems.append
    if allow_index_gaps is None:
        allow_index_gaps = manifest.get("index_gaps") is True
    _check_manifest_totals(manifest, shard_dir / MANIFEST, problem)
    listed = {s["name"] for s in manifest["shards"]}
    for path in sorted(shard_dir.glob("*.tar")):
        if path.name not in listed:
            problem(SchemaError("shard file not listed in manifest.json", source=str(path)))

    keys: set[str] = set()
    trajs: dict[str, _Traj] = {}
    check = sample_checker(manifest)
    groups = check.groups = SplitGroups()
    for entry in manifest["shards"]:
        path = shard_dir / entry["name"]
        src = str(path)
        if not path.is_file():
            problem(SchemaError("missing: listed in manifest.json but not on disk", source=src))
            continue
        report.shards += 1
        size, samples = _check_shard(path, entry, check, images, keys, trajs, problem)
        report.bytes += size
        report.samples += samples
    check.finish(problem)
    report.templates_in_several_splits, report.instructions_in_several_splits = groups.finish(problem)
    for tid, t in sorted(trajs.items()):
        if t.num_steps is None:  # none of its samples was valid: reported already
            continue
        if allow_index_gaps:
            outside = sorted(i for i in t.indices if not 0 <= i < t.num_steps)[:5]
            if outside:
                problem(
                    SchemaError(
                        f"step indices {outside} are not < num_steps={t.num_steps}",
                        source=t.shard,
                        record=tid,
                        field="index",
                    )
                )
            continue
        want = set(range(t.num_steps))
        if t.indices != want:
            missing = sorted(want - t.indices)[:5]
            problem(
                SchemaError(
                    f"trajectory has steps {len(t.indices)} of num_steps={t.num_steps} (missing {missing})",
                    source=t.shard,
                    record=tid,
                    field="num_steps",
                )
            )
    report.trajectories = len(trajs)
    return report


def _check_shard(
    path: Path, entry: dict, check, images: bool, keys: set[str], trajs: dict[str, _Traj], problem
) -> tuple[int, int]:
    """Check one shard file against its manifest entry and its samples; (bytes, samples).

    One read of the file: the tar is parsed from the stream that is hashed.
    Sample problems wait so that the shard's own (bytes, sha256) come first.
    """
    src = str(path)
    found: list[SchemaError] = []
    samples, tids = 0, set()
    check.groups.split = entry["split"]
    with open(path, "rb") as f:
        stream = _HashingReader(f)
        try:
            for key, members in _tar_samples(stream):
                samples += 1
                tid = check(key, members, src, images, found.append)
                if key in keys:
                    found.append(
                        SchemaError(
                            "duplicate sample key (also earlier in the folder)",
                            source=src,
                            record=key,
                            field="__key__",
                        )
                    )
                keys.add(key)
                if tid is not None:
                    tids.add(tid[0])
                    _note(trajs, tid, entry, src, key, found.append)
            damaged = None
        except (tarfile.TarError, OSError) as exc:
            damaged = SchemaError(f"damaged shard after {samples} samples: {exc}", source=src)
        stream.drain()
    if stream.size != entry["bytes"]:
        problem(
            SchemaError(f"{stream.size} bytes, manifest says {entry['bytes']}", source=src, field="bytes")
        )
    digest = stream.sha.hexdigest()
    if digest != entry["sha256"]:
        problem(
            SchemaError(
                f"sha256 {digest[:12]}... differs from the manifest's {str(entry['sha256'])[:12]}...",
                source=src,
                field="sha256",
            )
        )
    for p in found:
        problem(p)
    if damaged is not None:
        problem(damaged)
        return stream.size, samples
    if samples != entry["samples"]:
        problem(
            SchemaError(f"{samples} samples, manifest says {entry['samples']}", source=src, field="samples")
        )
    if len(tids) != entry["trajectories"]:
        problem(
            SchemaError(
                f"{len(tids)} trajectories, manifest says {entry['trajectories']}",
                source=src,
                field="trajectories",
            )
        )
    return stream.size, samples


def _check_manifest_totals(manifest: dict, path: Path, problem) -> None:
    """The manifest's per-split and total figures agree with its shard list."""
    shards = manifest["shards"]
    names = [s["name"] for s in shards]
    if len(set(names)) != len(names):
        problem(SchemaError("a shard is listed twice", source=str(path), field="shards.name"))
    for split, info in manifest["splits"].items():
        mine = [s for s in shards if s["split"] == split]
        if not isinstance(info, dict):
            problem(SchemaError("not an object", source=str(path), field=f"splits.{split}"))
            continue
        if "shards" in info and info["shards"] != [s["name"] for s in mine]:
            problem(
                SchemaError(
                    "differs from the shards of this split", source=str(path), field=f"splits.{split}.shards"
                )
            )
        if "samples" in info and info["samples"] != sum(s["samples"] for s in mine):
            problem(
                SchemaError(
                    f"{info['samples']}, the shards hold {sum(s['samples'] for s in mine)}",
                    source=str(path),
                    field=f"splits.{split}.samples",
                )
            )
    for s in shards:
        if s["split"] not in manifest["splits"]:
            problem(
                SchemaError(
                    f"split {s['split']!r} of {s['name']} is not in splits",
                    source=str(path),
                    field="shards.split",
                )
            )
    totals = manifest.get("totals") or {}
    for fld in ("samples", "bytes"):
        if fld in totals and totals[fld] != sum(s[fld] for s in shards):
            problem(
                SchemaError(
                    f"{totals[fld]}, the shards add up to {sum(s[fld] for s in shards)}",
                    source=str(path),
                    field=f"totals.{fld}",
                )
            )
    if "shards" in totals and totals["shards"] != len(shards):
        problem(
            SchemaError(f"{totals['shards']}, {len(shards)} listed", source=str(path), field="totals.shards")
        )


class _HashingReader:
    """A read-only file that hashes and counts what is read through it."""

    def __init__(self, f):
        self.f, self.sha, self.size = f, hashlib.sha256(), 0

    def read(self, n: int = -1) -> bytes:
        data = self.f.read(n)
        self.sha.update(data)
        self.size += len(data)
        return data

    def drain(self) -> None:
        """Hash the rest (the tar's end padding, or what follows damage)."""
        while self.read(1 << 20):
            pass


def _tar_samples(stream) -> Iterator[tuple[str, list[tuple[str, bytes]]]]:
    """(key, [(ext, bytes), ...]) per run of members sharing a key, in tar order.

    The tar is read as a stream ("r|"), never seeking, so the bytes it reads
    are the bytes hashed. Members are kept as a list (not a dict) so that a
    duplicated member is seen.
    """
    with tarfile.open(fileobj=stream, mode="r|") as tar:
        key, members = None, []
        for member in tar:
            if not member.isfile():
                continue
            stem, _, ext = member.name.partition(".")
            if stem != key:
                if key is not None:
                    yield key, members
                key, members = stem, []
            members.append((ext, tar.extractfile(member).read()))
        if key is not None:
            yield key, members


def _note(
    trajs: dict[str, _Traj], tid: tuple[str, int, int], entry: dict, src: str, key: str, problem
) -> None:
    """Remember which split holds a trajectory and which steps were seen."""
    trajectory_id, index, num_steps = tid
    t = trajs.setdefault(trajectory_id, _Traj(split=entry["split"], shard=src))
    if t.num_steps is None:
        t.num_steps = num_steps
    if t.split != entry["split"]:
        problem(
            SchemaError(
                f"trajectory in two splits ({t.split} and {entry['split']}): splits must be by trajectory",
                source=src,
                record=key,
                field="trajectory_id",
            )
        )
    t.indices.add(index)
