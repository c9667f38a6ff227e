"""What `trajforge validate` (validate.py) checks in each sample, by the set's kind.

A trajectory export's sample is one step record (its JSON read back through
`schemas.arrow`); a reasoning set's holds an answer with token spans, and every
step comes in both modes; a grounding set's is a record that
synthesis/grounding_checks.py checks. Each checker reports its problems as
`SchemaError`s naming the shard, the key and the field, and returns
(trajectory_id, index, num_steps or None) for the folder's completeness checks.
"""

from __future__ import annotations

import io
import json
import re

from schemas.arrow import STEP_SCHEMA, TRAJECTORY_SCHEMA, row_to_step, row_to_trajectory
from schemas.errors import SchemaError
from schemas.set_prompt import MODES
from synthesis.grounding_checks import record_problems
from synthesis.set_stats import SetStats
from trajforge.publish.shards import IMAGE_EXT, IMAGE_EXTS, sample_key

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


def sample_checker(manifest: dict):
    """The checker of the samples of the set `manifest` describes (by its kind)."""
    kind = manifest.get("kind")
    if kind == REASONING_SET:
        return SetSamples()
    if kind == GROUNDING:
        return GroundingRecords()
    return RecordSamples(manifest.get("schema_version"))


def sample_members(key, members, images, bad, key_re, key_form):
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
        check_image(*imgs[0], bad)
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


class RecordSamples:
    """Samples of a trajectory export: one step record each."""

    def __init__(self, schema_version):
        self.schema_version = schema_version

    def __call__(self, key, members, src, images, problem):
        return check_sample(
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


class SetSamples:
    """Samples of a reasoning set: the answer, its spans and the 1:1 mix of modes."""

    def __init__(self):
        self.stats = SetStats()
        self.modes: dict[tuple[str, int], set[str]] = {}
        self.where: dict[tuple[str, int], tuple[str, str]] = {}

    def __call__(self, key, members, src, images, problem):
        def bad(msg, fld):
            problem(SchemaError(msg, source=src, record=key, field=fld))

        obj, image = sample_members(key, members, images, bad, SET_KEY, "<trajectory>_sNNNN_<reason|direct>")
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


class GroundingRecords:
    """Records of a grounding set (synthesis/grounding_checks.record_problems)."""

    def __call__(self, key, members, src, images, problem):

        obj, _ = sample_members(
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


def check_sample(key, members, src, schema_version, images, problem, seen=None):
    """Report its problems; (trajectory_id, index, num_steps or None when invalid) or None."""

    def bad(msg, fld):
        problem(SchemaError(msg, source=src, record=key, field=fld))

    obj, image = sample_members(key, members, images, bad, KEY, "<trajectory>_sNNNN")
    if obj is None:
        return None
    if seen is not None:
        seen(obj)
    imgs = [image] if image is not None else []
    parsed = parse_sample_json(obj, schema_version, bad)
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


def parse_sample_json(obj: dict, schema_version, bad):
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


def check_image(ext: str, data: bytes, bad) -> None:
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as im:  # reads the header only
            fmt = im.format
    except (UnidentifiedImageError, OSError) as exc:
        bad(f"the .{ext} member is not an image: {exc}", ext)
        return
    if fmt != _PIL_FORMAT[ext]:
        bad(f"the .{ext} member holds a {fmt} image", ext)
