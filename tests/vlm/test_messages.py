"""Message parts, image encoding and per-backend conversion."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from trajforge.vlm.messages import (
    data_url,
    fit_size,
    image_mime,
    image_part,
    shrink_encoded,
    split_images,
    text_part,
    to_openai_messages,
    validate_messages,
)

from .helpers import decode_data_url, screenshot


def test_image_formats_and_sizes():
    png, jpeg, webp = (screenshot(64, 40, "x", fmt=f) for f in ("PNG", "JPEG", "WEBP"))
    assert [image_mime(b) for b in (png, jpeg, webp)] == ["image/png", "image/jpeg", "image/webp"]
    with pytest.raises(ValueError, match="unknown image format"):
        image_mime(b"not an image")
    assert decode_data_url(data_url(jpeg)) == ("data:image/jpeg;base64", jpeg)
    assert fit_size(1280, 800, None) == (1280, 800)
    w, h = fit_size(1280, 800, 100_000)
    assert w * h <= 100_000 and abs(w / h - 1.6) < 0.01 and w * h > 95_000
    big = screenshot(1280, 800, "big")
    small = Image.open(io.BytesIO(shrink_encoded(big, 100_000)))
    assert small.size == (w, h)
    assert shrink_encoded(png, 100_000) is png  # already small: untouched


def test_conversions_keep_order_and_text():
    a, b = screenshot(64, 40, "a"), screenshot(30, 90, "b", fmt="JPEG")
    messages = [
        {"role": "system", "content": "rules"},
        {"role": "user", "content": [text_part("one"), image_part(a), text_part("two"), image_part(b)]},
    ]
    validate_messages(messages)
    oa = to_openai_messages(messages)
    assert oa[0] == {"role": "system", "content": "rules"}
    assert [p["type"] for p in oa[1]["content"]] == ["text", "image_url", "text", "image_url"]
    assert oa[1]["content"][3]["image_url"]["url"] == data_url(b)
    hf, images = split_images(messages)
    assert hf[1]["content"][1] == {"type": "image"} and [im.size for im in images] == [(64, 40), (30, 90)]
    assert all(im.mode == "RGB" for im in images)


@pytest.mark.parametrize(
    "messages,where",
    [
        ([], "no messages"),
        ([{"role": "robot", "content": "x"}], r"messages\[0\].role='robot'"),
        (
            [{"role": "user", "content": [{"type": "image_url", "image_url": "http://x"}]}],
            r"messages\[0\].content\[0\]",
        ),
        ([{"role": "user", "content": 3}], r"messages\[0\].content must be"),
    ],
)
def test_bad_messages_are_named(messages, where):
    with pytest.raises(ValueError, match=where):
        validate_messages(messages, where="req-1")
