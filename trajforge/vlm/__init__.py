"""Vision-language models behind one interface: local transformers or an endpoint.

Importing this package does not import torch; `TransformersBackend` does.
"""

from __future__ import annotations

from trajforge.vlm.backend_config import backend_from_config
from trajforge.vlm.backends import VLMBackend, VLMRequest
from trajforge.vlm.messages import image_part, text_part
from trajforge.vlm.tiny import build_tiny_vlm, default_tiny_dir

__all__ = [
    "VLMBackend",
    "VLMRequest",
    "backend_from_config",
    "build_tiny_vlm",
    "default_tiny_dir",
    "image_part",
    "text_part",
]
