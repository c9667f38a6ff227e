"""Converters between the canonical `Action` and the formats models speak.

- `gui_libra`: GUI-Libra's `<think>…</think><answer>{json}</answer>`, pixels or 0-1000.
- `autoglm`: Open-AutoGLM's `do(action="Tap", element=[x,y])` strings, 0-999.
- `qwen`: Qwen2.5-VL `mobile_use` tool-call arguments in absolute pixels, and
  Qwen's `smart_resize`.

Every parser raises `SchemaError` naming the format's field at fault; every
writer raises `SchemaError` (field "type") for an action type the format cannot
express. The helpers in `common` are shared by the three modules, and the two
rewrites (`split_type_focus`, `scroll_to_swipe`) let a caller turn an action a
format cannot express into ones it can, explicitly.
"""

from __future__ import annotations

from .autoglm import from_autoglm, parse_autoglm, to_autoglm
from .common import SWIPE_SPAN, make_action, scroll_to_swipe, split_type_focus, swipe_direction
from .gui_libra import from_gui_libra, to_gui_libra
from .qwen import from_qwen25vl, qwen25vl_tool_call, smart_resize, to_qwen25vl

__all__ = [
    "to_gui_libra",
    "from_gui_libra",
    "to_autoglm",
    "from_autoglm",
    "parse_autoglm",
    "to_qwen25vl",
    "from_qwen25vl",
    "qwen25vl_tool_call",
    "smart_resize",
    "split_type_focus",
    "scroll_to_swipe",
    "swipe_direction",
    "SWIPE_SPAN",
    "make_action",
]
