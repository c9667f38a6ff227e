"""The parts of a chat message, as every prompt in the project writes them.

Messages use the OpenAI chat layout, except that an image part holds the encoded
image bytes themselves; trajforge.vlm.messages converts them for each backend
(data URLs, or placeholders plus PIL images for a processor's chat template).
The prompts that crawl, synthesis and training share (schemas.agent_prompt) build
their messages from these two.
"""

from __future__ import annotations

from typing import Any


def text_part(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def image_part(data: bytes) -> dict[str, Any]:
    return {"type": "image", "image": data}
