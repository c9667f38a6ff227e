"""Resolution profiles: sizes per profile, and the pixel an action points at stays on its element."""

from __future__ import annotations

import io

import pytest
from PIL import Image, ImageDraw

from schemas.actions import Action, ActionType, to_pixels
from schemas.arrow import STEP_SCHEMA, row_to_step
from schemas.converters.qwen import smart_resize
from schemas.records import DeviceProfile, Element, Step, Task, Trajectory
from schemas.resolution import PROFILES, Resolution, resize_image, resolution_profile
from trajforge.publish.export import export_shards
from trajforge.publish.shards import iter_samples, read_manifest
from trajforge.store.raw import RawStore

BG, RED, BLUE, GREEN = (128, 128, 128), (230, 20, 20), (20, 20, 230), (20, 200, 20)
GO = (0.55, 0.30, 0.70, 0.50)  # the tapped button's box
FROM, TO = (0.10, 0.70, 0.25, 0.90), (0.75, 0.70, 0.90, 0.90)  # a swipe's two ends
SPLITS = [("train", 1.0)]
# (image_format, width, height): over the native budget, wide; a small JPEG; a tall phone.
SCREENS = [("png", 2400, 1350), ("jpeg", 640, 400), ("png", 360, 780)]


def _screen(fmt: str, w: int, h: int) -> bytes:
    im = Image.new("RGB", (w, h), BG)
    draw = ImageDraw.Draw(im)
    for box, colour in ((GO, RED), (FROM, BLUE), (TO, GREEN)):
        draw.rectangle((box[0] * w, box[1] * h, box[2] * w, box[3] * h), fill=colour)
    buf = io.BytesIO()
    im.save(buf, format="JPEG" if fmt == "jpeg" else "PNG", quality=95)
    return buf.getvalue()


def _centre(box):
    return (box[0] + box[2]) / 2, (box[1] + box[3]) / 2


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> RawStore:
    store = RawStore(tmp_path_factory.mktemp("raw"))
    with store.writer("web") as w:
        for t, (fmt, width, height) in enumerate(SCREENS):
            sha = store.blobs.put(_screen(fmt, width, height), fmt)
            tid = f"traj-{t}"
            task = Task(task_id=f"t{t}", language="en", app="shop", instruction="Press Go")
            go = Element(role="button", name="Go", bbox=GO)
            actions = [
                Action.tap(*_centre(GO)),
                Action(
                    type=ActionType.SWIPE,
                    x=_centre(FROM)[0],
                    y=_centre(FROM)[1],
                    x2=_centre(TO)[0],
                    y2=_centre(TO)[1],
                ),
            ]
            steps = [
                Step(
                    trajectory_id=tid,
                    index=i,
                    screenshot=sha,
                    image_format=fmt,
                    width=width,
                    height=height,
                    action=a,
                    target=go,
                    elements=[go],
                )
                for i, a in enumerate(actions)
            ]
            w.add(
                Trajectory(
                    trajectory_id=tid,
                    task=task,
                    platform="web",
                    app="shop",
                    device=DeviceProfile(viewport_width=width, viewport_height=height),
                    policy="oracle",
                    num_steps=len(steps),
                ),
                steps,
            )
    return store


def _colour_at(im: Image.Image, x: float, y: float) -> tuple[int, ...]:
    return im.convert("RGB").getpixel(to_pixels(x, y, *im.size))


def _near(c1, c2, tol=40) -> bool:
    return all(abs(a - b) <= tol for a, b in zip(c1, c2))


@pytest.mark.parametrize("name", ["native", "1120", "448", "qwen"])
def test_actions_land_on_their_element_after_resizing(store, tmp_path, name):
    profile = resolution_profile(name)
    result = export_shards(store, tmp_path / name, dataset="res", splits=SPLITS, resolution=name)
    assert read_manifest(tmp_path / name)["resolution"] == profile.describe()
    samples = list(iter_samples(tmp_path / name))
    assert len(samples) == result.samples == 2 * len(SCREENS)
    for key, sample in samples:
        step = row_to_step({f.name: sample["json"][f.name] for f in STEP_SCHEMA}, source=key)
        fmt, w0, h0 = SCREENS[int(step.trajectory_id.split("-")[1])]
        ext = "jpg" if fmt == "jpeg" else "png"
        im = Image.open(io.BytesIO(sample[ext]))
        assert im.format == ("JPEG" if fmt == "jpeg" else "PNG")  # re-encoded as stored
        # The sample's size is the image's size, and the profile's target.
        assert im.size == (step.width, step.height) == profile.target(w0, h0), key
        # Action.to_pixels on the new size lands on the element it pointed at.
        point = step.action.point_px(step.width, step.height)
        if step.action.type == ActionType.TAP:
            assert _near(im.convert("RGB").getpixel(point), RED), (key, point)
            x0, y0, x1, y1 = step.target.bbox
            assert step.target.contains(*_centre(step.target.bbox))
            # the box's corners, a little inside / outside, in the new frame
            inset = 4 / min(im.size)
            assert _near(_colour_at(im, x0 + inset, y0 + inset), RED)
            assert _near(_colour_at(im, x1 - inset, y1 - inset), RED)
            assert _near(_colour_at(im, x0 - inset, y0 - inset), BG)
            assert _near(_colour_at(im, x1 + inset, y1 + inset), BG)
        else:  # a swipe: both ends
            assert _near(im.convert("RGB").getpixel(point), BLUE), (key, point)
            end = to_pixels(step.action.x2, step.action.y2, step.width, step.height)
            assert _near(im.convert("RGB").getpixel(end), GREEN), (key, end)


def test_profile_sizes():
    native, qwen = PROFILES["native"], PROFILES["qwen"]
    assert native.target(2400, 1350) == (1920, 1080)  # budget 1920*1080, aspect kept
    assert native.target(1280, 800) == (1280, 800)  # under budget: untouched
    w, h = native.target(1440, 3120)  # a phone at DPR 3.5
    assert w * h <= 1920 * 1080 and abs(w / h - 1440 / 3120) < 0.01
    assert PROFILES["1120"].target(360, 780) == (1120, 1120)
    assert PROFILES["448"].target(2400, 1350) == (448, 448)
    assert qwen.target(1350, 2400) == smart_resize(2400, 1350)[::-1] == (1344, 2408)
    small = Resolution.qwen(max_pixels=256 * 28 * 28)
    w, h = small.target(2400, 1350)
    assert w % 28 == h % 28 == 0 and w * h <= 256 * 28 * 28
    assert Resolution.native(max_pixels=1000).target(100, 100) == (31, 31)


def test_bad_profiles_are_named():
    with pytest.raises(ValueError, match="unknown profile '720'"):
        resolution_profile("720")
    with pytest.raises(ValueError, match="max_pixels=0"):
        Resolution.native(max_pixels=0)
    with pytest.raises(ValueError, match="min_pixels"):
        Resolution.qwen(min_pixels=10, max_pixels=5)


def test_native_keeps_small_images_byte_for_byte(store, tmp_path):
    export_shards(store, tmp_path / "n", dataset="res", splits=SPLITS)  # native by default
    for key, sample in iter_samples(tmp_path / "n"):
        step = row_to_step({f.name: sample["json"][f.name] for f in STEP_SCHEMA}, source=key)
        _, w0, h0 = SCREENS[int(step.trajectory_id.split("-")[1])]
        data = sample.get("png") or sample.get("jpg")
        stored = store.blobs.get(step.screenshot, step.image_format)
        assert (data == stored) == (w0 * h0 <= 1920 * 1080), key


def test_resize_image_modes_and_errors():
    buf = io.BytesIO()
    Image.new("P", (50, 40), 3).save(buf, format="PNG")  # a palette PNG
    out = Image.open(io.BytesIO(resize_image(buf.getvalue(), "png", (25, 20))))
    assert out.size == (25, 20) and out.format == "PNG"
    buf = io.BytesIO()
    Image.new("RGBA", (50, 40), (1, 2, 3, 100)).save(buf, format="WEBP")
    out = Image.open(io.BytesIO(resize_image(buf.getvalue(), "webp", (10, 8))))
    assert out.size == (10, 8) and out.format == "WEBP"
    with pytest.raises(ValueError, match="blob.png: cannot decode"):
        resize_image(b"not an image", "png", (10, 10), source="blob.png")
