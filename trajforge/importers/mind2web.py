"""Multimodal-Mind2Web / Mind2Web web steps (and SeeAct's query lines built from them).

Records, one step each (JSON list or .jsonl): a Multimodal-Mind2Web row
(`annotation_id, website, confirmed_task, action_uid, operation,
pos_candidates, neg_candidates, action_reprs, target_action_index (str),
screenshot`), or a SeeAct query line (the same fields plus
`previous_actions`, `image_path`; its step index is len(previous_actions)).
A Mind2Web task object (`annotation_id`, `actions: [...]`) is read as its steps.

Quirks handled:
- `operation` and each candidate are **JSON strings** in the HF parquet, and
  each candidate's `attributes` is a JSON string again: decoded at each level
  (SeeAct's lines already hold dicts above `attributes`).
- `attributes.bounding_box_rect` is "x,y,width,height" in page CSS pixels of
  the full page; the action point is the centre of the first positive
  candidate, which is also the step's target (role = tag, name = aria_label,
  title, name, placeholder or value attribute).
- `op` is CLICK, TYPE or SELECT (`original_op` HOVER and ENTER are already
  folded into CLICK by the dataset): tap, type (focus point + `value`), select.
- `action_reprs` have two spaces after "]" ("[button]  Search -> CLICK").

Screenshot: the row's `screenshot` ({"bytes": base64} or {"path": file}), or
SeeAct's first segment `<image_path>/0.jpg` next to the file (a crop of the
top of the page, 1280 wide: a target below it is an error, not a clamp).
Without an image the page size is the `<html>` candidate's box (the record's
own full-page size), else `screen_size`. Steps are grouped by
`annotation_id` and ordered by their index; an episode whose indices are not
0..n-1 of `action_reprs` is partial and gets outcome "unknown" (a complete
one "success": Mind2Web steps are annotated demonstrations).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from schemas.actions import ActionType
from schemas.converters import make_action
from schemas.errors import SchemaError
from schemas.records import Element
from trajforge.importers.base import (
    RECORD_ERRORS,
    Context,
    Draft,
    Episode,
    Importer,
    bad,
    locate_image,
    norm_box,
    norm_point,
    numbers,
    read_records,
    require,
)

_OPS = {"CLICK": ActionType.TAP, "TYPE": ActionType.TYPE, "SELECT": ActionType.SELECT}
_NAME_ATTRS = ("aria_label", "title", "name", "placeholder", "value", "alt")


class Mind2WebImporter(Importer):
    name = "mind2web"

    def episodes(self, file: Path, ctx: Context) -> Iterator[Episode | SchemaError]:
        groups: dict[str, list] = defaultdict(list)
        for label, rec in read_records(file):
            if isinstance(rec, SchemaError):
                yield bad(rec, file, label)
                continue
            rows = _rows(rec)
            for n, row in enumerate(rows):
                where = label if len(rows) == 1 else f"{label} action {n}"
                try:
                    ann = str(require(row, "annotation_id", str))
                    step = _step(file, row, n if len(rows) > 1 else None)
                    groups[ann].append(step)
                except RECORD_ERRORS as err:
                    yield bad(err, file, where, row)
        for ann, steps in groups.items():
            steps.sort(key=lambda s: s["index"])
            idx = [s["index"] for s in steps]
            if len(set(idx)) != len(idx):
                yield bad(
                    SchemaError(f"step indices repeat: {idx}", field="target_action_index"),
                    file,
                    f"episode {ann}",
                )
                continue
            total = steps[0]["total"]
            complete = idx == list(range(total if total is not None else len(idx)))
            yield Episode(
                episode_id=ann,
                instruction=steps[0]["task"],
                drafts=[s["draft"] for s in steps],
                platform="web",
                app=steps[0]["website"],
                device_name="desktop",
                outcome="success" if complete else "unknown",
            )


def _rows(rec: Any) -> list:
    if isinstance(rec, dict) and isinstance(rec.get("actions"), list) and "operation" not in rec:
        task = {k: v for k, v in rec.items() if k != "actions"}
        return [
            {**task, **a, "target_action_index": str(i)} if isinstance(a, dict) else a
            for i, a in enumerate(rec["actions"])
        ]
    return [rec]


def _decode(v: Any, field: str) -> Any:
    if isinstance(v, str):
        try:
            return json.loads(v)
        except ValueError:
            raise SchemaError(f"not valid JSON: {v[:60]!r}", field=field) from None
    return v


def _step(file: Path, row: dict, fallback_index: int | None) -> dict:
    task = require(row, "confirmed_task", str)
    op = _decode(require(row, "operation", (str, dict)), "operation")
    kind = require(op, "op", str, field="operation.op")
    if kind not in _OPS:
        raise SchemaError(f"unknown op {kind!r}", field="operation.op")
    value = op.get("value") or ""
    cands = [_decode(c, "pos_candidates") for c in _decode(row.get("pos_candidates") or [], "pos_candidates")]
    negs = [_decode(c, "neg_candidates") for c in _decode(row.get("neg_candidates") or [], "neg_candidates")]
    box, role, name = None, "element", ""
    if cands:
        attrs = _decode(
            require(cands[0], "attributes", (str, dict), field="pos_candidates[0].attributes"),
            "pos_candidates[0].attributes",
        )
        box = _rect(attrs, "pos_candidates[0].attributes.bounding_box_rect")
        role = str(cands[0].get("tag") or "element")
        name = next((str(attrs[k]) for k in _NAME_ATTRS if attrs.get(k)), "")
    elif kind != "TYPE":
        raise SchemaError(f"a {kind} with no positive candidate has no point", field="pos_candidates")
    page = None
    for c in negs + cands:
        if isinstance(c, dict) and c.get("tag") == "html":
            a = _decode(c.get("attributes", {}), "neg_candidates.attributes")
            x, y, w, h = _rect(a, "html.bounding_box_rect")
            page = (round(w), round(h)) if w > 0 and h > 0 else None
    if "target_action_index" in row:
        try:
            index = int(row["target_action_index"])
        except (TypeError, ValueError):
            raise SchemaError(
                f"{row['target_action_index']!r} is not an integer", field="target_action_index"
            ) from None
    elif isinstance(row.get("previous_actions"), list):
        index = len(row["previous_actions"])
    elif fallback_index is not None:
        index = fallback_index
    else:
        raise SchemaError("missing (and no previous_actions)", field="target_action_index")
    reprs = row.get("action_reprs")
    total = len(reprs) if isinstance(reprs, list) else None

    def make(w: int, h: int):
        target = None
        kw: dict[str, Any] = {"type": _OPS[kind]}
        if box is not None:
            bx, by, bw, bh = box
            kw["x"], kw["y"] = norm_point(
                bx + bw / 2, by + bh / 2, w, h, field="pos_candidates[0].attributes.bounding_box_rect"
            )
            target = Element(role=role, name=name, bbox=norm_box(bx, by, bx + bw, by + bh, w, h))
        if kind in ("TYPE", "SELECT"):
            kw["text"] = value
        return make_action(field="operation", **kw), target, []

    return {
        "index": index,
        "task": task,
        "website": str(row.get("website") or ""),
        "total": total,
        "draft": Draft(make=make, image=_image(file, row), size=page),
    }


def _rect(attrs: Any, field: str) -> tuple[float, float, float, float]:
    if not isinstance(attrs, dict) or "bounding_box_rect" not in attrs:
        raise SchemaError("missing", field=field)
    raw = attrs["bounding_box_rect"]
    try:
        parts = [float(v) for v in str(raw).split(",")]
    except ValueError:
        raise SchemaError(f"{raw!r} is not 'x,y,width,height'", field=field) from None
    x, y, w, h = numbers(parts, 4, field=field)
    return x, y, w, h


def _image(file: Path, row: dict) -> Path | bytes | None:
    shot = row.get("screenshot")
    if isinstance(shot, dict):
        if isinstance(shot.get("bytes"), str):
            try:
                return base64.b64decode(shot["bytes"], validate=True)
            except (binascii.Error, ValueError):
                raise SchemaError("not base64", field="screenshot.bytes") from None
        if isinstance(shot.get("bytes"), (bytes, bytearray)):
            return bytes(shot["bytes"])
        return locate_image(file.parent, shot.get("path"))
    if isinstance(row.get("image_path"), str):  # SeeAct: the page's first segment
        for name in ("0.jpg", "0.png"):
            found = locate_image(file.parent, f"{row['image_path']}/{name}")
            if found:
                return found
    return None
