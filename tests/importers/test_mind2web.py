"""Multimodal-Mind2Web through SeeAct's query line (real step values) and HF-style rows."""

from __future__ import annotations

import base64
import json
import shutil

import pytest

from trajforge.importers import import_path

from .conftest import SAMPLES, by_episode, libra, load, quarantined

FOLDER = SAMPLES / "mind2web_and_multimodal_mind2web"
QUERY = FOLDER / "seeact_query_step.truncated.json"
ANN = "725d96cd-9283-4ec7-b902-d003503f2d6b"


def test_seeact_step(store):
    result = import_path("mind2web", FOLDER, store)
    assert (result.imported, result.steps, result.quarantined) == (1, 1, 0)
    trajs, steps = load(store, "mind2web")
    traj = by_episode(trajs, "mind2web", ANN)
    # Only step 2 of the task is here (2 previous actions): a partial trajectory.
    assert (traj.platform, traj.app, traj.outcome) == ("web", "thumbtack", "unknown")
    [st] = steps[traj.trajectory_id]
    assert (st.action.type.value, st.width, st.height, st.image_format) == ("tap", 1280, 2529, "jpeg")
    # bounding_box_rect "587,596.59375,93,54" (x, y, w, h) -> centre (633.5, 623.59375)
    # -> x = 633.5/1280 = 0.494922, y = 623.59375/2529 = 0.246577 of the 1280x2529 segment.
    assert (st.action.x, st.action.y) == pytest.approx((633.5 / 1280, 623.59375 / 2529))
    assert (st.target.role, st.target.name) == ("button", "Search")
    assert st.target.bbox == pytest.approx((587 / 1280, 596.59375 / 2529, 680 / 1280, 650.59375 / 2529))
    px, py = libra(st)["point_2d"]
    assert abs(px - 633.5) <= 0.5 and py == 624
    assert libra(st, "grid1000")["point_2d"] == [495, 247]


def hf_row(**change) -> dict:
    """The same step as a Multimodal-Mind2Web parquet row: operation and candidates JSON strings."""
    q = json.loads(QUERY.read_text())
    row = {
        "annotation_id": ANN,
        "website": q["website"],
        "confirmed_task": q["confirmed_task"],
        "action_uid": q["action_uid"],
        "operation": json.dumps(q["operation"]),
        "pos_candidates": [json.dumps(c) for c in q["pos_candidates"]],
        "neg_candidates": [json.dumps(c) for c in q["neg_candidates"]],
        "action_reprs": q["previous_actions"] + ["[button]  Search -> CLICK"],
        "target_action_index": "2",
    }
    row.update(change)
    return row


def test_hf_row_without_image_uses_the_page_size(tmp_path, store):
    (tmp_path / "rows.jsonl").write_text(json.dumps(hf_row()) + "\n")
    result = import_path("mind2web", tmp_path, store)
    assert result.imported == 1
    _, steps = load(store, "mind2web")
    [[st]] = steps.values()
    # No image: the <html> candidate's box "0,0,1280,7411.703125" is the page, 1280 x 7412.
    assert (st.screenshot, st.width, st.height) == ("", 1280, 7412)
    assert st.action.y == pytest.approx(623.59375 / 7412)


def test_hf_row_with_image_bytes(tmp_path, store):
    jpg = (FOLDER / f"{ANN}_c69cbea4-7231-42f7-b5fc-e0fac8f781e9" / "images" / "0.jpg").read_bytes()
    row = hf_row(screenshot={"bytes": base64.b64encode(jpg).decode()})
    (tmp_path / "rows.json").write_text(json.dumps([row]))
    assert import_path("mind2web", tmp_path, store).imported == 1
    [[st]] = load(store, "mind2web")[1].values()
    assert (st.width, st.height) == (1280, 2529) and store.blobs.exists(st.screenshot, "jpeg")


@pytest.mark.parametrize(
    "content, field",
    [
        (json.dumps(hf_row())[:400], "json"),  # truncated
        (json.dumps({k: v for k, v in hf_row().items() if k != "confirmed_task"}), "confirmed_task"),
        (json.dumps(hf_row(operation=["CLICK"])), "operation"),  # wrong type
        (
            json.dumps(
                hf_row(
                    pos_candidates=[
                        json.dumps(
                            {
                                **json.loads(hf_row()["pos_candidates"][0]),
                                "attributes": json.dumps({"bounding_box_rect": "nan,596,93,54"}),
                            }
                        )
                    ]
                )
            ),
            "bounding_box_rect",
        ),
        (json.dumps(hf_row(operation=json.dumps({"op": "DRAG", "value": ""}))), "operation.op"),
    ],
)
def test_mind2web_bad_records(tmp_path, store, content, field):
    folder = tmp_path / "in"
    shutil.copytree(FOLDER, folder)
    (folder / "bad.jsonl").write_text(content + "\n")
    result = import_path("mind2web", folder, store)
    assert (result.imported, result.quarantined) == (1, 1)
    [q] = quarantined(result)
    assert q["source"].endswith("bad.jsonl") and q["record"] and field in q["field"], q
