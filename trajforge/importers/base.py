"""What every importer shares: records in, canonical Trajectory/Step out.

An importer turns one file into `Episode`s (or `SchemaError`s for records it
cannot read, yielded rather than raised so the rest of the file still
imports). An Episode holds `Draft` steps whose action is built only once the
screenshot's size is known: from the image next to the record, else from the
record, else from another image of the same episode (same device), else from
the `screen_size` the caller states. Nothing is guessed: a step with no size
from any of these is a SchemaError naming field "screenshot".
"""

from __future__ import annotations

import io
import json
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PIL import Image, UnidentifiedImageError
from pydantic import ValidationError

from schemas.actions import Action
from schemas.errors import SchemaError
from schemas.records import DeviceProfile, Element, Step, Task, Trajectory, trajectory_id_for

Size = tuple[int, int]
# Given the screenshot's (width, height): the action, its target and the screen's elements.
MakeAction = Callable[[int, int], "tuple[Action, Element | None, list[Element]]"]
_CJK = re.compile(r"[\u3400-\u9fff]")
_IMAGE_FORMATS = {"PNG": "png", "JPEG": "jpeg", "WEBP": "webp"}


@dataclass
class Draft:
    """A step before its screenshot size is settled."""

    make: MakeAction
    image: Path | bytes | None = None  # a file next to the record, or the bytes it carried
    size: Size | None = None  # from the record, used when there is no image
    thought: str | None = None
    url: str = ""


@dataclass
class Episode:
    """One trajectory as the dataset gives it."""

    episode_id: str
    instruction: str
    drafts: list[Draft]
    platform: str = "android"
    app: str = ""
    outcome: str = "success"  # demonstrations reached their goal
    device_name: str = "android"
    device_size: Size | None = None  # the real screen, when the record says
    template_id: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    start_url: str | None = None


@dataclass
class Context:
    """What an importer may need besides the file: the caller's stated screen size."""

    screen_size: Size | None = None


class Importer:
    """One dataset format. Subclasses set `name` and implement `episodes`, which
    yields Episodes, tasks_table.TaskRows (task lists) and SchemaErrors."""

    name = ""
    suffixes: tuple[str, ...] = (".json", ".jsonl")

    def files(self, path: Path) -> tuple[list[Path], list[SchemaError]]:
        """The files to read under `path`, and an error for each one this format cannot read.

        Such a file is reported (quarantined with the reason), given directly
        or in a folder, so an inbox run goes on. Images and notes (.md, .txt)
        beside the records are expected and pass silently.
        """
        path = Path(path)
        if not path.exists():
            raise SchemaError("no such file or folder", source=str(path))
        if path.is_file():
            err = self.unreadable(path)
            return ([], [err]) if err is not None else ([path], [])
        found, errors = [], []
        for p in sorted(q for q in path.rglob("*") if q.is_file()):
            if p.suffix.lower() in self.suffixes:
                found.append(p)
            elif not _is_image(p) and p.suffix.lower() not in (".md", ".txt"):
                err = self.unreadable(p)
                if err is not None:
                    errors.append(err)
        return found, errors

    def unreadable(self, path: Path) -> SchemaError | None:
        """Why this format cannot read `path` (None if it can); override to explain more."""
        if path.suffix.lower() in self.suffixes:
            return None
        return SchemaError(
            f"{self.name} reads {', '.join(self.suffixes)} files, not this one",
            source=str(path),
            record="file",
            field="format",
        )

    def episodes(self, file: Path, ctx: Context) -> Iterator[Episode | SchemaError]:
        raise NotImplementedError


def _is_image(path: Path) -> bool:
    return path.suffix.lower() in (".png", ".jpg", ".jpeg", ".webp")


# -- reading records ----------------------------------------------------------------


def read_records(file: Path) -> Iterator[tuple[str, Any]]:
    """(record label, object or SchemaError) for each record of a .json or .jsonl file.

    A .json file holding a list gives one record per item ("item N"); a .jsonl
    file one per line ("line N"). A line that is not JSON is a SchemaError for
    that line only.
    """
    if file.suffix.lower() == ".jsonl":
        # Read as bytes: a line that is not UTF-8 is that line's error, not the file's.
        with open(file, "rb") as f:
            for n, raw in enumerate(f, 1):
                if not raw.strip():
                    continue
                try:
                    yield f"line {n}", json.loads(raw.decode("utf-8"))
                except ValueError as exc:  # UnicodeDecodeError is a ValueError too
                    yield (
                        f"line {n}",
                        SchemaError(
                            f"not valid JSON ({exc})", source=str(file), record=f"line {n}", field="json"
                        ),
                    )
        return
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except ValueError as exc:
        yield "file", SchemaError(f"not valid JSON ({exc})", source=str(file), record="file", field="json")
        return
    if isinstance(data, list):
        for n, item in enumerate(data):
            yield f"item {n}", item
    else:
        yield "file", data


def require(obj: Any, key: str, kind: type | tuple[type, ...], *, field: str | None = None) -> Any:
    """obj[key], checked to be of `kind`; a SchemaError naming the field otherwise."""
    name = field or key
    if not isinstance(obj, dict):
        raise SchemaError(f"expected an object, got {type(obj).__name__}", field=name)
    if key not in obj:
        raise SchemaError("missing", field=name)
    v = obj[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(v, kind) or (isinstance(v, bool) and bool not in kinds):
        want = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise SchemaError(f"{v!r} is not a {want}", field=name)
    return v


def number(v: Any, *, field: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise SchemaError(f"{v!r} is not a number", field=field)
    if not math.isfinite(v):
        raise SchemaError(f"{v!r} is not a finite number", field=field)
    return float(v)


def numbers(v: Any, n: int, *, field: str) -> list[float]:
    if not isinstance(v, (list, tuple)) or len(v) != n:
        raise SchemaError(f"{v!r} is not a list of {n} numbers", field=field)
    return [number(c, field=field) for c in v]


def json_field(obj: dict, key: str, *, default: Any = ...) -> Any:
    """A field that some versions store as a JSON string and others as the value itself."""
    if key not in obj:
        if default is ...:
            raise SchemaError("missing", field=key)
        return default
    v = obj[key]
    if isinstance(v, str):
        try:
            return json.loads(v)
        except ValueError:
            raise SchemaError(f"not valid JSON: {v[:60]!r}", field=key) from None
    return v


def norm_point(px: float, py: float, w: int, h: int, *, field: str) -> tuple[float, float]:
    """Pixels to [0, 1]; a point off the screen is an error, never clamped silently."""
    if not (0 <= px <= w and 0 <= py <= h):
        raise SchemaError(f"({px}, {py}) lies outside the {w}x{h} screen", field=field)
    return px / w, py / h


def norm_box(x0: float, y0: float, x1: float, y1: float, w: int, h: int) -> tuple[float, ...]:
    """A pixel box to [0, 1], clipped to the screen (boxes of partly visible elements overhang)."""
    c = lambda v, d: min(max(v / d, 0.0), 1.0)  # noqa: E731
    return (c(x0, w), c(y0, h), c(max(x0, x1), w), c(max(y0, y1), h))


def language_of(text: str) -> str:
    return "zh" if _CJK.search(text) else "en"


# -- images ---------------------------------------------------------------------------


def locate_image(base: Path, ref: str | None) -> Path | None:
    """The image a record names, looked for next to the record file.

    Datasets store paths relative to their own layout (or absolute paths of
    the machine they were made on), so every tail of the path is tried under
    the record's folder and its parent: `a/b/c.png`, `b/c.png`, `c.png`.
    """
    if not ref or not isinstance(ref, str):
        return None
    parts = [p for p in Path(ref.replace("\\", "/")).parts if p not in ("/", "..", ".")]
    for root in (base, base.parent):
        for i in range(len(parts)):
            p = root.joinpath(*parts[i:])
            if p.is_file():
                return p
    return None


def read_image(data: Path | bytes) -> tuple[bytes, str, Size]:
    """(bytes, image_format, (width, height)); other formats are re-encoded as PNG."""
    raw = data.read_bytes() if isinstance(data, Path) else data
    try:
        with Image.open(io.BytesIO(raw)) as img:
            fmt = _IMAGE_FORMATS.get(img.format or "")
            size = img.size
            if fmt is None:
                buf = io.BytesIO()
                img.save(buf, format="PNG")
                raw, fmt = buf.getvalue(), "png"
            else:
                _check_complete(raw, fmt)
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
        # A header claiming a giant size is refused before any pixel is decoded.
        raise SchemaError(f"not a readable image ({exc})", field="image") from None
    return raw, fmt, size


def _check_complete(raw: bytes, fmt: str) -> None:
    """Reads the file to its end: a truncated screenshot is refused here, not in training.

    PNG and WebP: `verify` checks every chunk up to the end (CRCs, no pixel
    decoding). JPEG has no such check, so it is decoded at 1/8 scale (cheap).
    """
    with Image.open(io.BytesIO(raw)) as img:
        if fmt == "jpeg":
            img.draft("RGB", (max(1, img.width // 8), max(1, img.height // 8)))
            img.load()
        else:
            img.verify()


# -- episode -> records ---------------------------------------------------------------


def build(fmt: str, ep: Episode, ctx: Context, blobs) -> tuple[Trajectory, list[Step]]:
    """The canonical trajectory and steps of an episode; images go into `blobs`."""
    tid = trajectory_id_for(fmt, ep.episode_id)
    if not ep.drafts:
        raise SchemaError("the episode has no steps", field="steps")
    images: list[tuple[bytes, str, Size] | None] = []
    for i, d in enumerate(ep.drafts):
        try:
            images.append(read_image(d.image) if d.image is not None else None)
        except SchemaError as err:
            raise SchemaError(err.reason, field=f"step {i}: {err.field}") from None
    # A step without its own size takes the episode's: another image of it (same
    # device), the device the record names, another step's stated size, the caller's.
    seen = [im[2] for im in images if im is not None]
    stated = [d.size for d in ep.drafts if d.size is not None]
    fallback = next(
        iter(
            seen
            + ([ep.device_size] if ep.device_size else [])
            + stated
            + ([ctx.screen_size] if ctx.screen_size else [])
        ),
        None,
    )
    made = []
    for i, (d, im) in enumerate(zip(ep.drafts, images)):
        size = im[2] if im else (d.size or fallback)
        if size is None:
            raise SchemaError(
                "the dataset gives no image and no screen size for this step; "
                "put the screenshots next to the file or pass screen_size",
                field=f"step {i}: screenshot",
            )
        w, h = size
        try:
            action, target, elements = d.make(w, h)
        except RECORD_ERRORS as exc:
            err = as_schema_error(exc)
            raise SchemaError(err.reason, field=f"step {i}: {err.field}") from None
        made.append((w, h, action, target, elements))
    # The episode's images in one go (fsync-bound: on threads), once its actions
    # are known to be good; each is on disk before the writer commits the episode.
    shas = iter(blobs.put_many([(im[0], im[1]) for im in images if im is not None]))
    steps = []
    for i, (d, im, (w, h, action, target, elements)) in enumerate(zip(ep.drafts, images, made)):
        sha, ext = ("", "png") if im is None else (next(shas), im[1])
        steps.append(_step(tid, i, sha, ext, w, h, d, action, target, elements))
    dw, dh = ep.device_size or fallback
    lang = language_of(ep.instruction)
    try:
        task = Task(
            task_id=f"{fmt}:{ep.episode_id}",
            instruction=ep.instruction,
            language=lang,
            app=ep.app,
            template_id=ep.template_id,
            params=ep.params,
            start_url=ep.start_url,
        )
        device = DeviceProfile(
            name=ep.device_name,
            viewport_width=dw,
            viewport_height=dh,
            is_mobile=ep.platform != "web",
            locale="zh-CN" if lang == "zh" else "en-US",
        )
        traj = Trajectory(
            trajectory_id=tid,
            task=task,
            platform=ep.platform,
            app=ep.app,
            device=device,
            source="import",
            source_name=fmt,
            policy="imported",
            outcome=ep.outcome,
            verified_by="dataset" if ep.outcome != "unknown" else "none",
            num_steps=len(steps),
        )
    except ValidationError as exc:
        e = exc.errors()[0]
        raise SchemaError(e["msg"], field=".".join(str(p) for p in e["loc"])) from None
    return traj, steps


def _step(tid, i, sha, ext, w, h, d: Draft, action, target, elements) -> Step:
    try:
        return Step(
            trajectory_id=tid,
            index=i,
            screenshot=sha,
            image_format=ext,
            width=w,
            height=h,
            url=d.url,
            elements=elements,
            action=action,
            target=target,
            thought=d.thought,
        )
    except ValidationError as exc:
        e = exc.errors()[0]
        raise SchemaError(e["msg"], field=f"step {i}: " + ".".join(str(p) for p in e["loc"])) from None


def located(err: SchemaError, source: Path, record: str) -> SchemaError:
    return err.located(source=str(source), record=record)


# What a malformed record can raise while it is read (SchemaError and pydantic's
# ValidationError are ValueErrors); each becomes a quarantined SchemaError.
RECORD_ERRORS = (ValueError, TypeError, AttributeError, KeyError, IndexError)


def as_schema_error(exc: Exception) -> SchemaError:
    if isinstance(exc, SchemaError):
        return exc
    if isinstance(exc, ValidationError):
        e = exc.errors()[0]
        return SchemaError(e["msg"], field=".".join(str(p) for p in e["loc"]) or "record")
    return SchemaError(f"malformed record ({type(exc).__name__}: {exc})", field="record")


def bad(err: Exception, source: Path, record: str, raw: Any = None) -> SchemaError:
    """The error located at file/record, carrying the raw record for the quarantine file."""
    e = as_schema_error(err).located(source=str(source), record=record)
    e.raw = raw
    return e
