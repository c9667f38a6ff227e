"""OCR blur on a rendered screenshot with no accessibility tree (EN and ZH): the real
RapidOCR PP-OCRv4 models shipped in the wheel, offline."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont

from filters.pii import find_pii
from filters.pii_blur import _pixel_box, scrub_step
from filters.pii_ocr import OcrLine, default_engine, find_on_line, match_box
from filters.pii_surrogate import Surrogates
from schemas.actions import Action
from schemas.records import Step

FONT = "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc"
ROWS = [
    ("Email: ", "alex.morgan9@example.com"),
    ("Phone: ", "(206) 555-0103"),
    ("Ship to: ", "1126 Harbor Street, Georgetown, TX 78695"),
    ("手机：", "18839013206"),
    ("收货地址：", "广东省深圳市南山区科技南路377号"),
    ("身份证：", "440305199206177284"),
    ("卡号：", "6225886853576651952"),
]
CLEAN = "Order #20240315001 shipped, ¥2,499.00 包邮"


@pytest.fixture(scope="module")
def screen():
    img = Image.new("RGB", (900, 420), "white")
    d = ImageDraw.Draw(img)
    font = ImageFont.truetype(FONT, 18, index=2)
    boxes, y = [], 20
    for label, value in ROWS:
        d.text((30, y), label + value, fill=(30, 30, 30), font=font)
        box = d.textbbox((30 + d.textlength(label, font=font), y), value, font=font)
        boxes.append(tuple(int(round(c)) for c in box))
        y += 48
    d.text((30, y), CLEAN, fill=(30, 30, 30), font=font)
    clean_box = d.textbbox((30, y), CLEAN, font=font)
    buf = io.BytesIO()
    img.save(buf, "PNG")
    return buf.getvalue(), boxes, clean_box


def _edges(a: np.ndarray) -> float:
    g = a.astype(np.float64).mean(axis=2)
    return float(np.abs(np.diff(g, axis=0)).mean() + np.abs(np.diff(g, axis=1)).mean())


def test_values_drawn_on_a_screen_without_a_tree_are_found_and_blurred(screen):
    png, boxes, clean_box = screen
    step = Step(
        trajectory_id="imp-1", index=0, screenshot="", width=900, height=420, action=Action.tap(0.5, 0.5)
    )
    res = scrub_step(step, png, surrogates=Surrogates("imp-1"), ocr=default_engine())
    ocr = [r for r in res.records if r.get("box_source") == "ocr"]
    assert {r["kind"] for r in ocr} == {"email", "phone", "address", "cn_id", "bank_card"}
    assert res.image is not None
    old = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))
    new = np.asarray(Image.open(io.BytesIO(res.image)).convert("RGB"))
    mask = np.zeros(old.shape[:2], bool)
    for r in ocr:
        x0, y0, x1, y1 = _pixel_box(r["box"], 900, 420)  # the blurred pixels (2 px padding)
        mask[y0:y1, x0:x1] = True
    for (_label, value), (x0, y0, x1, y1) in zip(ROWS, boxes):
        assert mask[y0:y1, x0:x1].mean() >= 0.9, (value, mask[y0:y1, x0:x1].mean())
        a, b = old[y0:y1, x0:x1], new[y0:y1, x0:x1]
        assert _edges(b) < 0.25 * _edges(a) + 0.5, value  # the strokes are gone
    x0, y0, x1, y1 = clean_box
    assert not mask[y0:y1, x0:x1].any()  # prices and order numbers stay
    assert (old[~mask] == new[~mask]).all()  # PNG: nothing else changed
    # Read again, the blurred screen shows none of the values.
    again = default_engine().lines(res.image)
    assert not [m for line in again for m in find_on_line(line.text, find_pii)], again


def test_screens_with_a_tree_are_not_read_and_synthetic_ones_not_blurred(screen):
    png, _, _ = screen
    tree = '- text "Email: alex.morgan9@example.com" [box=30,20,300,24]'
    step = Step(
        trajectory_id="c-1",
        index=0,
        screenshot="",
        width=900,
        height=420,
        a11y_tree=tree,
        action=Action.tap(0.5, 0.5),
    )

    class Boom:
        def lines(self, image):
            raise AssertionError("a screen with a tree is not read by OCR")

    res = scrub_step(step, png, surrogates=Surrogates("c-1"), ocr=Boom())
    assert [r["box_source"] for r in res.records if r.get("box")] == ["node"]
    bare = step.model_copy(update={"a11y_tree": ""})
    kept = scrub_step(bare, png, keep=True, ocr=default_engine())
    assert kept.image is None and kept.step == bare
    assert {r["kind"] for r in kept.records} >= {"email", "phone"}
    assert all(r["kept"] == "synthetic" for r in kept.records)


def test_glued_ocr_text_is_read_with_its_spaces_put_back():
    line = OcrLine("Shipto:3840LakeviewTerrace,Georgetown,TX78608", (0, 0, 460, 20), 0.99)
    [m] = find_on_line(line.text, find_pii)
    assert m.kind == "address" and m.text == "3840LakeviewTerrace,Georgetown,TX78608"
    x0, _, x1, _ = match_box(line, m.start, m.end)
    assert 40 < x0 < 80 and x1 == 460
