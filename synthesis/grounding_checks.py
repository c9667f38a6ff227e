"""The grounding set's checks and figures, read back from its shards.

- `points_in_boxes`: every sample's point lies inside its box, read as the profile's
  trainer reads it: the image's size from its header, resized by the profile
  (a no-op when the set is at the frame; a mismatch is a failure), the point and box
  in that frame, and the normalised point inside the normalised box.
- `boxes_on_targets`: every box is an element of that very step in the curated store
  (role, name, box) whose visibility.is_target is true, or, for an imported
  trajectory, an element the dataset gave (visibility None, box_source "dataset").
- `language_mix`: both en and zh present, each share within [min_share, max_share].
- `dedup_rate`: no element key (screen signature, role, name, box to 0.01) twice in
  the set, and the share of visible targets dropped as duplicates <= max_rate.
Each returns {"passed": bool, "detail": str, ...figures}.
"""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from PIL import Image

from schemas.model_profiles import ModelProfile, manifest_profile, model_profile

_EXAMPLES = 5


def iter_records(shard_dir: Path | str, images: bool = False) -> Iterator[tuple[str, dict, bytes | None]]:
    """(key, record JSON, image bytes or None) of every shard record, in manifest order."""
    from trajforge.publish.shards import IMAGE_EXTS, iter_tar_samples, read_manifest

    shard_dir = Path(shard_dir)
    for shard in read_manifest(shard_dir)["shards"]:
        for key, members in iter_tar_samples(shard_dir / shard["name"], images=images):
            image = next((members[e] for e in IMAGE_EXTS if e in members), None)
            yield key, members.get("json") or {}, image


def _inside(p, b) -> bool:
    return b[0] <= p[0] <= b[2] and b[1] <= p[1] <= b[3]


def points_in_boxes(
    records: Iterable[tuple[str, dict, bytes | None]], profile: ModelProfile
) -> dict[str, Any]:
    n = outside = frames = 0
    examples = []
    for _key, rec, image in records:
        size = (rec["image"]["width"], rec["image"]["height"])
        if image:
            with Image.open(io.BytesIO(image)) as im:
                size = im.size
        fed = profile.frame(*size)
        frame_ok = fed == (rec["image"]["width"], rec["image"]["height"])
        frames += not frame_ok
        for s in rec["samples"]:
            n += 1
            ok = frame_ok and _inside(s["point"], s["box"]) and _inside(s["point_norm"], s["box_norm"])
            if not ok:
                outside += 1
                if len(examples) < _EXAMPLES:
                    examples.append({"id": s["id"], "point": s["point"], "box": s["box"], "fed": list(fed)})
    return {
        "passed": n > 0 and outside == 0,
        "samples": n,
        "outside": outside,
        "frame_mismatch": frames,
        "examples": examples,
        "detail": f"{profile.name}: {n - outside}/{n} points inside their box; "
        f"{frames} images not at the frame; examples {examples}",
    }


def boxes_on_targets(records: Iterable[tuple[str, dict, bytes | None]], curated) -> dict[str, Any]:
    """`curated`: the curated RawStore the set was written from."""
    wanted: dict[tuple[str, int], list[dict]] = {}
    for _, rec, _ in records:
        wanted.setdefault((rec["trajectory_id"], rec["index"]), []).extend(rec["samples"])
    imported = {t.trajectory_id for t in curated.iter_trajectories() if t.source == "import"}
    n = bad = 0
    reasons: Counter = Counter()
    examples = []
    found = set()
    for step in curated.iter_steps():
        key = (step.trajectory_id, step.index)
        if key not in wanted:
            continue
        found.add(key)
        elements = list(step.elements) + ([step.target] if step.target is not None else [])
        for s in wanted[key]:
            n += 1
            why = _box_problem(s, elements, step.trajectory_id in imported)
            if why:
                bad += 1
                reasons[why] += 1
                if len(examples) < _EXAMPLES:
                    examples.append({"id": s["id"], "why": why})
    for key in set(wanted) - found:
        n += len(wanted[key])
        bad += len(wanted[key])
        reasons["no_such_step"] += len(wanted[key])
    return {
        "passed": n > 0 and bad == 0,
        "samples": n,
        "not_on_target": bad,
        "reasons": dict(reasons),
        "examples": examples,
        "detail": f"{n - bad}/{n} boxes are targets of their step; {dict(reasons)}; examples {examples}",
    }


def _box_problem(s: dict, elements, imported: bool) -> str | None:
    box = s["box_norm"]
    same = [
        e
        for e in elements
        if e.bbox is not None
        and e.role == s["element"]["role"]
        and e.name == s["element"]["name"]
        and all(abs(a - b) <= 1e-6 for a, b in zip(e.bbox, box))
    ]
    if not same:
        return "no_such_element"
    if s["box_source"] == "dataset":
        if not imported:
            return "dataset_box_on_a_crawl"
        return None if any(e.visibility is None for e in same) else "measured_but_not_target"
    if any(e.visibility is not None and e.visibility.is_target for e in same):
        return None
    return "not_measured" if all(e.visibility is None for e in same) else "not_visible"


def language_mix(summary: dict, min_share: float = 0.1, max_share: float = 0.9) -> dict[str, Any]:
    share = summary.get("language_share", {})
    ok = {"en", "zh"} <= set(share) and all(min_share <= share[k] <= max_share for k in ("en", "zh"))
    return {
        "passed": ok,
        "language_share": share,
        "detail": f"shares {share}; want en and zh each in [{min_share}, {max_share}]",
    }


def dedup_rate(
    summary: dict, records: Iterable[tuple[str, dict, bytes | None]], max_rate: float = 0.9
) -> dict[str, Any]:
    keys: Counter = Counter()
    for _, rec, _ in records:
        for k in {
            (
                rec["screen_signature"],
                s["element"]["role"],
                s["element"]["name"],
                tuple(round(c, 2) for c in s["box_norm"]),
            )
            for s in rec["samples"]
        }:
            keys[k] += 1  # grounding_targets.element_key's form
    repeated = sum(1 for v in keys.values() if v > 1)
    rate = summary.get("dedup_rate", 0.0)
    return {
        "passed": repeated == 0 and rate <= max_rate and bool(keys),
        "elements": len(keys),
        "repeated": repeated,
        "dedup_rate": rate,
        "detail": f"{len(keys)} elements, {repeated} used on two near-duplicate screens; "
        f"{summary.get('deduplicated', 0)} of {summary.get('targets_met', 0)} "
        f"visible targets dropped as duplicates (rate {rate:.3f}, max {max_rate})",
    }


def grounding_checks(shard_dir: Path | str, curated, **bounds) -> dict[str, dict]:
    """All four checks over a written set (bounds: min_share, max_share, max_rate)."""
    from trajforge.publish.shards import read_manifest

    manifest = read_manifest(Path(shard_dir))
    profile = manifest_profile(manifest) or model_profile(None)
    summary = manifest["summary"]
    share = {k: bounds[k] for k in ("min_share", "max_share") if k in bounds}
    return {
        "points_in_boxes": points_in_boxes(iter_records(shard_dir, images=True), profile),
        "boxes_on_targets": boxes_on_targets(iter_records(shard_dir), curated),
        "language_mix": language_mix(summary, **share),
        "dedup_rate": dedup_rate(
            summary,
            iter_records(shard_dir),
            **({"max_rate": bounds["max_rate"]} if "max_rate" in bounds else {}),
        ),
    }


def grounding_set_stats(shard_dir: Path | str) -> dict[str, Any]:
    """`trajforge stats` for kind "grounding": the manifest's figures, recounted from the
    shards (samples per split, per role, size and language) so a damaged set shows."""
    from trajforge.publish.shards import read_manifest

    shard_dir = Path(shard_dir)
    manifest = read_manifest(shard_dir)
    splits: dict[str, Counter] = {}
    roles, sizes, langs, kinds = Counter(), Counter(), Counter(), Counter()
    sigs: set[str] = set()
    records = samples = 0
    for shard in manifest["shards"]:
        c = splits.setdefault(shard["split"], Counter())
        for _, rec, _ in _records_of(shard_dir / shard["name"]):
            records += 1
            sigs.add(rec["screen_signature"])
            c["records"] += 1
            for s in rec["samples"]:
                samples += 1
                c["samples"] += 1
                roles[s["element"]["role"]] += 1
                sizes[s["size_bucket"]] += 1
                langs[s["language"]] += 1
                kinds[s["kind"]] += 1
    return {
        "dataset": manifest["dataset"],
        "version": manifest["version"],
        "kind": "grounding",
        "model_profile": (manifest.get("model_profile") or {}).get("name"),
        "records": records,
        "samples": samples,
        "unique_screens": len(sigs),
        "samples_per_unique_screen": samples / len(sigs) if sigs else 0.0,
        "roles": dict(sorted(roles.items())),
        "size_buckets": dict(sorted(sizes.items())),
        "languages": dict(sorted(langs.items())),
        "kinds": dict(sorted(kinds.items())),
        "splits": {k: dict(v) for k, v in splits.items()},
        "shards": len(manifest["shards"]),
        "bytes": sum(s["bytes"] for s in manifest["shards"]),
        "summary": manifest["summary"],
    }


def _records_of(path: Path):
    from trajforge.publish.shards import iter_tar_samples

    for key, members in iter_tar_samples(path, images=False):
        yield key, members.get("json") or {}, None


def format_grounding_table(st: dict[str, Any]) -> str:
    s = st["summary"]
    b = s["balance"]
    line = lambda d: ", ".join(f"{k} {v}" for k, v in d.items())  # noqa: E731
    return "\n".join(
        [
            f"dataset {st['dataset']}  version {st['version']}  (grounding set, {st['model_profile']})",
            f"  samples           {st['samples']}  ({st['records']} screens, {st['unique_screens']} "
            f"unique; {st['samples_per_unique_screen']:.1f} per unique screen)",
            f"  languages         {line(st['languages'])}",
            f"  kinds             {line(st['kinds'])}",
            f"  roles             {line(st['roles'])}",
            f"  sizes             {line(st['size_buckets'])}",
            f"  dropped           {line({k: v for k, v in s['dropped'].items() if v})} "
            f"of {s['candidates']} elements",
            f"  dedup             {s['deduplicated']} of {s['targets_met']} visible targets "
            f"(rate {s['dedup_rate']:.3f})",
            f"  balance           {b['method']}: {b['capped']} capped; sizes before "
            f"{line(b['sizes_before'])}, after {line(b['sizes_after'])}",
            f"  shards            {st['shards']}  ({st['bytes'] / 1e6:.1f} MB); splits "
            + "; ".join(f"{k} {v.get('samples', 0)}" for k, v in st["splits"].items()),
        ]
    )


_SAMPLE_FIELDS = (
    "id",
    "kind",
    "language",
    "expression",
    "element",
    "box_source",
    "size_bucket",
    "point",
    "box",
    "point_norm",
    "box_norm",
    "conversations",
)


def record_problems(rec: dict) -> list[tuple[str, str]]:
    """(message, field) for each problem of one shard record (`trajforge validate`)."""
    from .grounding_text import KINDS

    out = []
    for f in ("trajectory_id", "index", "language", "image", "screen_signature", "samples"):
        if f not in rec:
            out.append((f"record lacks {f!r}", f))
    if out:
        return out
    if not rec["samples"]:
        out.append(("a record without samples", "samples"))
    for i, s in enumerate(rec["samples"]):
        missing = [f for f in _SAMPLE_FIELDS if f not in s]
        if missing:
            out.append((f"sample lacks {missing}", f"samples[{i}]"))
            continue
        if s["kind"] not in KINDS:
            out.append((f"kind {s['kind']!r} is not one of {KINDS}", f"samples[{i}].kind"))
        if s["language"] != rec["language"]:
            out.append((f"language {s['language']} on a {rec['language']} screen", f"samples[{i}].language"))
        if not (_inside(s["point"], s["box"]) and _inside(s["point_norm"], s["box_norm"])):
            out.append((f"point {s['point']} outside box {s['box']}", f"samples[{i}].point"))
        if s["box_source"] not in ("visibility", "dataset"):
            out.append((f"box_source {s['box_source']!r}", f"samples[{i}].box_source"))
    return out
