"""Shared by verl and EasyR1: the rule reward's ground truth of an Item, and images as
Parquet structs of embedded bytes (what both readers decode).

The ground truth is GUI-Libra's RL data: the action type, the point and box in the
profile's frame, and the target box on a 0-1000 grid of the image (`box_1000`), as a
JSON string (one Arrow type in every row). A swipe cannot be said in it (an action
type and one box: no direction or end point), so a swipe is listed, not written.
"""

from __future__ import annotations

import json

from trajforge.convert.source import Item

INEXPRESSIBLE = {
    "Swipe": "the RL ground truth is an action type and one box: a swipe's "
    "direction and end point have no field"
}


class Inexpressible(Exception):
    """A sample the target format cannot carry (counted and listed in the manifest)."""


def ground_truth(item: Item) -> str:
    if item.action_type in INEXPRESSIBLE:
        raise Inexpressible(INEXPRESSIBLE[item.action_type])
    norm = item.meta.get("box_norm") if item.kind == "grounding" else item.meta.get("target_box")
    box_1000 = None if norm is None else [round(c * 1000) for c in norm]
    value = None
    if item.kind == "action":
        body = item.answer[item.answer.index("<answer>") + 8 : item.answer.rindex("</answer>")]
        value = json.loads(body).get("value")
    return json.dumps(
        {
            "action_type": item.action_type,
            "point": item.point,
            "box": item.box,
            "box_1000": box_1000,
            "value": value,
            "coords": item.meta.get("coords"),
        },
        ensure_ascii=False,
        sort_keys=True,
    )


def image_struct(item: Item) -> dict:
    return {"bytes": item.image, "path": f"{item.key}.{item.image_ext}"}
