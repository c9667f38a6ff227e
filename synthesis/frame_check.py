"""Do a set's tap answers land on their targets, read as the trainer reads them?

`tap_answers_in_box(shard_dir)` reads a written reasoning set (or Chinese set) the
way a trainer for its model profile does: it opens each sample's image, applies the
profile's resize to it (schemas.model_profiles: smart_resize of the image's own
size; a no-op for a set written for that profile, whose images are already at the
frame), parses the answer with schemas.converters.gui_libra.from_gui_libra in that
frame and the profile's coordinates, maps the point back to the recorded screenshot
(`screenshot` size, else `image` for sets written before profiles) and tests it
against the recorded target box (`target_box`, normalised, edges included).

Tap-like samples are those whose recorded action is a tap, double tap, long press,
right click or select with a point and a target box. The check passes when every
one of them lands inside (an answer that does not parse counts as outside).
`recorded_outside` counts the samples whose recorded point itself lies outside its
box (a recording problem, not a frame one); they are outside too.

A set's manifest names its profile; `profile` overrides it (the trainer that reads
a set written before profiles, whose answers are pixels of the stored screenshot).
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from PIL import Image

from schemas.actions import Action, ActionType
from schemas.converters.gui_libra import from_gui_libra
from schemas.errors import SchemaError
from schemas.model_profiles import ModelProfile, manifest_profile, model_profile

TAP_LIKE = frozenset(
    {ActionType.TAP, ActionType.DOUBLE_TAP, ActionType.LONG_PRESS, ActionType.RIGHT_CLICK, ActionType.SELECT}
)
_EXAMPLES = 5


def tap_answers_in_box(
    shard_dir: Path | str, profile: str | ModelProfile | None = None, split: str | None = None
) -> dict[str, Any]:
    """{"profile", "tap_answers", "inside", "outside", "unparsed", "recorded_outside",
    "share_inside", "passed", "examples"} over the set's samples (all splits, or `split`)."""
    from trajforge.publish.shards import IMAGE_EXTS, iter_tar_samples, read_manifest

    shard_dir = Path(shard_dir)
    manifest = read_manifest(shard_dir)
    prof = (
        model_profile(profile) if profile is not None else (manifest_profile(manifest) or model_profile(None))
    )
    counts = {"tap_answers": 0, "inside": 0, "outside": 0, "unparsed": 0, "recorded_outside": 0}
    examples: list[dict] = []
    for shard in manifest["shards"]:
        if split is not None and shard["split"] != split:
            continue
        for key, members in iter_tar_samples(shard_dir / shard["name"]):
            j = members.get("json") or {}
            image = next((members[e] for e in IMAGE_EXTS if e in members), None)
            verdict = sample_verdict(j, image, prof)
            if verdict is None:
                continue
            counts["tap_answers"] += 1
            counts["inside" if verdict["inside"] else "outside"] += 1
            counts["unparsed"] += verdict["unparsed"]
            counts["recorded_outside"] += verdict["recorded_outside"]
            if not verdict["inside"] and len(examples) < _EXAMPLES:
                examples.append({"key": key, **{k: v for k, v in verdict.items() if k != "inside"}})
    n = counts["tap_answers"]
    return {
        "profile": prof.name,
        **counts,
        "share_inside": counts["inside"] / n if n else None,
        "passed": counts["outside"] == 0,
        "examples": examples,
    }


def sample_verdict(sample: dict, image: bytes | None, profile: ModelProfile) -> dict | None:
    """None for a sample that is not tap-like; else {"inside", "unparsed",
    "recorded_outside", "point" (screenshot pixels), "box" (screenshot pixels), "detail"}."""
    try:
        recorded = Action.model_validate(sample["action"])
    except (KeyError, ValueError):
        return None
    box = sample.get("target_box")
    if recorded.type not in TAP_LIKE or recorded.x is None or box is None:
        return None
    shot = sample.get("screenshot") or sample["image"]
    sw, sh = int(shot["width"]), int(shot["height"])
    x0, y0, x1, y1 = (float(v) for v in box)
    box_px = [x0 * sw, y0 * sh, x1 * sw, y1 * sh]
    out = {
        "inside": False,
        "unparsed": False,
        "recorded_outside": not (x0 <= recorded.x <= x1 and y0 <= recorded.y <= y1),
        "point": None,
        "box": [round(v, 2) for v in box_px],
        "detail": "",
    }
    if image:
        with Image.open(io.BytesIO(image)) as im:  # the header only: the size the trainer decodes
            iw, ih = im.size
    else:
        iw, ih = int(sample["image"]["width"]), int(sample["image"]["height"])
    fed = profile.frame(iw, ih)  # the trainer's resize of the image it reads
    gpt = next((t["value"] for t in sample.get("conversations", []) if t.get("from") == "gpt"), "")
    try:
        action, _ = from_gui_libra(gpt, *fed, coords=profile.coords)
    except SchemaError as err:
        return {**out, "unparsed": True, "detail": f"in the {fed[0]}x{fed[1]} frame: {err}"}
    if action.x is None:
        return {**out, "detail": f"{action.type.value} without a point"}
    px, py = action.x * sw, action.y * sh
    inside = box_px[0] <= px <= box_px[2] and box_px[1] <= py <= box_px[3]
    return {
        **out,
        "inside": inside,
        "point": [round(px, 2), round(py, 2)],
        "detail": "" if inside else f"fed {fed[0]}x{fed[1]}, screenshot {sw}x{sh}",
    }
