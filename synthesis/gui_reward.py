"""GUI-Libra's step reward on answer text, standard library only.

One file for every RL loop that scores a GUI step: the home loop (training.rl), and
verl / EasyR1, which load it by path (`trajforge convert --format verl|easyr1` copies it
into the converted folder as `reward.py`), so it imports nothing of the project.

    score = W_FORMAT * format + W_MATCH * (type match AND value F1 >= 0.5 AND point hit)

- format: the answer parses as GUI-Libra's `<answer>{json}</answer>` (a grounding answer:
  a JSON object with `point_2d`), with a known action type, a point where the type needs
  one and inside the frame, a direction for Scroll/Swipe, a value where the type needs one;
- value: token F1 of the values (Chinese characters one token each); a swipe's or
  scroll's value is its direction, so a swipe counts when its direction is right;
- point hit: the predicted point (a swipe's start) lies in the target element's box
  (normalised, edges included) when the recorded point lies in it, else within
  TOLERANCE of the recorded point; a grounding answer's point in the target box.

The ground truth is a JSON object (see `ground_truth`): the recorded action's GUI-Libra
type, value, point in the profile's frame and normalised, the frame (coords, size), the
target box, and for a swipe its direction and end point, for a long press its duration.

Entry points: `compute_score(data_source, solution_str, ground_truth, extra_info=None)`
(verl's custom reward function) and `compute_score_easyr1(reward_inputs)` (EasyR1's
reward function: a list of {"response", "response_length", "ground_truth"}, or one).
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections import Counter
from typing import Any

W_FORMAT, W_MATCH = 0.1, 0.9
MIN_VALUE_F1 = 0.5
# Without a box holding the recorded point, a predicted point counts within this
# normalised distance of it (about a button's half-height on a phone).
TOLERANCE = 0.04
GROUND = "ground"  # the action type of a grounding sample (answer: {"point_2d", "bbox_2d"})
DIRECTIONS = ("up", "down", "left", "right")
NO_POINT = [-100, -100]

NAMES = (
    "Click",
    "RightClick",
    "LongPress",
    "Swipe",
    "Scroll",
    "Write",
    "Select",
    "KeyboardPress",
    "OpenAPP",
    "NavigateBack",
    "NavigateHome",
    "Wait",
    "Answer",
    "Terminate",
)
ALIASES = {
    "tap": "Click",
    "secondaryclick": "RightClick",
    "type": "Write",
    "input": "Write",
    "keypress": "KeyboardPress",
    "press": "KeyboardPress",
    "back": "NavigateBack",
    "home": "NavigateHome",
    "complete": "Terminate",
    "finish": "Terminate",
}
POINT_REQUIRED = {"Click", "RightClick", "LongPress", "Select"}
POINT_OPTIONAL = {"Scroll", "Write", "Swipe"}
DIRECTION_VALUE = {"Scroll", "Swipe"}
TEXT_VALUE = {"Write", "Select", "KeyboardPress", "OpenAPP", "Answer"}  # and Terminate (optional)
GRIDS = {"grid1000": (1000, 1000), "grid999": (1000, 999)}  # divisor, largest value


def _key(name: str) -> str:
    return re.sub(r"[\s_\-]", "", name).lower()


FROM_NAME = {**{_key(n): n for n in NAMES}, **ALIASES}


# -- value F1 -------------------------------------------------------------------------
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3000-\u303f\uff00-\uffef]")
_WORD = re.compile(r"\w+", re.UNICODE)


def tokens(text: str) -> list[str]:
    """Lower-cased word tokens; every Chinese character (and CJK punctuation) is one token."""
    out: list[str] = []
    for chunk in _WORD.findall(text.lower()):
        buf = ""  # \w matches CJK characters too: split them off one by one
        for ch in chunk:
            if _CJK.match(ch):
                if buf:
                    out.append(buf)
                    buf = ""
                out.append(ch)
            else:
                buf += ch
        if buf:
            out.append(buf)
    return out


def value_f1(a: str | None, b: str | None) -> float:
    """Token F1 of two values (SQuAD-style multiset overlap); both empty = 1.0, one empty = 0.0."""
    ta, tb = tokens(a or ""), tokens(b or "")
    if not ta and not tb:
        return 1.0
    if not ta or not tb:
        return 0.0
    common = sum((Counter(ta) & Counter(tb)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(ta), common / len(tb)
    return 2 * precision * recall / (precision + recall)


# -- reading an answer ----------------------------------------------------------------
class FormatError(ValueError):
    """The answer text is not a well-formed GUI-Libra answer (the format term is 0)."""


_THINK = re.compile(r"<(think|thinking)>(.*?)</\1>", re.DOTALL)
_ANSWER = re.compile(r"<answer>(.*?)(?:</answer>|$)", re.DOTALL)


def answer_object(text: str) -> dict:
    """The JSON object of the answer (after the reasoning; Python-literal dicts read too)."""
    if not isinstance(text, str):
        raise FormatError(f"expected text, got {type(text).__name__}")
    think = _THINK.search(text)
    rest = text[think.end() :] if think else text
    m = _ANSWER.search(rest)
    body = m.group(1) if m else rest
    start = body.find("{")
    if start < 0:
        raise FormatError("no JSON object in the answer")
    try:
        obj, _ = json.JSONDecoder().raw_decode(body, start)
    except ValueError:
        try:  # single quotes or None: read as a literal, never evaluated
            obj = ast.literal_eval(body[start : body.rfind("}") + 1])
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            raise FormatError(f"not a JSON object: {body[start : start + 80]!r}") from None
    if not isinstance(obj, dict):
        raise FormatError(f"the answer is a {type(obj).__name__}, not an object")
    return obj


def _absent(value: Any) -> bool:
    return value is None or value == "None"


def _number(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise FormatError(f"{v!r} is not a finite number")
    return float(v)


def normalised_point(value: Any, coords: str, size: list[int] | None) -> tuple[float, float] | None:
    """A point_2d in the frame `coords` ("pixels" of `size`, "grid1000", "grid999") as
    [0, 1] x [0, 1]; None when absent ([-100, -100], "None", null, ""). Outside the
    frame is a format error, as schemas.converters.gui_libra reads it."""
    if value is None or (isinstance(value, str) and value.strip() in ("None", "none", "null", "")):
        return None
    if isinstance(value, (list, tuple)) and list(value) == NO_POINT:
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise FormatError(f"{value!r} is not a point [x, y]") from None
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise FormatError(f"{value!r} is not a point [x, y]")
    x, y = _number(value[0]), _number(value[1])
    if coords in GRIDS:
        divisor, top = GRIDS[coords]
        if not (0 <= x <= top and 0 <= y <= top):
            raise FormatError(f"{list(value)} is outside the {coords} range 0..{top}")
        return x / divisor, y / divisor
    if coords == "pixels":
        if not size:
            raise ValueError("pixel coordinates need the ground truth's image size")
        w, h = size
        if not (0 <= x <= w and 0 <= y <= h):
            raise FormatError(f"{list(value)} lies outside the {w}x{h} image")
        return x / w, y / h
    raise ValueError(f"coords {coords!r}: expected pixels, grid1000 or grid999")


def direction(value: Any) -> str:
    """'down', ' Down ', 'scroll down' -> 'down'; anything ambiguous is a format error."""
    words = set(re.findall(r"[a-z]+", value.lower())) & set(DIRECTIONS) if isinstance(value, str) else ()
    if len(words) != 1:
        raise FormatError(f"{value!r} is not one direction of up/down/left/right")
    return next(iter(words))


def action_value(action_type: str, raw: Any) -> str:
    """The value compared by F1: a Scroll/Swipe's direction, a text type's text, else ""."""
    if action_type in DIRECTION_VALUE:
        return direction(raw)
    if action_type in TEXT_VALUE:
        if raw is None:
            raise FormatError(f"{action_type} needs a value")
        if isinstance(raw, bool) or not isinstance(raw, (str, int, float)):
            raise FormatError(f"{raw!r} is not text")
        return str(raw)
    if action_type == "Terminate" and not _absent(raw):
        return str(raw)
    return ""  # a tap's, a wait's, a navigation's value has no part in the match


def parse_action(text: str, coords: str, size: list[int] | None) -> dict:
    """{"action_type", "value", "point"} (point normalised or None) of a GUI-Libra answer."""
    obj = answer_object(text)
    raw_type = obj.get("action_type")
    if not isinstance(raw_type, str) or _key(raw_type) not in FROM_NAME:
        raise FormatError(f"unknown action type {raw_type!r}")
    t = FROM_NAME[_key(raw_type)]
    point = normalised_point(obj.get("point_2d"), coords, size)
    if t in POINT_REQUIRED and point is None:
        raise FormatError(f"{raw_type} needs a point")
    if t not in POINT_REQUIRED | POINT_OPTIONAL:
        point = None
    if t == "Swipe" and point is None:
        point = (0.5, 0.5)  # GUI-Libra's reader starts a pointless swipe at the centre
    return {"action_type": t, "value": action_value(t, obj.get("value")), "point": point}


# -- the ground truth -----------------------------------------------------------------
def ground_truth(
    action_type: str,
    point: list | None,
    value: Any,
    *,
    coords: str,
    size: list[int],
    target_box: list[float] | None = None,
    box: list | None = None,
    action: dict | None = None,
) -> dict:
    """The ground truth of one step: `action_type` the recorded GUI-Libra type (or
    "ground"), `point` in the profile's frame as the answer writes it, `value` the
    answer's value, `target_box` the element's normalised box, `box` a grounding
    sample's box in the frame, `action` the recorded canonical action (normalised
    point, a swipe's end, a long press's duration)."""
    action = action or {}
    point_norm = [action["x"], action["y"]] if action.get("x") is not None else None
    if point_norm is None:
        p = normalised_point(point, coords, size)
        point_norm = None if p is None else list(p)
    gt = {
        "action_type": action_type,
        "point": point,
        "point_norm": point_norm,
        "box": box,
        "box_norm": None if target_box is None else [float(c) for c in target_box],
        "box_1000": None if target_box is None else [round(c * 1000) for c in target_box],
        "value": value,
        "coords": coords,
        "size": list(size),
        "direction": None,
        "end": None,
        "duration_ms": action.get("duration_ms"),
    }
    if action_type == "Swipe":
        gt["direction"] = direction(value)
        if action.get("x2") is not None:
            gt["end"] = [action["x2"], action["y2"]]
    return gt


def _in_box(p: tuple[float, float], box: list[float]) -> bool:
    x0, y0, x1, y1 = box
    return x0 <= p[0] <= x1 and y0 <= p[1] <= y1


def point_hit(pred: tuple[float, float] | None, gt: dict) -> bool:
    """The predicted point hits the target: the element's box when it holds the recorded
    point (a box that misses it would mark the recording wrong), else the circle of
    TOLERANCE around the recorded point. True when the step needs no point."""
    ref = gt.get("point_norm")
    if ref is None:
        return True
    if pred is None:
        return False
    box = gt.get("box_norm")
    if box is not None and _in_box(tuple(ref), box):
        return _in_box(pred, box)
    return math.hypot(pred[0] - ref[0], pred[1] - ref[1]) <= TOLERANCE


def _grounding(text: str, gt: dict) -> float:
    """1.0 when the answer's point_2d lies in the target box (both in the frame), else 0.0."""
    obj = answer_object(text)
    pred = normalised_point(obj.get("point_2d"), gt["coords"], gt.get("size"))
    if pred is None:
        raise FormatError("a grounding answer needs point_2d")
    x0, y0, x1, y1 = gt["box"]
    px, py = obj["point_2d"] if not isinstance(obj["point_2d"], str) else json.loads(obj["point_2d"])
    return float(x0 <= px <= x1 and y0 <= py <= y1)


def score(text: str, gt: dict | str) -> dict:
    """{"score", "format", "accuracy"} of one answer against one ground truth."""
    if isinstance(gt, str):
        gt = json.loads(gt)
    try:
        if gt["action_type"] == GROUND:
            accuracy = _grounding(text, gt)
        else:
            pred = parse_action(text, gt["coords"], gt.get("size"))
            ref_type = FROM_NAME.get(_key(gt["action_type"]), gt["action_type"])
            match = (
                pred["action_type"] == ref_type
                and value_f1(pred["value"], action_value(ref_type, gt.get("value"))) >= MIN_VALUE_F1
                and point_hit(pred["point"], gt)
            )
            accuracy = float(match)
    except FormatError:
        return {"score": 0.0, "format": 0.0, "accuracy": 0.0}
    return {"score": W_FORMAT + W_MATCH * accuracy, "format": 1.0, "accuracy": accuracy}


# -- the trainers' entry points -------------------------------------------------------
def compute_score(
    data_source: str, solution_str: str, ground_truth: str, extra_info: dict | None = None
) -> dict:
    """verl's custom reward function (reward.custom_reward_function.name=compute_score)."""
    return score(solution_str, ground_truth)


def compute_score_easyr1(reward_inputs: list[dict] | dict) -> list[dict] | dict:
    """EasyR1's reward function (worker.reward.reward_function=reward.py:compute_score_easyr1),
    batch (a list of inputs) or sequential (one): {"overall", "format", "accuracy"} each."""
    if isinstance(reward_inputs, dict):
        return compute_score_easyr1([reward_inputs])[0]
    out = []
    for item in reward_inputs:
        s = score(item["response"], item["ground_truth"])
        out.append({"overall": s["score"], "format": s["format"], "accuracy": s["accuracy"]})
    return out
