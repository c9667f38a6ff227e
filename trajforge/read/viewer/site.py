"""Build the static viewer site of a shard folder, streaming the shards.

Layout of the site (default `<shard_dir>/viewer/`):

    index.html              one row per trajectory, filters by app / language / outcome
    t/<key_stem>.html       one page per trajectory: every step, its action drawn on it
    img/<ab>/<sha256>.<ext> screenshots as they are in the shards, each written once
    thumb/<key_stem>.jpg    a downscaled JPEG of the first screenshot, for the index
    static/viewer.css, viewer.js

Only one trajectory's samples are held at a time; the index rows go to a
temporary JSON-lines file and are streamed into the index template at the end,
so memory stays flat as the dataset grows. Everything is built in a staging
folder beside the target and swapped in at the end, so a failed build leaves
the previous site as it was. All text from the data is escaped (jinja2
autoescape): page text and instructions are data, never markup.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jinja2
from PIL import Image

from trajforge.publish.shards import IMAGE_EXTS, ShardError, iter_tar_samples, key_stem, read_manifest
from trajforge.read.viewer.overlay import grounding_shapes, shapes

MARKER = ".trajforge-viewer"  # says a folder is ours to replace
THUMB_SIZE = (240, 240)
# Fields a curated sample may carry (filters write a verdict and reasons); shown when present.
VERDICT_FIELDS = ("verdict", "filter", "filters", "reasons", "filter_reasons", "keep")
_HERE = Path(__file__).parent


def _env() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(_HERE / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def build_site(shard_dir: Path | str, out_dir: Path | str | None = None, *, limit: int | None = None) -> Path:
    """Write the viewer of shard_dir into out_dir; return the index.html path.

    `limit` keeps the first N trajectories (in manifest order) for a quick look.
    """
    shard_dir = Path(shard_dir)
    manifest = read_manifest(shard_dir)
    out_dir = Path(out_dir) if out_dir is not None else shard_dir / "viewer"
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be positive, not {limit}")
    _check_replaceable(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}-build-"))
    try:
        _build(shard_dir, manifest, staging, limit)
        _swap_in(staging, out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return out_dir / "index.html"


def _build(shard_dir: Path, manifest: dict, site: Path, limit: int | None) -> None:
    env = _env()
    page_tpl = env.get_template("trajectory.html.j2")
    for sub in ("t", "img", "thumb", "static"):
        (site / sub).mkdir()
    for name in ("viewer.css", "viewer.js"):
        shutil.copyfile(_HERE / "static" / name, site / "static" / name)
    (site / MARKER).write_text(f"trajforge viewer of {shard_dir.resolve()}\n")

    facets = {"app": Counter(), "language": Counter(), "outcome": Counter()}
    rows_path = site / ".rows.jsonl"
    n_traj = n_steps = 0
    pending: dict | None = None  # the page is rendered once the next one's link is known
    with open(rows_path, "w", encoding="utf-8") as rows:
        for traj in _trajectories(shard_dir, manifest, limit):
            view = _trajectory_view(traj, site)
            view["prev"] = pending["file"] if pending else None
            if pending:
                pending["next"] = view["file"]
                _render(page_tpl, site / "t" / pending["file"], manifest, pending)
            pending = view
            row = view["row"]
            for f in facets:
                facets[f][row[f]] += 1
            rows.write(json.dumps(row, ensure_ascii=False) + "\n")
            n_traj += 1
            n_steps += row["steps"]
        if pending:
            pending["next"] = None
            _render(page_tpl, site / "t" / pending["file"], manifest, pending)

    def stream_rows() -> Iterator[dict]:
        with open(rows_path, encoding="utf-8") as f:
            for line in f:
                yield json.loads(line)

    index = env.get_template("index.html.j2").stream(
        manifest=manifest,
        rows=stream_rows(),
        trajectories=n_traj,
        steps=n_steps,
        facets={f: sorted(c.items()) for f, c in facets.items()},
        limited=limit is not None,
    )
    with open(site / "index.html", "w", encoding="utf-8") as f:
        index.dump(f)
    rows_path.unlink()


def _render(tpl: jinja2.Template, path: Path, manifest: dict, view: dict) -> None:
    with open(path, "w", encoding="utf-8") as f:
        tpl.stream(manifest=manifest, t=view).dump(f)


# -- reading ------------------------------------------------------------------------


def _trajectories(shard_dir: Path, manifest: dict, limit: int | None) -> Iterator[dict]:
    """{"id", "split", "samples": [(shard, key, json, ext, image bytes)]} per trajectory.

    The export keeps a trajectory's samples together and in step order, so a
    trajectory is a run of consecutive samples; one that shows up again later
    means the shards were not written by the export, and is an error.
    """
    seen: set[str] = set()
    cur: dict | None = None
    count = 0
    for shard in manifest["shards"]:
        path = shard_dir / shard["name"]
        for key, sample in iter_tar_samples(path):
            meta = sample.get("json")
            if not isinstance(meta, dict) or "trajectory_id" not in meta:
                raise ShardError(
                    "sample has no JSON with a trajectory_id",
                    source=str(path),
                    record=key,
                    field="json.trajectory_id",
                )
            exts = [e for e in sample if e in IMAGE_EXTS]
            if not exts:
                raise ShardError("sample has no screenshot", source=str(path), record=key, field="png")
            tid = str(meta["trajectory_id"])
            if cur is None or tid != cur["id"]:
                if cur is not None:
                    yield cur
                    count += 1
                    if limit is not None and count >= limit:
                        return
                if tid in seen:
                    raise ShardError(
                        f"trajectory {tid!r} is split over non-consecutive samples",
                        source=str(path),
                        record=key,
                        field="json.trajectory_id",
                    )
                seen.add(tid)
                cur = {"id": tid, "split": shard["split"], "samples": []}
            cur["samples"].append((shard["name"], key, meta, exts[0], sample[exts[0]]))
    if cur is not None:
        yield cur


# -- views (plain dicts for the templates) --------------------------------------------


def _write_image(site: Path, data: bytes, ext: str) -> tuple[str, tuple[int, int]]:
    """The image's site-relative path (written once, content-addressed) and pixel size."""
    sha = hashlib.sha256(data).hexdigest()
    rel = f"img/{sha[:2]}/{sha}.{ext}"
    path = site / rel
    if not path.exists():
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(data)
    with Image.open(io.BytesIO(data)) as im:  # reads the header only
        return rel, im.size


def _write_thumb(site: Path, stem: str, data: bytes) -> str:
    rel = f"thumb/{stem}.jpg"
    with Image.open(io.BytesIO(data)) as im:
        im = im.convert("RGB")
        im.thumbnail(THUMB_SIZE)
        im.save(site / rel, format="JPEG", quality=80)
    return rel


def _verdicts(meta: dict) -> dict[str, Any]:
    return {k: meta[k] for k in VERDICT_FIELDS if meta.get(k) not in (None, "", [], {})}


def _trajectory_view(traj: dict, site: Path) -> dict:
    samples = traj["samples"]
    first = samples[0][2]
    stem = key_stem(traj["id"])
    task = first.get("task") or {}
    if isinstance(first.get("samples"), list):  # a grounding record: its task fields are flat
        task = {k: first.get(k) for k in ("instruction", "language", "template_id", "app")}
    head_verdicts = _verdicts(first)
    steps = []
    for shard, key, meta, ext, data in samples:
        rel, (w, h) = _write_image(site, data, ext)
        action = meta.get("action") or {}
        own = {k: v for k, v in _verdicts(meta).items() if head_verdicts.get(k) != v}
        steps.append(
            {
                "index": meta.get("index"),
                "key": key,
                "shard": shard,
                "image": f"../{rel}",
                "width": w,
                "height": h,
                "action": action,
                "action_type": action.get("type", ""),
                "description": action.get("description") or _brief(action),
                "target": meta.get("target"),
                "thought": meta.get("thought"),
                "error": meta.get("error"),
                "guard": meta.get("guard"),
                "url": meta.get("url"),
                "screen_changed": meta.get("screen_changed"),
                "verdicts": own,
                "shapes": shapes(action, meta.get("target"), w, h),
            }
        )
        if isinstance(meta.get("samples"), list):  # a grounding set's screen: its targets
            steps[-1].update(
                shapes=grounding_shapes(meta["samples"], w, h),
                action_type="ground",
                description=f"{len(meta['samples'])} grounding samples: "
                + "; ".join(str(s.get("expression")) for s in meta["samples"][:40]),
            )
    thumb = _write_thumb(site, stem, samples[0][4])
    row = {
        "file": f"t/{stem}.html",
        "id": traj["id"],
        "split": traj["split"],
        "app": str(first.get("app") or task.get("app") or "?"),
        "language": str(task.get("language") or "?"),
        "platform": str(first.get("platform") or "?"),
        "outcome": str(first.get("outcome") or "unknown"),
        "verified_by": str(first.get("verified_by") or ""),
        "steps": len(steps),
        "instruction": str(task.get("instruction") or ""),
        "thumb": thumb,
    }
    return {
        "file": f"{stem}.html",
        "row": row,
        "task": task,
        "steps": steps,
        "trajectory_error": first.get("trajectory_error"),
        "policy": first.get("policy"),
        "source": first.get("source"),
        "distractions": first.get("distractions") or [],
        "verdicts": head_verdicts,
        "num_steps": first.get("num_steps"),
    }


def _brief(action: dict) -> str:
    """A one-line action text when the sample has no description."""
    parts = [str(action.get("type", "?"))]
    if action.get("x") is not None:
        parts.append(f"({action['x']:.3f}, {action['y']:.3f})")
    if action.get("x2") is not None:
        parts.append(f"→ ({action['x2']:.3f}, {action['y2']:.3f})")
    if action.get("direction"):
        parts.append(str(action["direction"]))
    if action.get("text") is not None:
        parts.append(json.dumps(action["text"], ensure_ascii=False))
    return " ".join(parts)


# -- publishing -------------------------------------------------------------------------


def _check_replaceable(out_dir: Path) -> None:
    """Refuse to replace a folder that is not an earlier viewer build (it may be the user's)."""
    if out_dir.exists() and (
        not out_dir.is_dir() or (any(out_dir.iterdir()) and not (out_dir / MARKER).is_file())
    ):
        raise ShardError(
            f"{out_dir} exists and is not a trajforge viewer folder; choose another --out or remove it",
            source=str(out_dir),
        )


def _swap_in(staging: Path, out_dir: Path) -> None:
    """Replace out_dir with the finished build: stale pages of an earlier build go too."""
    os.chmod(staging, 0o755)  # mkdtemp makes it 0700; the site is for reading
    old = None
    if out_dir.exists():
        old = out_dir.with_name(f".{out_dir.name}-old-{os.getpid()}")
        os.replace(out_dir, old)
    os.replace(staging, out_dir)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
