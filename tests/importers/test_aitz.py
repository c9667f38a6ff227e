"""AitZ: the real 4-step episode from CoAT's data-example (AitW action encoding)."""

from __future__ import annotations

import hashlib
import json

import pytest

from trajforge.importers import import_path

from .conftest import SAMPLES, by_episode, libra, load, quarantined, run, with_bad_file

EPISODE = SAMPLES / "aitz" / "GOOGLE_APPS-523638528775825151.json"
IMAGE = SAMPLES / "aitz" / "GOOGLE_APPS-523638528775825151_1.png"


def test_aitz_episode_actions_and_coordinates(store):
    result = run("aitz", SAMPLES / "aitz", store)
    assert (result.imported, result.steps, result.quarantined) == (1, 4, 0)
    trajs, steps = load(store, "aitz")
    traj = by_episode(trajs, "aitz", "523638528775825151")
    assert (traj.source, traj.source_name, traj.policy) == ("import", "aitz", "imported")
    assert (traj.outcome, traj.verified_by, traj.platform) == ("success", "dataset", "android")
    st = steps[traj.trajectory_id]
    assert [s.action.type.value for s in st] == ["home", "swipe", "tap", "done"]
    # Step 1: touch [y, x] = [0.5411, 0.5074], lift [0.0011, 0.5789]; distance
    # sqrt(0.5400^2 + 0.0715^2) = 0.545 > 0.04 -> swipe from x=0.5074, y=0.5411 to x=0.5789, y=0.0011.
    s1 = st[1].action
    assert (s1.x, s1.y, s1.x2, s1.y2) == pytest.approx((0.5073748, 0.5410637, 0.5788536, 0.0011157))
    # Step 2: touch [0.49836, 0.60698], lift [0.49670, 0.60698]: distance 0.0017 <= 0.04 -> tap,
    # x = 0.60698 (second value), y = 0.49836 (first value).
    assert (st[2].action.x, st[2].action.y) == pytest.approx((0.6069773, 0.4983621))
    # The step-1 image is here: its sha256 and real size; the others take that size (same episode).
    assert st[1].screenshot == hashlib.sha256(IMAGE.read_bytes()).hexdigest()
    assert store.blobs.exists(st[1].screenshot, "png")
    assert [(s.width, s.height) for s in st] == [(270, 600)] * 4
    assert [s.screenshot == "" for s in st] == [True, False, True, True]
    # ui_positions are [y, x, h, w] pixels: step 2's first, [34, 236, 16, 5] ->
    # (236/270, 34/600, 241/270, 50/600), an ICON_THREE_DOTS.
    e = st[2].elements[0]
    assert (e.role, e.name) == ("icon", "three_dots")
    assert e.bbox == pytest.approx((236 / 270, 34 / 600, 241 / 270, 50 / 600))
    assert st[2].thought.startswith("The Clock app is displayed")
    # GUI-Libra pixels of the 270x600 image: tap 0.60698*270 = 163.9 -> 164, 0.49836*600 = 299.0 -> 299.
    assert libra(st[2]) == {**libra(st[2]), "action_type": "Click", "point_2d": [164, 299]}
    assert libra(st[2], "grid1000")["point_2d"] == [607, 498]
    # Swipe start 0.50737*270 = 137.0 -> 137, 0.54106*600 = 324.6 -> 325; the finger moves up.
    assert (libra(st[1])["point_2d"], libra(st[1])["value"]) == ([137, 325], "up")
    assert [libra(s)["action_type"] for s in (st[0], st[3])] == ["NavigateHome", "Terminate"]


def _episode(**change) -> list[dict]:
    steps = json.loads(EPISODE.read_text())
    for s in steps:
        s["episode_id"] = "999"
    steps[2].update(change)
    return steps


@pytest.mark.parametrize(
    "content, field",
    [
        (EPISODE.read_text()[:900], "json"),  # truncated
        (
            json.dumps([{k: v for k, v in s.items() if k != "result_action_type"} for s in _episode()]),
            "result_action_type",
        ),  # missing field
        (json.dumps(_episode(result_action_type="4")), "step 2: result_action_type"),  # wrong type
        (json.dumps(_episode(result_touch_yx="[NaN, 0.6]")), "step 2: result_touch_yx"),  # NaN
        (json.dumps(_episode(result_action_type=8)), "step 2: result_action_type"),  # unknown action
    ],
)
def test_aitz_bad_records_are_quarantined(tmp_path, store, content, field):
    folder = with_bad_file(tmp_path, EPISODE, "bad.json", content)
    result = import_path("aitz", folder, store)
    assert (result.imported, result.quarantined) == (1, 1)  # the good episode still imports
    [q] = quarantined(result)
    assert q["source"].endswith("bad.json") and q["record"] is not None
    assert field in q["field"], q


def test_aitw_tfrecord_is_refused_with_the_reason(tmp_path, store):
    f = tmp_path / "general-00000-of-00321.tfrecord.gz"
    f.write_bytes(b"\x1f\x8b")
    direct = import_path("aitz", f, store)  # quarantined with the reason, not a crash
    assert (direct.imported, direct.quarantined) == (0, 1)
    assert "TensorFlow" in quarantined(direct)[0]["reason"]
    direct.quarantine_path.unlink()
    folder = with_bad_file(tmp_path, EPISODE, "x.tfrecord", "")
    result = import_path("aitz", folder, store)
    assert result.imported == 1 and "TensorFlow" in quarantined(result)[0]["reason"]
