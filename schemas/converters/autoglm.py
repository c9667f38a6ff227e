"""Open-AutoGLM action strings <-> the canonical Action.

Open-AutoGLM (github.com/zai-org/Open-AutoGLM, `phone_agent/config/prompts_*.py`,
parser `phone_agent/actions/handler.py`) answers `<think>…</think><answer>ACTION`
where ACTION is one Python-call-like line; points are on a 0-999 grid and the
handler maps a value v to int(v / 1000 * dim) (`grids.GRID_999`).

| canonical          | Open-AutoGLM                                             |
|--------------------|----------------------------------------------------------|
| tap                | do(action="Tap", element=[x,y])  (text <-> message="…",   |
|                    |   the prompt's mark of a sensitive tap)                  |
| double_tap         | do(action="Double Tap", element=[x,y])                   |
| long_press         | do(action="Long Press", element=[x,y])                   |
| swipe              | do(action="Swipe", start=[x1,y1], end=[x2,y2])           |
| type (no point)    | do(action="Type", text="…")                              |
| open_app           | do(action="Launch", app="…")                             |
| back / home        | do(action="Back") / do(action="Home")                    |
| wait               | do(action="Wait", duration="2 seconds") or do(action="Wait") |
| take_over          | do(action="Take_over", message="…")                      |
| done               | finish(message="…"); finish() when there is no message   |
| scroll, key, select, answer, right_click, type with a point: SchemaError  |
|   (see `scroll_to_swipe` and `split_type_focus` to rewrite the first and  |
|   the last; a right click is never turned into a long press)              |

Read only (one way, the original call kept in `description`):
- do(action="Type_Name", text=…) -> type (the upstream handler types it the same way)
- do(action="Interact") -> take_over (the model asks the user to choose)
- do(action="Note", message=…), do(action="Call_API", instruction=…) -> wait:
  they record or summarise content and do nothing on the device.

Strings: Type's text and finish's message are raw, as upstream reads them
(`split("text=", 1)[1][1:-2]`): everything between the opening quote and the
final `")`, quotes and backslashes included, no escapes. Every other string is
a Python literal, read with `ast.literal_eval` (never eval) and written with
escapes. Dropped when writing: description, duration_ms of long_press/swipe.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from ..actions import Action, ActionType
from ..errors import SchemaError
from ..grids import GRID_999, point_from_grid, point_to_grid
from .common import make_action, ms_from_seconds, seconds_text, unsupported

_POINT_NAMES = {
    ActionType.TAP: "Tap",
    ActionType.DOUBLE_TAP: "Double Tap",
    ActionType.LONG_PRESS: "Long Press",
}
_BARE = {ActionType.BACK: "Back", ActionType.HOME: "Home"}


def _lit(s: str) -> str:
    # A JSON string is also a valid Python string literal; ensure_ascii=False keeps Chinese readable.
    return json.dumps(s, ensure_ascii=False)


def _pt(x: float, y: float) -> str:
    gx, gy = point_to_grid(x, y, GRID_999)
    return f"[{gx},{gy}]"


def to_autoglm(action: Action, thought: str | None = None) -> str:
    """The Open-AutoGLM action line (or a full `<think>…</think><answer>…` response)."""
    line = _line(action)
    if thought is None:
        return line
    return f"<think>{thought}</think>\n<answer>{line}</answer>"


def _line(a: Action) -> str:
    t = a.type
    if t in _POINT_NAMES:
        msg = f", message={_lit(a.text)}" if t == ActionType.TAP and a.text is not None else ""
        return f'do(action="{_POINT_NAMES[t]}", element={_pt(a.x, a.y)}{msg})'
    if t == ActionType.SWIPE:
        return f'do(action="Swipe", start={_pt(a.x, a.y)}, end={_pt(a.x2, a.y2)})'
    if t == ActionType.TYPE:
        if a.x is not None:
            raise unsupported(
                a,
                "Open-AutoGLM",
                "its Type writes into the focused field; "
                "split it with split_type_focus() into a tap and a type",
            )
        return f'do(action="Type", text="{a.text}")'
    if t == ActionType.OPEN_APP:
        return f'do(action="Launch", app={_lit(a.text)})'
    if t in _BARE:
        return f'do(action="{_BARE[t]}")'
    if t == ActionType.WAIT:
        if a.duration_ms is None:
            return 'do(action="Wait")'
        return f'do(action="Wait", duration="{seconds_text(a.duration_ms)} seconds")'
    if t == ActionType.TAKE_OVER:
        if a.text is None:
            return 'do(action="Take_over")'
        return f'do(action="Take_over", message={_lit(a.text)})'
    if t == ActionType.DONE:
        return "finish()" if a.text is None else f'finish(message="{a.text}")'
    hints = {
        ActionType.SCROLL: "rewrite it as a swipe with scroll_to_swipe()",
        ActionType.ANSWER: "Open-AutoGLM gives answers in finish(message=...)",
    }
    raise unsupported(a, "Open-AutoGLM", hints.get(t, ""))


def from_autoglm(text: str) -> Action:
    """An Action from an Open-AutoGLM action line or full response."""
    return parse_autoglm(text)[0]


_THINK = re.compile(r"<think>(.*?)</think>", re.DOTALL)
_TYPE = re.compile(r'^do\(\s*action\s*=\s*"(Type|Type_Name)"\s*,\s*text\s*=\s*"(.*)"\s*\)$', re.DOTALL)
_FINISH = re.compile(r'^finish\(\s*message\s*=\s*"(.*)"\s*\)$', re.DOTALL)
_FINISH_EMPTY = re.compile(r"^finish\(\s*\)$")
_FENCE = re.compile(r"^```[a-z]*\s*|\s*```$")


def parse_autoglm(text: str) -> tuple[Action, str | None]:
    """(Action, thought or None) from an Open-AutoGLM action line or full response."""
    if not isinstance(text, str):
        raise SchemaError(f"expected the response text, got {type(text).__name__}", field="action")
    think = _THINK.search(text)
    thought = think.group(1) if think else None
    line = _action_line(text[think.end() :] if think else text)

    if m := _TYPE.match(line):
        kind = m.group(1)
        return make_action(
            type=ActionType.TYPE, text=m.group(2), description=None if kind == "Type" else line, field="text"
        ), thought
    if m := _FINISH.match(line):
        return make_action(type=ActionType.DONE, text=m.group(1)), thought
    if _FINISH_EMPTY.match(line):
        return make_action(type=ActionType.DONE), thought
    func, kwargs = _call(line)
    if func == "finish":  # finish(message='…') or other spellings the raw form missed
        return make_action(type=ActionType.DONE, text=_text(kwargs, "message", required=False)), thought
    return _from_call(line, kwargs), thought


def _action_line(text: str) -> str:
    if "<answer>" in text:
        text = text.split("<answer>", 1)[1]
    text = text.split("</answer>", 1)[0].strip()
    return _FENCE.sub("", text).strip()


def _call(line: str) -> tuple[str, dict[str, Any]]:
    try:
        tree = ast.parse(line, mode="eval")
    except SyntaxError:
        # Upstream escapes raw control characters inside strings before parsing.
        escaped = line.replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
        try:
            tree = ast.parse(escaped, mode="eval")
        except SyntaxError as exc:
            raise SchemaError(
                f"not a do(...) or finish(...) call ({exc.msg}): {line[:80]!r}", field="action"
            ) from None
    call = tree.body
    if not (
        isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in ("do", "finish")
    ):
        raise SchemaError(f"not a do(...) or finish(...) call: {line[:80]!r}", field="action")
    if call.args:
        raise SchemaError(f"{call.func.id}(...) takes keyword arguments only", field="action")
    kwargs = {}
    for kw in call.keywords:
        if kw.arg is None:
            raise SchemaError("do(**...) is not allowed", field="action")
        try:
            kwargs[kw.arg] = ast.literal_eval(kw.value)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            raise SchemaError("not a literal value", field=kw.arg) from None
    return call.func.id, kwargs


def _norm(name: str) -> str:
    return re.sub(r"[\s_]", "", name).lower()


def _text(kw: dict, key: str, *, required: bool) -> str | None:
    v = kw.get(key)
    if v is None:
        if required:
            raise SchemaError("missing", field=key)
        return None
    if not isinstance(v, str):
        raise SchemaError(f"{v!r} is not a string", field=key)
    return v


def _from_call(line: str, kw: dict[str, Any]) -> Action:
    name = kw.get("action")
    if not isinstance(name, str):
        raise SchemaError(f"missing or not a string: {name!r}", field="action")
    n = _norm(name)
    point_types = {
        "tap": ActionType.TAP,
        "doubletap": ActionType.DOUBLE_TAP,
        "longpress": ActionType.LONG_PRESS,
    }
    if n in point_types:
        x, y = point_from_grid(kw.get("element"), GRID_999, field="element")
        text = _text(kw, "message", required=False) if n == "tap" else None
        return make_action(type=point_types[n], x=x, y=y, text=text)
    if n == "swipe":
        x, y = point_from_grid(kw.get("start"), GRID_999, field="start")
        x2, y2 = point_from_grid(kw.get("end"), GRID_999, field="end")
        return make_action(type=ActionType.SWIPE, x=x, y=y, x2=x2, y2=y2)
    if n in ("type", "typename"):  # reached when the raw form did not match, e.g. text='…'
        return make_action(
            type=ActionType.TYPE,
            text=_text(kw, "text", required=True),
            description=None if n == "type" else line,
        )
    if n == "launch":
        return make_action(type=ActionType.OPEN_APP, text=_text(kw, "app", required=True))
    if n == "back":
        return make_action(type=ActionType.BACK)
    if n == "home":
        return make_action(type=ActionType.HOME)
    if n == "wait":
        d = kw.get("duration")
        return make_action(
            type=ActionType.WAIT, duration_ms=None if d is None else ms_from_seconds(d, field="duration")
        )
    if n == "takeover":
        return make_action(type=ActionType.TAKE_OVER, text=_text(kw, "message", required=False))
    if n == "interact":
        return make_action(type=ActionType.TAKE_OVER, description=line)
    if n in ("note", "callapi"):
        return make_action(type=ActionType.WAIT, description=line)
    raise SchemaError(f"unknown action {name!r}", field="action")
