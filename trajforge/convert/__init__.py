"""`trajforge convert`: a set (reasoning, Chinese, grounding) to a trainer's format.

    convert(set_dir, "llamafactory", out_dir)   # or swift, verl, easyr1, trl, hf-parquet

Streams the set (source.iter_items: one shard sample in memory), writes in batches,
keeps the splits and the set's profile frame, and commits atomically (output.commit:
a `.partial-convert` folder renamed into place, its manifest written last). A sample
the format cannot express is counted and listed in the manifest with its reason.
`round_trip(set_dir, out_dir, fmt)` reads the output back with the format's reader and
compares every sample's prompt, answer, image hash and coordinates with the set.
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from itertools import islice
from pathlib import Path
from typing import Any

from schemas.model_profiles import manifest_profile, model_profile
from trajforge.convert import easyr1, hf_parquet, llamafactory, swift, trl, verl
from trajforge.convert.output import MANIFEST, begin, commit
from trajforge.convert.rl import Inexpressible
from trajforge.convert.source import ConvertError, iter_items, open_set

FORMATS = {m.NAME: m for m in (llamafactory, swift, verl, easyr1, trl, hf_parquet)}

__all__ = ["FORMATS", "ConvertError", "convert", "converted", "ensure_converted", "round_trip", "MANIFEST"]


def _format(fmt: str):
    if fmt not in FORMATS:
        raise ConvertError(f"unknown format {fmt!r}; use one of {sorted(FORMATS)}", field="to")
    return FORMATS[fmt]


def convert(
    set_dir: Path | str,
    fmt: str,
    out_dir: Path | str,
    *,
    profile: str | None = None,
    limit: int | None = None,
) -> dict[str, Any]:
    """Write `fmt` under out_dir; returns its manifest. `profile`: the frame asked for;
    it must be the set's (the images are stored at it: another frame needs the set
    re-written with that profile). `limit`: the first N items only (checks)."""
    module = _format(fmt)
    set_dir, out_dir = Path(set_dir), Path(out_dir)
    manifest = open_set(set_dir)
    prof = manifest_profile(manifest) or model_profile(None)
    if profile is not None and model_profile(profile).name != prof.name:
        raise ConvertError(
            f"the set is written for profile {prof.name}, not {profile}: write "
            "the set with that profile (its images are stored at its frame)",
            source=str(set_dir / "manifest.json"),
            field="model_profile",
        )
    if out_dir.exists() and any(out_dir.iterdir()) and not (out_dir / MANIFEST).is_file():
        # The output replaces the folder whole: never someone's other files.
        raise ConvertError(
            f"{out_dir} exists and is not a conversion output (no {MANIFEST})",
            source=str(out_dir),
            field="out",
        )
    started = time.perf_counter()
    tmp = begin(out_dir)
    per_split, per_kind, inexpressible = Counter(), Counter(), []
    image_bytes = 0
    writer = module.Writer(tmp, manifest["dataset"])
    items = iter_items(set_dir, manifest)
    for item in items if limit is None else islice(items, limit):
        try:
            writer.write(item)
        except Inexpressible as why:
            inexpressible.append(
                {"key": item.key, "split": item.split, "action_type": item.action_type, "reason": str(why)}
            )
            continue
        per_split[item.split] += 1
        per_kind[item.kind] += 1
        image_bytes += len(item.image)
    extra = writer.finish()
    written = {
        "format": fmt,
        "source": {
            "path": str(set_dir),
            "kind": manifest["kind"],
            "dataset": manifest["dataset"],
            "version": manifest["version"],
            "manifest_sha256": _manifest_sha256(set_dir),
        },
        "model_profile": prof.name,
        "coords": prof.coords,
        "token_weights": dict(module.TOKEN_WEIGHTS),
        "per_split": dict(sorted(per_split.items())),
        "per_kind": dict(sorted(per_kind.items())),
        "samples": sum(per_split.values()),
        "image_bytes": image_bytes,
        "limit": limit,
        "inexpressible_count": len(inexpressible),
        "inexpressible": inexpressible,
        "seconds": round(time.perf_counter() - started, 3),
        **extra,
    }
    if fmt == "hf-parquet":
        from trajforge.convert.card import card
        from trajforge.read.stats import shard_stats

        (tmp / "README.md").write_text(
            card(manifest["dataset"], manifest, written, shard_stats(set_dir), hf_parquet.features()),
            encoding="utf-8",
        )
    commit(tmp, out_dir, written)
    return written


def _manifest_sha256(set_dir: Path) -> str:
    """The set's manifest lists every shard's sha256: its hash changes with any byte of the set."""
    return hashlib.sha256((Path(set_dir) / "manifest.json").read_bytes()).hexdigest()


def converted(set_dir: Path | str, fmt: str, out_dir: Path | str) -> bool:
    """True when out_dir holds the whole `fmt` conversion of this version of the set."""
    import json

    manifest = Path(out_dir) / MANIFEST
    if not manifest.is_file():
        return False
    written = json.loads(manifest.read_text(encoding="utf-8"))
    source = written.get("source") or {}
    return (
        written.get("format") == fmt
        and written.get("limit") is None
        and source.get("path") == str(Path(set_dir))
        and source.get("manifest_sha256") == _manifest_sha256(Path(set_dir))
    )


def ensure_converted(set_dir: Path | str, fmt: str, out_dir: Path | str) -> dict[str, Any] | None:
    """Convert unless out_dir already holds this version of the set (a trainer engine's data,
    training.engines.Conversion): the new manifest, or None when nothing was done."""
    if converted(set_dir, fmt, out_dir):
        return None
    return convert(set_dir, fmt, out_dir)


def _source_records(set_dir: Path, limit: int | None):
    items = iter_items(set_dir)
    for item in items if limit is None else islice(items, limit):
        yield (
            item.key,
            {
                "split": item.split,
                "system": item.system,
                "prompt": item.prompt,
                "answer": item.answer,
                "image_sha256": item.image_sha256,
                "point": item.point,
                "box": item.box,
                "action_type": item.action_type,
                "box_norm": item.meta.get("box_norm"),
            },
        )


def round_trip(
    set_dir: Path | str, out_dir: Path | str, fmt: str | None = None, limit: int | None = None
) -> list[str]:
    """Differences between the set and its conversion (none: []): every sample written
    must read back identical, and every sample not written must be listed as inexpressible."""
    import json

    out_dir = Path(out_dir)
    written = json.loads((out_dir / MANIFEST).read_text())
    module = _format(fmt or written["format"])
    listed = {i["key"] for i in written["inexpressible"]}
    back = {}
    for rec in module.read_back(out_dir):
        if rec["key"] in back:
            return [f"{rec['key']}: written twice"]
        back[rec["key"]] = rec
    problems = []
    limit = limit if limit is not None else written.get("limit")
    for key, want in _source_records(Path(set_dir), limit):
        got = back.pop(key, None)
        if got is None:
            if key not in listed:
                problems.append(f"{key}: missing from the output and not listed")
            continue
        # box_norm: where a format carries the normalised box too (ms-swift's objects)
        for field in (
            "split",
            "system",
            "prompt",
            "answer",
            "image_sha256",
            "point",
            "box",
            *(["box_norm"] if "box_norm" in got else []),
        ):
            if got[field] != want[field]:
                problems.append(f"{key}: {field} {str(got[field])[:80]!r} != set's {str(want[field])[:80]!r}")
    if limit is None:  # a sample (limit) reads back more than it compares
        problems += [f"{k}: in the output, not in the set" for k in sorted(back)]
    return problems
