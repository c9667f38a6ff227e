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
import io
import json
import re
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from schemas.arrow import STEP_SCHEMA, TRAJECTORY_SCHEMA, row_to_step, row_to_trajectory
from schemas.errors import SchemaError
from synthesis.grounding_checks import record_problems
from synthesis.reasoning_set import MODES
from synthesis.set_stats import SetStats
from trajforge.publish.holdout import normalise_instruction
from trajforge.publish.shards import IMAGE_EXT, IMAGE_EXTS, MANIFEST, read_manifest, sample_key

KEY = re.compile(r"^[A-Za-z0-9_-]+_s\d{4}$")
SET_KEY = re.compile(r"^[A-Za-z0-9_-]+_s\d{4}_(reason|direct)$")
REASONING_SET = "reasoning_set"
GROUNDING = "grounding"
GROUND_KEY = re.compile(r"^[A-Za-z0-9_-]+_s\d{4}_ground$")
_STEP_FIELDS = frozenset(STEP_SCHEMA.names)
# The sample JSON holds the trajectory row too: its id once, its error renamed.
_TRAJ_FIELDS = {
    ("trajectory_error" if n == "error" else n): n for n in TRAJECTORY_SCHEMA.names if n != "trajectory_id"
}
# PIL's format name for each image member extension.
_PIL_FORMAT = {"png": "PNG", "jpg": "JPEG", "webp": "WEBP"}


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
    schema_version = manifest.get("schema_version")
    if allow_index_gaps is None:
        allow_index_gaps = manifest.get("index_gaps") is True
    _check_manifest_totals(manifest, shard_dir / MANIFEST, problem)
    listed = {s["name"] for s in manifest["shards"]}
    for path in sorted(shard_dir.glob("*.tar")):
        if path.name not in listed:
            problem(SchemaError("shard file not listed in manifest.json", source=str(path)))

    keys: set[str] = set()
    trajs: dict[str, _Traj] = {}
    check = (
        _SetSamples()
        if manifest.get("kind") == REASONING_SET
        else _GroundingRecords()
        if manifest.get("kind") == GROUNDING
        else _RecordSamples(schema_version)
    )
    groups = check.groups = _SplitGroups()
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


def _sample_members(key, members, images, bad, key_re, key_form):
    """The sample's JSON object and its image member (ext, bytes), after the member checks;
    the object is None when there is no single valid JSON object."""
    if not key_re.match(key):
        bad(f"key must be {key_form} with only [A-Za-z0-9_-] (no dots)", "__key__")
    exts = [e for e, _ in members]
    jsons = [d for e, d in members if e == "json"]
    imgs = [(e, d) for e, d in members if e in IMAGE_EXTS]
    other = sorted(set(exts) - IMAGE_EXTS - {"json"})
    if other:
        bad(f"unexpected member(s) {other}", "__key__")
    if len(jsons) != 1:
        bad(f"{len(jsons)} json members, want 1", "json")
    if len(imgs) != 1:
        bad(f"{len(imgs)} image members ({[e for e, _ in imgs]}), want 1 of {sorted(IMAGE_EXTS)}", "image")
    if images and imgs:
        _check_image(*imgs[0], bad)
    image = imgs[0] if len(imgs) == 1 else None
    if len(jsons) != 1:
        return None, image
    try:
        obj = json.loads(jsons[0])
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        bad(f"not valid JSON: {exc}", "json")
        return None, image
    if not isinstance(obj, dict):
        bad("is not a JSON object", "json")
        return None, image
    return obj, image


class _RecordSamples:
    """Samples of a trajectory export: one step record each."""

    def __init__(self, schema_version):
        self.schema_version = schema_version

    def __call__(self, key, members, src, images, problem):
        return _check_sample(
            key,
            members,
            src,
            self.schema_version,
            images,
            problem,
            seen=lambda obj: self.groups.note(obj, src, key),
        )

    def finish(self, problem) -> None:
        pass


class _SetSamples:
    """Samples of a reasoning set: the answer, its spans and the 1:1 mix of modes."""

    def __init__(self):
        self.stats = SetStats()
        self.modes: dict[tuple[str, int], set[str]] = {}
        self.where: dict[tuple[str, int], tuple[str, str]] = {}

    def __call__(self, key, members, src, images, problem):
        def bad(msg, fld):
            problem(SchemaError(msg, source=src, record=key, field=fld))

        obj, image = _sample_members(key, members, images, bad, SET_KEY, "<trajectory>_sNNNN_<reason|direct>")
        if obj is None:
            return None
        self.groups.note(obj, src, key)
        failures = self.stats.failures
        self.stats.failures = []  # every failure of this sample, not the first five overall
        try:
            self.stats.add(key, obj)
        except SchemaError as err:
            bad(err.reason, "json")
            return None
        finally:
            mine, self.stats.failures = self.stats.failures, failures
        for f in mine:
            bad(f"{f['kind']}: {f['detail']}", "conversations.gpt")
        tid, index, mode = obj["trajectory_id"], obj["index"], obj["mode"]
        if not isinstance(tid, str) or not isinstance(index, int) or isinstance(index, bool):
            bad("trajectory_id must be a string and index an integer", "trajectory_id/index")
            return None
        want = f"{sample_key(tid, index)}_{mode}"
        if want != key:
            bad(
                f"trajectory_id {tid!r}, index {index} and mode {mode!r} give key {want!r}",
                "trajectory_id/index/mode",
            )
        fmt = (obj.get("image") or {}).get("format")
        if image is not None and IMAGE_EXT.get(fmt) != image[0]:
            bad(f"image.format {fmt!r} but the image member is .{image[0]}", "image.format")
        self.modes.setdefault((tid, index), set()).add(mode)
        self.where.setdefault((tid, index), (src, key))
        return tid, index, None  # a set keeps some steps only: no index completeness

    def finish(self, problem) -> None:
        for step, modes in sorted(self.modes.items()):
            if modes != set(MODES):
                src, key = self.where[step]
                problem(
                    SchemaError(
                        f"step has mode(s) {sorted(modes)}, the mix wants {sorted(MODES)}",
                        source=src,
                        record=key,
                        field="mode",
                    )
                )


class _GroundingRecords:
    """Records of a grounding set (synthesis/grounding_checks.record_problems)."""

    def __call__(self, key, members, src, images, problem):

        obj, _ = _sample_members(
            key,
            members,
            images,
            lambda m, f: problem(SchemaError(m, source=src, record=key, field=f)),
            GROUND_KEY,
            "<trajectory>_sNNNN_ground",
        )
        if obj is None:
            return None
        self.groups.note(obj, src, key)
        found = record_problems(obj)
        for msg, fld in found:
            problem(SchemaError(msg, source=src, record=key, field=fld))
        if found and any(f in ("trajectory_id", "index") for _, f in found):
            return None
        if f"{sample_key(str(obj['trajectory_id']), int(obj['index']))}_ground" != key:
            problem(
                SchemaError(
                    "trajectory_id and index do not give the key",
                    source=src,
                    record=key,
                    field="trajectory_id/index",
                )
            )
        return obj["trajectory_id"], obj["index"], None

    def finish(self, problem) -> None:
        pass


class _SplitGroups:
    """Which splits hold each task template and each instruction (once per trajectory)."""

    def __init__(self):
        self.split = ""
        self.done: set[str] = set()
        self.where: dict[tuple[str, str], dict[str, tuple[str, str]]] = {}

    def note(self, obj: dict, src: str, key: str) -> None:

        tid = obj.get("trajectory_id")
        if not isinstance(tid, str) or tid in self.done:
            return
        self.done.add(tid)
        task = obj.get("task") if isinstance(obj.get("task"), dict) else {}
        template = task.get("template_id") or obj.get("template_id")
        instruction = task.get("instruction") or obj.get("instruction") or _set_task(obj)
        for kind, value in (("template", template), ("instruction", instruction)):
            if isinstance(value, str) and value.strip():
                if kind == "instruction":
                    value = normalise_instruction(value)
                self.where.setdefault((kind, value), {}).setdefault(self.split, (src, key))

    def finish(self, problem) -> tuple[int, int]:
        counts = {"template": 0, "instruction": 0}
        for (kind, value), splits in sorted(self.where.items()):
            if len(splits) < 2:
                continue
            counts[kind] += 1
            src, key = splits[sorted(splits)[-1]]
            fld = "task.template_id" if kind == "template" else "task.instruction"
            problem(
                SchemaError(
                    f"{kind} {value[:80]!r} is in splits {sorted(splits)}: "
                    "evaluation must hold out what training sees",
                    source=src,
                    record=key,
                    field=fld,
                )
            )
        return counts["template"], counts["instruction"]


def _set_task(obj: dict) -> str | None:
    """The task line of a reasoning-set sample's human turn (sets written before the
    sample carried its instruction)."""
    for turn in obj.get("conversations") or ():
        if isinstance(turn, dict) and turn.get("from") == "human":
            for line in str(turn.get("value", "")).splitlines():
                for head in ("Task: ", "任务："):
                    if line.startswith(head):
                        return line[len(head) :]
    return None


def _check_sample(key, members, src, schema_version, images, problem, seen=None):
    """Report its problems; (trajectory_id, index, num_steps or None when invalid) or None."""

    def bad(msg, fld):
        problem(SchemaError(msg, source=src, record=key, field=fld))

    obj, image = _sample_members(key, members, images, bad, KEY, "<trajectory>_sNNNN")
    if obj is None:
        return None
    if seen is not None:
        seen(obj)
    imgs = [image] if image is not None else []
    parsed = _parse_sample_json(obj, schema_version, bad)
    if parsed is None:
        # The step is there but invalid: still count it as present, so the
        # trajectory is not reported a second time as missing a step.
        tid, index = obj.get("trajectory_id"), obj.get("index")
        ok = isinstance(tid, str) and isinstance(index, int)
        return (tid, index, None) if ok else None
    step, traj = parsed
    want = sample_key(step.trajectory_id, step.index)
    if want != key:
        bad(
            f"trajectory_id {step.trajectory_id!r} and index {step.index} give key {want!r}",
            "trajectory_id/index",
        )
    if imgs and IMAGE_EXT[step.image_format] != imgs[0][0]:
        bad(f"image_format {step.image_format!r} but the image member is .{imgs[0][0]}", "image_format")
    return step.trajectory_id, step.index, traj.num_steps


def _parse_sample_json(obj: dict, schema_version, bad):
    """The sample's (Step, Trajectory), or None after reporting the first bad field."""
    unknown = sorted(set(obj) - _STEP_FIELDS - set(_TRAJ_FIELDS) - {"schema_version"})
    if unknown:
        bad(f"unexpected field(s) {unknown}", unknown[0])
        return None
    if schema_version is not None and obj.get("schema_version") != schema_version:
        bad(f"{obj.get('schema_version')!r}, manifest says {schema_version!r}", "schema_version")
    step_row = {k: v for k, v in obj.items() if k in _STEP_FIELDS}
    traj_row = {col: obj[k] for k, col in _TRAJ_FIELDS.items() if k in obj}
    traj_row["trajectory_id"] = obj.get("trajectory_id")
    try:
        step = row_to_step(step_row)
    except SchemaError as err:
        bad(err.reason, err.field or "json")
        return None
    except (TypeError, AttributeError) as exc:  # a struct field that is not an object
        bad(f"cannot be read: {exc}", "json")
        return None
    try:
        return step, row_to_trajectory(traj_row)
    except SchemaError as err:
        fld = err.field or "json"
        bad(err.reason, "trajectory_error" if fld == "error" else fld)
    except (ValueError, TypeError, AttributeError) as exc:  # e.g. task.params_json not JSON
        bad(f"cannot be read: {exc}", "task.params_json")
    return None


def _check_image(ext: str, data: bytes, bad) -> None:
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as im:  # reads the header only
            fmt = im.format
    except (UnidentifiedImageError, OSError) as exc:
        bad(f"the .{ext} member is not an image: {exc}", ext)
        return
    if fmt != _PIL_FORMAT[ext]:
        bad(f"the .{ext} member holds a {fmt} image", ext)


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
