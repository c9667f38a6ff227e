"""Chat messages for VLM requests: parts, image encoding, per-backend conversion.

A request's messages use the OpenAI chat layout, except that an image part holds
the encoded image bytes themselves (`{"type": "image", "image": b"..."}`): the
caller never thinks about data URLs or PIL. Each backend converts:
`to_openai_messages` (base64 data URLs) and `split_images` (placeholders plus a
list of PIL images, for a transformers processor's chat template).
"""

from __future__ import annotations

import base64
import io
import math

from PIL import Image

# The parts live in schemas (the prompts that crawl and training share build with them).
from schemas.chat import image_part, text_part  # noqa: F401

ROLES = ("system", "user", "assistant")


def image_mime(data: bytes) -> str:
    """The MIME type from the magic bytes (png, jpeg, webp, gif)."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    raise ValueError(f"image part: unknown image format (first bytes {data[:8]!r})")


def fit_size(width: int, height: int, max_pixels: int | None) -> tuple[int, int]:
    """The largest size with the same aspect ratio and at most max_pixels pixels."""
    if not max_pixels or width * height <= max_pixels:
        return width, height
    scale = math.sqrt(max_pixels / (width * height))
    return max(1, int(width * scale)), max(1, int(height * scale))


def decode_image(data: bytes, max_pixels: int | None = None) -> Image.Image:
    """Decode to RGB, downscaled (aspect kept) to at most max_pixels pixels."""
    img = Image.open(io.BytesIO(data))
    size = fit_size(img.width, img.height, max_pixels)
    if img.mode != "RGB":
        img = img.convert("RGB")
    if size != (img.width, img.height):
        img = img.resize(size, Image.Resampling.BICUBIC)
    return img


def shrink_encoded(data: bytes, max_pixels: int | None) -> bytes:
    """The same image re-encoded smaller when it exceeds max_pixels, else unchanged."""
    if not max_pixels:
        return data
    with Image.open(io.BytesIO(data)) as img:
        if img.width * img.height <= max_pixels:
            return data
    buf = io.BytesIO()
    decode_image(data, max_pixels).save(buf, format="PNG")
    return buf.getvalue()


def data_url(data: bytes) -> str:
    return f"data:{image_mime(data)};base64,{base64.b64encode(data).decode('ascii')}"


def validate_messages(messages: list[dict], where: str = "request") -> None:
    """Raise a ValueError naming the message and part that is malformed."""
    if not messages:
        raise ValueError(f"{where}: no messages")
    for i, msg in enumerate(messages):
        if msg.get("role") not in ROLES:
            raise ValueError(f"{where}: messages[{i}].role={msg.get('role')!r} is not one of {ROLES}")
        content = msg.get("content")
        if isinstance(content, str):
            continue
        if not isinstance(content, list):
            raise ValueError(f"{where}: messages[{i}].content must be a string or a list of parts")
        for j, part in enumerate(content):
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "text" and isinstance(part.get("text"), str):
                continue
            if kind == "image" and isinstance(part.get("image"), (bytes, bytearray)) and part["image"]:
                continue
            raise ValueError(
                f"{where}: messages[{i}].content[{j}] must be a text part or an "
                f"image part with non-empty bytes (got type={kind!r})"
            )


def count_images(messages: list[dict]) -> int:
    return sum(
        1 for m in messages if isinstance(m["content"], list) for p in m["content"] if p["type"] == "image"
    )


def to_openai_messages(messages: list[dict], max_pixels: int | None = None) -> list[dict]:
    """OpenAI chat messages: image bytes become base64 data URLs."""
    out = []
    for msg in messages:
        content = msg["content"]
        if isinstance(content, list):
            content = [
                {"type": "image_url", "image_url": {"url": data_url(shrink_encoded(p["image"], max_pixels))}}
                if p["type"] == "image"
                else {"type": "text", "text": p["text"]}
                for p in content
            ]
        out.append({"role": msg["role"], "content": content})
    return out


def split_images(messages: list[dict], max_pixels: int | None = None) -> tuple[list[dict], list[Image.Image]]:
    """Messages for a chat template (image parts become `{"type": "image"}`
    placeholders) and the decoded images in the order they appear."""
    images: list[Image.Image] = []
    out = []
    for msg in messages:
        content = msg["content"]
        if isinstance(content, str):
            content = [text_part(content)]
        parts = []
        for p in content:
            if p["type"] == "image":
                images.append(decode_image(p["image"], max_pixels))
                parts.append({"type": "image"})
            else:
                parts.append({"type": "text", "text": p["text"]})
        out.append({"role": msg["role"], "content": parts})
    return out, images
