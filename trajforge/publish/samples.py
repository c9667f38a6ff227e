"""Export samples: one per step, `<key>.png` (or `.jpg` / `.webp`) and `<key>.json`.

Keys are `<trajectory_id>_s0004` made safe by `shards.key_stem`. Resolution
profiles (`schemas.resolution`) resize images at export to what the target
model wants; the sample's width/height follow. A trajectory that cannot give
its samples raises `Unusable` with the reason it is quarantined for.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from schemas.arrow import row_to_step, step_to_row, trajectory_to_row
from schemas.errors import SchemaError
from schemas.records import SCHEMA_VERSION, Trajectory
from schemas.resolution import Resolution, resize_image
from trajforge.publish.quarantine import Unusable
from trajforge.publish.shards import IMAGE_EXT, sample_key
from trajforge.store.raw import RawStore

_TAR_BLOCK = 512
_TAR_RECORD = 10240  # tarfile pads an archive to a multiple of this
_TAR_END = 2 * _TAR_BLOCK


def sample_json(step_row: dict, traj_row: dict) -> bytes:
    """The step's row and its trajectory's row in one flat object, sorted keys.

    The trajectory's own `error` becomes `trajectory_error` (the step has an
    `error` too); task params stay a JSON string (`task.params_json`) so every
    sample has the same column types whatever the template.
    """
    obj = dict(step_row)
    for k, v in traj_row.items():
        if k == "trajectory_id":
            continue
        obj["trajectory_error" if k == "error" else k] = v
    obj["schema_version"] = SCHEMA_VERSION
    return compact_json(obj)


def compact_json(obj: dict) -> bytes:
    """A sample's JSON member: sorted keys, no spaces, UTF-8, no NaN."""
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode(
        "utf-8"
    )


@dataclass
class ShardSample:
    trajectory_id: str
    key: str
    image_ext: str
    image_path: Path
    image_size: int
    json: bytes
    image_format: str = "png"
    resize_to: tuple[int, int] | None = None  # None: the stored bytes as they are
    # The image at resize_to once prepared; samples of one step may share it.
    resized: bytes | None = None

    def prepare(self) -> None:
        """Resize now (before the shard-rolling decision needs the size)."""
        if self.resize_to is not None and self.resized is None:
            try:
                self.resized = resize_image(
                    self.image_path.read_bytes(),
                    self.image_format,
                    self.resize_to,
                    source=str(self.image_path),
                )
            except ValueError as err:
                raise Unusable(
                    "bad_screenshot",
                    str(
                        SchemaError(
                            str(err), source=str(self.image_path), record=self.key, field="screenshot"
                        )
                    ),
                ) from None

    def tar_bytes(self) -> int:
        self.prepare()
        size = self.image_size if self.resized is None else len(self.resized)
        return _member_bytes(size) + _member_bytes(len(self.json))

    def record(self) -> dict[str, bytes | str]:
        self.prepare()
        image, self.resized = self.resized, None  # written once: free it
        if image is None:
            image = self.image_path.read_bytes()
        return {"__key__": self.key, self.image_ext: image, "json": self.json}


def framed_sample(trajectory_id: str, key: str, step, obj: dict, path: Path, size: int) -> ShardSample:
    """A synthesised set's sample of `step`: its JSON `obj`, and the screenshot at `path`
    (`size` bytes) resized to the frame obj["image"] names, or as stored when that is
    the screenshot's own size."""
    frame = (obj["image"]["width"], obj["image"]["height"])
    return ShardSample(
        trajectory_id=trajectory_id,
        key=key,
        image_ext=IMAGE_EXT[step.image_format],
        image_path=path,
        image_size=size,
        image_format=step.image_format,
        resize_to=None if frame == (step.width, step.height) else frame,
        json=compact_json(obj),
    )


def tar_file_bytes(members: int) -> int:
    """The archive's size: members, the end blocks, padding to a whole record."""
    return -(-(members + _TAR_END) // _TAR_RECORD) * _TAR_RECORD


def _member_bytes(size: int) -> int:
    return _TAR_BLOCK + -(-size // _TAR_BLOCK) * _TAR_BLOCK


def trajectory_samples(
    store: RawStore,
    traj: Trajectory,
    rows: list[dict],
    source: str,
    resolution: Resolution,
    allow_index_gaps: bool = False,
    step_skips: list[dict] | None = None,
) -> list[ShardSample]:
    """The samples of one trajectory, or Unusable saying why there are none.

    Images are not read here (a resumed run skips most samples); `prepare`
    resizes them when they are about to be written.
    """
    try:
        steps = [row_to_step(r, source=source) for r in rows]
    except SchemaError as err:
        raise Unusable("invalid_step", str(err)) from None
    indices = [s.index for s in steps]
    if allow_index_gaps:
        ok = all(a < b for a, b in zip(indices, indices[1:])) and (
            not indices or indices[-1] < traj.num_steps
        )
        want = f"unique, increasing and < num_steps={traj.num_steps}"
    else:
        ok = indices == list(range(traj.num_steps))
        want = f"0..{traj.num_steps - 1} (num_steps={traj.num_steps})"
    if not ok:
        shown = f"{indices[:8]}{'...' if len(indices) > 8 else ''}"
        raise Unusable(
            "step_count_mismatch",
            str(
                SchemaError(
                    f"step indices {shown} are not {want}",
                    source=source,
                    record=traj.trajectory_id,
                    field="index",
                )
            ),
        )
    if steps and not any(s.screenshot for s in steps):
        raise Unusable(
            "no_screenshots",
            str(
                SchemaError(
                    "no step has a screenshot", source=source, record=traj.trajectory_id, field="screenshot"
                )
            ),
        )
    traj_row = trajectory_to_row(traj)
    out = []
    for step in steps:
        if not step.screenshot:
            # Recorded without an image: nothing to train on, the rest still is.
            if step_skips is not None:
                step_skips.append(
                    {
                        "trajectory_id": step.trajectory_id,
                        "index": step.index,
                        "reason": "no_screenshot",
                        "detail": str(
                            SchemaError(
                                "step has no screenshot",
                                source=source,
                                record=f"{step.trajectory_id}#{step.index}",
                                field="screenshot",
                            )
                        ),
                    }
                )
            continue
        path = store.blobs.path(step.screenshot, step.image_format)
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            raise Unusable(
                "missing_screenshot",
                str(
                    SchemaError(
                        f"screenshot blob {path} is missing",
                        source=source,
                        record=f"{step.trajectory_id}#{step.index}",
                        field="screenshot",
                    )
                ),
            ) from None
        try:
            size_to = resolution.target(step.width, step.height)
        except ValueError as err:
            raise Unusable(
                "bad_screenshot",
                str(
                    SchemaError(
                        str(err), source=source, record=f"{step.trajectory_id}#{step.index}", field="width"
                    )
                ),
            ) from None
        row = step_to_row(step)
        # Coordinates are normalised, so only the pixel size changes with the image.
        row["width"], row["height"] = size_to
        out.append(
            ShardSample(
                trajectory_id=step.trajectory_id,
                key=sample_key(step.trajectory_id, step.index),
                image_ext=IMAGE_EXT[step.image_format],
                image_path=path,
                image_size=size,
                json=sample_json(row, traj_row),
                image_format=step.image_format,
                resize_to=None if size_to == (step.width, step.height) else size_to,
            )
        )
    return out
