"""Rewards for RL on GUI trajectories, as plain tested functions.

- `composite_reward`: r = r_task + 0.1*r_format + 0.3*r_reflection - 2.0*r_invalid,
  r_invalid = 1 when the safety guard blocked an action (`invalid_from_steps`).
- `task_reward`: r_task = success * shortest_path_factor (0 on failure).
- `step_reward`: GUI-Libra's step reward
  0.1*format + 0.9*(type match AND value token-F1 >= 0.5 AND point in box).
- `shortest_path_factor(steps_taken, min_steps) = min(1, min_steps / steps_taken)`:
  1 on a shortest path, 1/2 when twice as long; only successful episodes get it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from schemas.actions import Action, ActionType
from schemas.converters import swipe_direction
from schemas.converters.gui_libra import Coords, from_gui_libra
from schemas.errors import SchemaError
from schemas.records import Step
from synthesis.gui_reward import MIN_VALUE_F1, tokens, value_f1  # noqa: F401 (re-exported)
from synthesis.gui_reward import TOLERANCE as POINT_TOLERANCE
from synthesis.gui_reward import W_FORMAT as STEP_W_FORMAT
from synthesis.gui_reward import W_MATCH as STEP_W_MATCH

W_TASK, W_FORMAT, W_REFLECTION, W_INVALID = 1.0, 0.1, 0.3, 2.0


def _unit(name: str, value: float | bool) -> float:
    v = float(value)
    if not 0.0 <= v <= 1.0 or math.isnan(v):
        raise ValueError(f"{name}={value!r} must be a bool or a number in [0, 1]")
    return v


# -- episode rewards ------------------------------------------------------------------
def shortest_path_factor(steps_taken: int, min_steps: int) -> float:
    """min(1, min_steps / steps_taken): the share of the steps that were needed."""
    if steps_taken < 1 or min_steps < 1:
        raise ValueError(f"steps_taken={steps_taken} and min_steps={min_steps} must be >= 1")
    return min(1.0, min_steps / steps_taken)


def task_reward(success: bool, steps_taken: int | None = None, min_steps: int | None = None) -> float:
    """1 for a success (times the shortest-path factor when both counts are given), else 0."""
    if not success:
        return 0.0
    if steps_taken is None or min_steps is None:
        return 1.0
    return shortest_path_factor(steps_taken, min_steps)


def invalid_from_steps(steps: Iterable[Step]) -> int:
    """1 when the safety guard blocked any action of the trajectory (Step.guard set), else 0."""
    return int(any(s.guard for s in steps))


def composite_reward(
    task_success: float | bool,
    format_ok: float | bool,
    reflection_ok: float | bool,
    invalid: float | bool,
    *,
    w_task: float = W_TASK,
    w_format: float = W_FORMAT,
    w_reflection: float = W_REFLECTION,
    w_invalid: float = W_INVALID,
) -> float:
    """r_task + 0.1*r_format + 0.3*r_reflection - 2.0*r_invalid (each term in [0, 1]).

    Pass `task_reward(...)` as task_success to fold in the shortest-path factor.
    """
    return (
        w_task * _unit("task_success", task_success)
        + w_format * _unit("format_ok", format_ok)
        + w_reflection * _unit("reflection_ok", reflection_ok)
        - w_invalid * _unit("invalid", invalid)
    )


# -- the step reward ------------------------------------------------------------------
# The F1 and the weights live in synthesis.gui_reward (the text-level reward the RL
# loops share); step_reward applies them to canonical Actions.
def action_value(action: Action) -> str:
    """The action's GUI-Libra `value`: the text, a scroll/swipe direction, or ""."""
    if action.type == ActionType.SWIPE:
        return swipe_direction(action)
    if action.type == ActionType.SCROLL:
        return action.direction or ""
    if action.type in (ActionType.TAP, ActionType.RIGHT_CLICK, ActionType.DOUBLE_TAP, ActionType.LONG_PRESS):
        return ""  # a tap's text has no GUI-Libra field
    return action.text or ""


def reference_box(sample_json: dict, ref: Action) -> tuple[float, float, float, float] | None:
    """The sample's target_box when it holds the recorded point; None otherwise (then the
    point is tested against the tolerance circle, as synthesis.gui_reward.point_hit does)."""
    box = sample_json.get("target_box")
    if box is None or ref.x is None:
        return None
    x0, y0, x1, y1 = box
    return tuple(box) if x0 <= ref.x <= x1 and y0 <= ref.y <= y1 else None


def point_in_box(
    pred: Action,
    ref: Action,
    ref_box: tuple[float, float, float, float] | None,
    tolerance: float = POINT_TOLERANCE,
) -> bool:
    """True when the reference needs no point, or the predicted point hits the target.

    The target is `ref_box` (normalised x0, y0, x1, y1, edges included) or,
    without one, a circle of `tolerance` around the recorded point.
    """
    if ref.x is None:
        return True
    if pred.x is None:
        return False
    if ref_box is not None:
        x0, y0, x1, y1 = ref_box
        return x0 <= pred.x <= x1 and y0 <= pred.y <= y1
    return math.hypot(pred.x - ref.x, pred.y - ref.y) <= tolerance


def parse_prediction(
    pred: str | Action, width: int | None = None, height: int | None = None, *, coords: Coords = "pixels"
) -> Action | None:
    """The predicted Action, or None when GUI-Libra text does not parse (a format failure)."""
    if isinstance(pred, Action):
        return pred
    if width is None or height is None:
        raise ValueError("a GUI-Libra text prediction needs the screenshot's width and height")
    try:
        return from_gui_libra(pred, width, height, coords=coords)[0]
    except SchemaError:
        return None


def step_reward(
    pred: str | Action,
    ref: Action,
    ref_box: tuple[float, float, float, float] | None = None,
    *,
    width: int | None = None,
    height: int | None = None,
    coords: Coords = "pixels",
    min_f1: float = MIN_VALUE_F1,
    tolerance: float = POINT_TOLERANCE,
    w_format: float = STEP_W_FORMAT,
    w_match: float = STEP_W_MATCH,
) -> float:
    """0.1*format + 0.9*(type match AND value_f1 >= 0.5 AND point in box).

    `pred` is the model's GUI-Libra text (format = it parses with
    schemas.converters.gui_libra.from_gui_libra on a width x height screen) or
    an Action (format = 1). `ref_box` is the target element's normalised box.
    """
    action = parse_prediction(pred, width, height, coords=coords)
    if action is None:
        return 0.0
    match = (
        action.type == ref.type
        and value_f1(action_value(action), action_value(ref)) >= min_f1
        and point_in_box(action, ref, ref_box, tolerance)
    )
    return w_format + w_match * float(match)
