"""Sets written for a model profile: read back as that profile's trainer reads them, every
tap answer lands inside its recorded target box; a set written the old way (answers in
pixels of the stored screenshot) misses. Manifests and samples name profile and provenance."""

from __future__ import annotations

import io
import json

import pytest
from PIL import Image

from schemas.actions import Action
from schemas.model_profiles import PROFILES, ModelProfile
from schemas.provenance import git_commit, pipeline_version
from schemas.records import DeviceProfile, Element, Step, Task, Trajectory
from synthesis.cot import generate_cot
from synthesis.frame_check import tap_answers_in_box
from synthesis.set_options import ReasoningSetOptions
from synthesis.set_writer import write_reasoning_set
from trajforge.publish.shards import MANIFEST, iter_samples
from trajforge.store.raw import RawStore

# Odd sizes: a phone near 1440x3120 and a desktop page near 1280x800.
SCREENS = {"android": (1441, 3119), "web": (1279, 801)}
# Small targets, some near the right and bottom edges, where a wrong frame misses most.
BOXES = [
    (0.86, 0.90, 0.96, 0.95),
    (0.05, 0.05, 0.12, 0.08),
    (0.45, 0.60, 0.55, 0.63),
    (0.70, 0.30, 0.78, 0.34),
    (0.20, 0.80, 0.30, 0.84),
    (0.975, 0.49, 0.99, 0.50),
]  # a 20-pixel icon at the right edge of the phone
# Today's writer, emulated: the image as stored and pixels of the screenshot (a frame that
# is the screenshot's own size), under a manifest that names no profile.
AS_STORED = ModelProfile("as-stored", 1, 1, 2**40, "pixels")


def png(w: int, h: int, shade: int) -> bytes:
    buf = io.BytesIO()
    Image.new("L", (w, h), shade).save(buf, format="PNG")
    return buf.getvalue()


def build_frames_store(root):
    """(curated store, CoT rows, root): one phone and one web trajectory of taps on BOXES."""
    store = RawStore(root / "curated")
    pairs = []
    with store.writer("crawl") as w:
        for t, (platform, (sw, sh)) in enumerate(sorted(SCREENS.items())):
            tid = f"tr{t}"
            task = Task(
                task_id=f"task{t}",
                instruction=f"Open the menu {t}",
                language="en",
                app="shop",
                template_id=f"tpl{t}",
            )
            traj = Trajectory(
                trajectory_id=tid,
                task=task,
                platform=platform,
                app="shop",
                device=DeviceProfile(viewport_width=sw, viewport_height=sh),
                policy="oracle",
                num_steps=len(BOXES),
                outcome="success",
                verified_by="state",
                source_name=f"env-{platform}",
                verifier="state",
                reward=1.0,
            )
            steps = []
            for i, box in enumerate(BOXES):
                img = png(sw, sh, 30 * i)
                target = Element(role="button", name=f"Item {i}", bbox=box)
                steps.append(
                    Step(
                        trajectory_id=tid,
                        index=i,
                        screenshot=store.blobs.put(img, "png"),
                        width=sw,
                        height=sh,
                        action=Action.tap((box[0] + box[2]) / 2, (box[1] + box[3]) / 2),
                        target=target,
                        elements=[target],
                    )
                )
            w.add(traj, steps)
            pairs.append((traj, steps))
    rows = [c.to_row() for c in generate_cot(pairs)]
    return store, rows, root


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return build_frames_store(tmp_path_factory.mktemp("frames"))


def before_after(root) -> dict[str, dict[str, int]]:
    """{profile: {"tap_answers", "before", "after"}}: tap answers outside their target box
    in a set written the old way (read by the profile's trainer) and one written for it."""
    curated, rows, _ = build_frames_store(root)
    old = _old_way_set(curated, rows, root / "old")
    out = {}
    for name in sorted(PROFILES):
        before = tap_answers_in_box(old, profile=name)
        _write(curated, rows, root / name, name)
        after = tap_answers_in_box(root / name)
        out[name] = {
            "tap_answers": after["tap_answers"],
            "before": before["outside"],
            "after": after["outside"],
        }
    return out


def _write(store, rows, out, profile):
    options = ReasoningSetOptions(profile, splits=(("train", 1.0),))
    return write_reasoning_set(store, rows, out, dataset="frames", options=options)


def _old_way_set(store, rows, out):
    _write(store, rows, out, AS_STORED)
    manifest = json.loads((out / MANIFEST).read_text())
    manifest.pop("model_profile")
    (out / MANIFEST).write_text(json.dumps(manifest))
    return out


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_a_set_for_a_profile_lands_every_tap_in_its_box(store, tmp_path, name):
    curated, rows, _ = store
    out = tmp_path / name
    summary = _write(curated, rows, out, name)
    assert summary["checks"]["answers_parse"]["passed"], summary["checks"]
    result = tap_answers_in_box(out)
    assert result["profile"] == name
    assert result["tap_answers"] == 2 * 2 * len(BOXES)  # 2 trajectories, 2 modes
    assert (result["outside"], result["share_inside"], result["passed"]) == (0, 1.0, True), result
    # Each image is at the profile's frame; the sample says both sizes.
    p = PROFILES[name]
    for _, sample in iter_samples(out, "train"):
        j = sample["json"]
        shot = (j["screenshot"]["width"], j["screenshot"]["height"])
        assert (
            Image.open(io.BytesIO(sample["png"])).size
            == p.frame(*shot)
            == (j["image"]["width"], j["image"]["height"])
        )
        assert (j["model_profile"], j["coords"]) == (name, p.coords)


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_a_set_written_the_old_way_misses_for_every_profile(store, tmp_path, name):
    curated, rows, _ = store
    old = _old_way_set(curated, rows, tmp_path / "old")
    result = tap_answers_in_box(old, profile=name)
    assert result["tap_answers"] == 2 * 2 * len(BOXES) and result["outside"] > 0 and not result["passed"], (
        result
    )


def test_manifest_and_samples_carry_provenance_sources_and_verifiers(store, tmp_path):
    curated, rows, _ = store
    out = tmp_path / "prov"
    _write(curated, rows, out, "qwen2.5-vl")
    manifest = json.loads((out / MANIFEST).read_text())
    assert manifest["model_profile"] == PROFILES["qwen2.5-vl"].describe()
    want = {"pipeline_version": pipeline_version(), "git_commit": git_commit(), "model_profile": "qwen2.5-vl"}
    assert manifest["provenance"] == want
    assert manifest["sources"] == {"env-android": 1, "env-web": 1}
    assert manifest["verifiers"] == {"state": 2}
    for _, sample in iter_samples(out, "train"):
        j = sample["json"]
        assert j["provenance"] == want and j["verifier"] == "state"
        assert j["source_name"] in ("env-android", "env-web")


def test_training_reads_the_profile_and_refuses_a_frame_it_would_break(store, tmp_path):
    from training.data import FrameMismatchError, frame_gate, set_profile

    curated, rows, _ = store
    new = tmp_path / "new"
    _write(curated, rows, new, "qwen2.5-vl")
    assert set_profile(new) == PROFILES["qwen2.5-vl"]
    largest = json.loads((new / MANIFEST).read_text())["frames"]["max_pixels"]
    assert largest == max(672 * 1456, 1260 * 784)  # the larger frame: the web page's
    assert frame_gate(new, None, full_run=True)["frame"] == "kept"
    assert frame_gate(new, largest, full_run=True)["frame"] == "kept"
    with pytest.raises(FrameMismatchError, match="image_max_pixels"):
        frame_gate(new, 12544, full_run=True)
    assert frame_gate(new, 12544, full_run=False)["frame"] == "capped"  # the tiny model: said
    old = _old_way_set(curated, rows, tmp_path / "old")
    assert set_profile(old) is None
    with pytest.raises(FrameMismatchError, match="names no model profile"):
        frame_gate(old, None, full_run=True)


if __name__ == "__main__":  # python -m tests.synthesis.test_profile_frames
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        for name, r in before_after(Path(tmp)).items():
            print(
                f"{name:<14} tap answers {r['tap_answers']:>3}  outside their box: "
                f"before {r['before']:>3}  after {r['after']:>3}"
            )
