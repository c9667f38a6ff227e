"""Action-alignment checks (GUI-Libra) for steps that get a chain of thought.

1. Re-prediction: the model chooses the step's action N times (default 10) at
   temperature ~1 WITHOUT the recorded action as a hint. A sample matches when
   it has the recorded type and: for tap / double_tap / long_press / select,
   its point lies in the target element's box (or within `point_tolerance` of
   the recorded point when there is no box; likewise for a type action when both
   give a point); for swipe / scroll, the same direction; for text actions
   (type, select, key, open_app, answer), value token-F1 >= `min_value_f1`.
   The step is kept when match_rate >= min_match (default 0.3).
2. Box check: the model gives the pixel box of the described target; the step
   is kept only if the recorded point lies inside it. The box is stored
   normalised. Actions without a point, and scrolls (whose point is anywhere),
   skip this check (None fields).

The template backend cannot check anything: its results say match_rate=None,
keep=True, reason="unchecked", never a fake pass.
"""

from __future__ import annotations

import logging
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from schemas.actions import Action, ActionType
from schemas.converters import swipe_direction
from schemas.converters.gui_libra import from_gui_libra
from schemas.errors import SchemaError
from schemas.records import Step
from trajforge.vlm.answers import json_objects
from trajforge.vlm.backends import VLMBackend

from . import prompts
from .cot import StepItem, supported
from .step_cot import TEMPLATE, StepCoT

log = logging.getLogger(__name__)

POINT_CHECKED = {
    ActionType.TAP,
    ActionType.RIGHT_CLICK,
    ActionType.DOUBLE_TAP,
    ActionType.LONG_PRESS,
    ActionType.SELECT,
}
VALUE_CHECKED = {ActionType.TYPE, ActionType.SELECT, ActionType.KEY, ActionType.OPEN_APP, ActionType.ANSWER}
DIRECTION_CHECKED = {ActionType.SWIPE, ActionType.SCROLL}
# Actions whose point is on the element they act on (a scroll's point is anywhere).
BOX_CHECKED = POINT_CHECKED | {ActionType.TYPE, ActionType.SWIPE}


@dataclass
class AlignmentResult:
    match_rate: float | None
    n: int  # samples drawn (0 when unchecked)
    box: tuple[float, float, float, float] | None  # normalised x0, y0, x1, y1
    point_in_box: bool | None
    keep: bool
    reason: str | None  # None when kept after checking; else why (or "unchecked")
    unparsed: int = 0  # samples that were not a readable action (count as no match)

    def to_row(self) -> dict:
        row = asdict(self)
        row["box"] = list(self.box) if self.box is not None else None
        return row


def unchecked(reason: str = "unchecked") -> AlignmentResult:
    return AlignmentResult(None, 0, None, None, True, reason)


# ---------------------------------------------------------------- matching
_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_TOKEN = re.compile(rf"[{_CJK}]|[^\W_]+")
_SPLIT_CJK = re.compile(rf"[{_CJK}]|[^{_CJK}]+")


def tokens(text: str) -> list[str]:
    """Lower-case words; each CJK character is a token (Chinese has no spaces)."""
    out = []
    for m in _TOKEN.finditer(text.lower()):
        tok = m.group(0)
        # A run that mixes Latin and CJK (\w matches both): split the CJK out.
        out += _SPLIT_CJK.findall(tok)
    return out


def token_f1(pred: str, ref: str) -> float:
    p, r = Counter(tokens(pred)), Counter(tokens(ref))
    if not p and not r:
        return 1.0
    common = sum((p & r).values())
    if not common:
        return 0.0
    precision, recall = common / sum(p.values()), common / sum(r.values())
    return 2 * precision * recall / (precision + recall)


def _direction(action: Action) -> str | None:
    if action.type == ActionType.SWIPE:
        try:
            return swipe_direction(action)
        except SchemaError:
            return None
    return action.direction


def point_matches(pred: Action, step: Step, tolerance: float) -> bool:
    """pred's point in the target's box when the recorded point is in it, else near it."""
    ref = step.action
    if pred.x is None or ref.x is None:
        return False
    target = step.target
    if target is not None and target.bbox is not None and target.contains(ref.x, ref.y):
        return target.contains(pred.x, pred.y)
    return math.hypot(pred.x - ref.x, pred.y - ref.y) <= tolerance


def actions_match(pred: Action, step: Step, point_tolerance: float = 0.04, min_value_f1: float = 0.5) -> bool:
    ref = step.action
    if pred.type != ref.type:
        return False
    t = ref.type
    if t in POINT_CHECKED and not point_matches(pred, step, point_tolerance):
        return False
    if (
        t == ActionType.TYPE
        and pred.x is not None
        and ref.x is not None
        and not point_matches(pred, step, point_tolerance)
    ):
        return False
    if t in DIRECTION_CHECKED and _direction(pred) != _direction(ref):
        return False
    if t in VALUE_CHECKED and token_f1(pred.text or "", ref.text or "") < min_value_f1:
        return False
    return True


# ---------------------------------------------------------------- the box answer
_NUM = r"-?\d+(?:\.\d+)?"
_LIST4 = re.compile(rf"\[\s*({_NUM})\s*,\s*({_NUM})\s*,\s*({_NUM})\s*,\s*({_NUM})\s*\]")
_PAIRS = re.compile(rf"\(\s*({_NUM})\s*,\s*({_NUM})\s*\)\s*,?\s*\(\s*({_NUM})\s*,\s*({_NUM})\s*\)")
_BOX_KEYS = ("box", "bbox", "bbox_2d", "box_2d")


def parse_box(raw: str, width: int, height: int) -> tuple[float, float, float, float] | None:
    """A pixel box from the answer ({"box": [...]}, a bare [x0,y0,x1,y1] or Qwen's
    (x0,y0),(x1,y1)), normalised to the screen, corners ordered and clamped; None
    when there is none."""
    values = None
    for obj in json_objects(raw):
        box = next((obj[k] for k in _BOX_KEYS if isinstance(obj, dict) and k in obj), None)
        if (
            isinstance(box, list)
            and len(box) == 4
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in box)
        ):
            values = [float(v) for v in box]
            break
    if values is None:
        m = _LIST4.search(raw) or _PAIRS.search(raw)
        if m is None:
            return None
        values = [float(g) for g in m.groups()]
    if not all(math.isfinite(v) for v in values):
        return None
    x0, x1 = sorted((values[0] / width, values[2] / width))
    y0, y1 = sorted((values[1] / height, values[3] / height))
    clamp = lambda v: min(max(v, 0.0), 1.0)  # noqa: E731
    return clamp(x0), clamp(y0), clamp(x1), clamp(y1)


def _in_box(box: tuple[float, float, float, float], x: float, y: float) -> bool:
    return box[0] <= x <= box[2] and box[1] <= y <= box[3]


# ---------------------------------------------------------------- the check
def _is_template(backend) -> bool:
    return backend is None or getattr(backend, "model_id", None) == TEMPLATE


@dataclass(frozen=True)
class AlignmentSettings:
    """How the check samples and decides: `n` re-predictions at `temperature` (seeded by
    `seed`, plus each batch's offset), kept at match_rate >= `min_match`; the box check
    (`check_box`) answers greedily in at most `box_max_new_tokens`; `batch_size` items
    go to the backend at once; `point_tolerance` and `min_value_f1` are the match rules
    (module docstring); `max_page_chars` bounds the page text in the prompt."""

    n: int = 10
    min_match: float = 0.3
    check_box: bool = True
    temperature: float = 1.0
    seed: int = 0
    max_new_tokens: int = 256
    box_max_new_tokens: int = 48
    batch_size: int = 16
    point_tolerance: float = 0.04
    min_value_f1: float = 0.5
    max_page_chars: int = prompts.MAX_PAGE_CHARS

    def __post_init__(self):
        if self.n < 1 or not 0.0 <= self.min_match <= 1.0 or self.batch_size < 1:
            raise ValueError(
                f"need n >= 1, 0 <= min_match <= 1, batch_size >= 1 "
                f"(got n={self.n}, min_match={self.min_match}, batch_size={self.batch_size})"
            )


def check_alignment(
    backend: VLMBackend | None,
    items: Sequence[StepItem],
    settings: AlignmentSettings = AlignmentSettings(),
    *,
    cots: Sequence[StepCoT] | None = None,
) -> list[AlignmentResult]:
    """One AlignmentResult per item, in order.

    cots[i] (optional): item i's CoT; its answer's action_description is the target
    described in the box question (else the recorded action in words).
    """
    if cots is not None and len(cots) != len(items):
        raise ValueError(f"{len(cots)} cots for {len(items)} items")
    if _is_template(backend):
        return [unchecked() for _ in items]
    results: list[AlignmentResult] = []
    size = settings.batch_size
    for start in range(0, len(items), size):
        chunk = list(items[start : start + size])
        chunk_cots = list(cots[start : start + size]) if cots is not None else [None] * len(chunk)
        results += _check_chunk(backend, chunk, chunk_cots, settings, settings.seed + start)
    kept = sum(r.keep for r in results)
    log.info("%s: alignment kept %d of %d steps", backend.model_id, kept, len(results))
    return results


def _check_chunk(backend, items, cots, settings: AlignmentSettings, seed: int) -> list[AlignmentResult]:
    checkable = [i for i, it in enumerate(items) if supported(it.step)]
    samples = _predictions(backend, items, checkable, settings, seed)
    boxed = [
        i
        for i in checkable
        if settings.check_box
        and items[i].step.action.x is not None
        and items[i].step.action.type in BOX_CHECKED
    ]
    boxes = _boxes(backend, items, cots, boxed, settings)
    return [
        _decide(item.step, samples[i], boxes.get(i), settings)
        if i in samples
        else unchecked("unsupported_action")
        for i, item in enumerate(items)
    ]


def _predictions(backend, items, checkable, settings: AlignmentSettings, seed: int) -> dict[int, list[str]]:
    """The n re-predicted answers of each checkable item, by position."""
    if not checkable:
        return {}
    n = settings.n
    reqs = [_request("predict", items[i], None, settings.max_page_chars) for i in checkable]
    out = backend.generate(reqs, settings.max_new_tokens, temperature=settings.temperature, n=n, seed=seed)
    if n == 1:
        out = [[s] if isinstance(s, str) else s for s in out]
    if len(out) != len(reqs) or any(len(s) != n for s in out):
        raise RuntimeError(f"{backend.model_id}: expected {n} samples for each of {len(reqs)} requests")
    return dict(zip(checkable, out))


def _boxes(backend, items, cots, boxed, settings: AlignmentSettings) -> dict[int, str]:
    """The box answer of each item asked for one, by position."""
    if not boxed:
        return {}
    answers = backend.generate(
        [_request("box", items[i], cots[i], settings.max_page_chars) for i in boxed],
        settings.box_max_new_tokens,
    )
    if len(answers) != len(boxed):
        raise RuntimeError(f"{backend.model_id}: {len(answers)} box answers for {len(boxed)} requests")
    return dict(zip(boxed, answers))


def _decide(
    step: Step, samples: list[str], box_text: str | None, settings: AlignmentSettings
) -> AlignmentResult:
    matches = unparsed = 0
    for text in samples:
        try:
            pred, _ = from_gui_libra(text, step.width, step.height)
        except SchemaError:
            unparsed += 1
            continue
        matches += actions_match(pred, step, settings.point_tolerance, settings.min_value_f1)
    n = settings.n
    rate = matches / n
    box = in_box = None
    if box_text is not None:
        box = parse_box(box_text, step.width, step.height)
        in_box = box is not None and _in_box(box, step.action.x, step.action.y)
    reason = None
    if rate < settings.min_match:
        reason = "low_match"
    elif in_box is False:
        reason = "box_unparsed" if box is None else "point_outside_box"
    return AlignmentResult(rate, n, box, in_box, reason is None, reason, unparsed)


def _request(kind: str, item: StepItem, cot: StepCoT | None, max_page_chars: int = prompts.MAX_PAGE_CHARS):
    step, lang = item.step, item.language
    data = prompts.step_data(item.trajectory, item.steps, item.position, lang, max_page_chars)
    if kind == "box":
        target = cot.answer.get("action_description") if cot is not None else None
        if not target and step.target is not None and step.target.name:
            target = prompts.element_words(step.target, lang)
        data = {
            "task": data["task"],
            "target": target or prompts.step_phrase(step, lang),
            "url": data["url"],
            "page_text": data["page_text"],
            "screen": data["screen"],
        }
    return prompts.build_request(
        kind, data, item.image, lang, step.width, step.height, key=f"{step.trajectory_id}#{step.index}"
    )
