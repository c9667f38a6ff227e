"""The step and trajectory filters, in their fixed order (see `default_filters`).

Each filter scores every step of a trajectory (`score`) and decides from the
stored scores only (`keep`), so its threshold can move without recomputing.
Scores are null where they do not apply (no next step, no elements, an
invalid row); a null score keeps the step.

Duplicate search (exact and near) compares a step only with earlier steps of
*reference* trajectories: those that pass the trajectory-level filters. A
failed random walk through the home screen must not make the successful run
that comes later (in id order) lose its home-screen step as a "duplicate" of
a step that is itself dropped.
"""

from __future__ import annotations

import hashlib
import io
import math
from collections import Counter
from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa
from PIL import Image

from schemas.actions import SCREEN_CHANGING, ActionType
from schemas.records import Step
from schemas.screen_signature import screen_signature

from .base import Filter, ScreenInfo, TrajectoryContext
from .neardup import DEFAULT_MAX_DISTANCE, distance_histogram, nearest_earlier
from .phash import decode_grey, hamming, phash_bytes, phash_grey, to_signed

TAP_LIKE = {
    ActionType.TAP.value,
    ActionType.RIGHT_CLICK.value,
    ActionType.DOUBLE_TAP.value,
    ActionType.LONG_PRESS.value,
    ActionType.SELECT.value,
}
_SCREEN_CHANGING = {t.value for t in SCREEN_CHANGING}
FAILED_OUTCOMES = ("failure", "error")
# Blank detection looks at the greyscale image reduced to at most this many
# pixels on its long side: enough for a line of text to lift the std.
BLANK_SIDE = 320
BLANK_MIN_STD = 1.0


# -- reading screenshots ----------------------------------------------------------


def read_screen(blobs, sha: str, fmt: str) -> ScreenInfo:
    """Decode one screenshot: its pHash and greyscale std, or why there is none."""
    if not sha:
        return ScreenInfo(status="empty", error="step has no screenshot")
    path = blobs.path(sha, fmt)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return ScreenInfo(status="missing", error=f"blob {path} is missing")
    try:
        with Image.open(io.BytesIO(data)) as img:
            if img.format == "JPEG":
                # libjpeg scales down while decoding; pHash drafts smaller still.
                img.draft("L", (BLANK_SIDE, BLANK_SIDE))
                grey = img.convert("L")
                phash = phash_bytes(data)
            else:
                # libspng for PNG (2x Pillow's decode, filters/phash.py); raises on a
                # truncated or corrupt file like Pillow does.
                grey = Image.fromarray(decode_grey(data))
                phash = phash_grey(np.asarray(grey))
        factor = max(1, max(grey.size) // BLANK_SIDE)
        small = grey.reduce(factor) if factor > 1 else grey
        std = float(np.asarray(small, dtype=np.float32).std())
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
        return ScreenInfo(status="broken", error=f"{type(exc).__name__}: {exc}")
    return ScreenInfo(status="ok", phash=phash, gray_std=std)


# -- helpers ----------------------------------------------------------------------


def action_signature(step: Step) -> str:
    """What makes two samples on one screen the same training sample: the action
    type, its points on a 0.01 grid, its text and direction."""
    a = step.action

    def pt(x, y):
        return "" if x is None else f"{x:.2f},{y:.2f}"

    return "\x1f".join([a.type.value, pt(a.x, a.y), pt(a.x2, a.y2), a.direction or "", a.text or ""])


def _is_reference(ctx: TrajectoryContext) -> bool:
    return bool(ctx.extra.get("reference", True))


def _rows(ctx: TrajectoryContext, **same) -> list[dict[str, Any]]:
    return [dict(same) for _ in ctx.steps]


# -- trajectory-level ---------------------------------------------------------------


class TrajectoryLength(Filter):
    name, level = "trajectory_length", "trajectory"
    columns = {"traj_steps": pa.int32()}

    def __init__(self, min_steps: int = 3, max_steps: int = 50):
        self.min_steps, self.max_steps = min_steps, max_steps

    def score(self, ctx):
        return _rows(ctx, traj_steps=len(ctx.steps))

    def keep(self, s):
        return s["traj_steps"] is None or self.min_steps <= s["traj_steps"] <= self.max_steps


class TaskFailed(Filter):
    """Outcome failure or error (by whoever verified it); unknown is kept."""

    name, level = "task_failed", "trajectory"
    columns = {"outcome": pa.string(), "verified_by": pa.string()}

    def __init__(self, drop_failed: bool = True):
        self.drop_failed = drop_failed

    def score(self, ctx):
        t = ctx.trajectory
        return _rows(ctx, outcome=t.outcome if t else None, verified_by=t.verified_by if t else None)

    def keep(self, s):
        return not (self.drop_failed and s["outcome"] in FAILED_OUTCOMES)


class JudgeFailure(Filter):
    """The VLM judge says the task failed. A trajectory verified by a trusted
    verifier (the sandbox's state check) keeps that verdict: the judge's is only
    compared with it (agreement)."""

    name, level = "judge_failure", "trajectory"
    columns = {"judge_success": pa.bool_(), "judge_parsed": pa.bool_(), "judge_model": pa.string()}

    def __init__(self, trusted: tuple[str, ...] = ("state",)):
        self.trusted = tuple(trusted)

    def score(self, ctx):
        v = ctx.judge
        if v is None:
            return _rows(ctx, judge_success=None, judge_parsed=None, judge_model=None)
        return _rows(ctx, judge_success=v.success, judge_parsed=v.parsed, judge_model=v.model_id)

    def keep(self, s):
        if s.get("verified_by") in self.trusted:
            return True
        return s["judge_success"] is not False


# -- step-level: the record and its screenshot -----------------------------------------


class OutOfBounds(Filter):
    """A coordinate of the raw row outside [0, 1] (read before validation, which
    would refuse the row): score = how far the farthest one lies outside."""

    name = "out_of_bounds"
    columns = {"oob_excess": pa.float64()}

    def __init__(self, tolerance: float = 0.0):
        self.tolerance = tolerance

    def score(self, ctx):
        out = []
        for v in ctx.steps:
            action = v.raw.get("action") or {}
            coords = [action.get(k) for k in ("x", "y", "x2", "y2") if action.get(k) is not None]
            if not coords:
                out.append({"oob_excess": None})
                continue
            excess = max(math.inf if not math.isfinite(c) else max(-c, c - 1.0, 0.0) for c in coords)
            out.append({"oob_excess": excess})
        return out

    def keep(self, s):
        return s["oob_excess"] is None or s["oob_excess"] <= self.tolerance


class InvalidStep(Filter):
    """The row does not validate as a Step (the message names file, record, field)."""

    name = "invalid_step"
    columns = {"step_error": pa.string()}

    def score(self, ctx):
        return [{"step_error": v.error} for v in ctx.steps]

    def keep(self, s):
        return s["step_error"] is None


class MissingScreenshot(Filter):
    """No image: an import without one (screenshot "") or a blob not in the store."""

    name = "missing_screenshot"
    columns = {"screenshot_status": pa.string()}

    def score(self, ctx):
        return [{"screenshot_status": v.screen.status} for v in ctx.steps]

    def keep(self, s):
        return s["screenshot_status"] not in ("empty", "missing")


class BrokenScreenshot(Filter):
    name = "broken_screenshot"
    columns = {"decode_error": pa.string()}

    def score(self, ctx):
        return [{"decode_error": v.screen.error if v.screen.status == "broken" else None} for v in ctx.steps]

    def keep(self, s):
        return s["decode_error"] is None


class BlankScreenshot(Filter):
    """Greyscale standard deviation below min_std: a white or loading screen."""

    name = "blank_screenshot"
    columns = {"gray_std": pa.float32()}

    def __init__(self, min_std: float = BLANK_MIN_STD):
        self.min_std = min_std

    def score(self, ctx):
        return [{"gray_std": v.screen.gray_std} for v in ctx.steps]

    def keep(self, s):
        return s["gray_std"] is None or s["gray_std"] >= self.min_std


# -- step-level: the action ----------------------------------------------------------------


class NoElement(Filter):
    """A tap-like point inside no element box (only when the step has boxed
    elements): score = distance from the point to the nearest box (0 inside)."""

    name = "no_element"
    columns = {"element_distance": pa.float32()}

    def __init__(self, max_distance: float = 0.0):
        self.max_distance = max_distance

    def score(self, ctx):
        out = []
        for v in ctx.steps:
            d = None
            st = v.step
            if st is not None and st.action.type.value in TAP_LIKE:
                boxes = [e.bbox for e in st.elements if e.bbox is not None]
                if boxes:
                    x, y = st.action.x, st.action.y
                    d = min(
                        math.hypot(max(x0 - x, 0.0, x - x1), max(y0 - y, 0.0, y - y1))
                        for x0, y0, x1, y1 in boxes
                    )
            out.append({"element_distance": d})
        return out

    def keep(self, s):
        return s["element_distance"] is None or s["element_distance"] <= self.max_distance


class ExactDuplicate(Filter):
    """Same screenshot bytes AND same action as an earlier step: the same training
    sample twice. The same screen with another action (the home screen of every
    task) is a different sample: what to do there is what the model learns, so
    it is not a duplicate. `dup_screen_count` is the screen-level figure (earlier
    steps with this screenshot, whatever their action)."""

    name = "exact_duplicate"
    columns = {"dup_screen_count": pa.int32(), "dup_of": pa.int64()}

    def __init__(self):
        self._screens: Counter[str] = Counter()
        self._first: dict[tuple[str, str], int] = {}

    def score(self, ctx):
        out = []
        ref = _is_reference(ctx)
        for v in ctx.steps:
            if v.step is None or v.screen.status != "ok":
                out.append({"dup_screen_count": None, "dup_of": None})
                continue
            sha = v.step.screenshot
            key = (sha, action_signature(v.step))
            out.append({"dup_screen_count": self._screens[sha], "dup_of": self._first.get(key)})
            self._screens[sha] += 1
            if ref:
                self._first.setdefault(key, v.row)
        return out

    def keep(self, s):
        return s["dup_of"] is None


class NearDuplicate(Filter):
    """pHash within max_distance of an earlier step showing the same screen and taking
    the same action. pHash alone is noise on near-blank screens and confuses pages of
    one template, hence the key: the screen signature of the accessibility tree
    (schemas.screen_signature: boxes, live regions and digits ignored), which
    the calibration on the sandbox's labelled pairs chose over the URL (same-URL hard
    negatives), or the URL/activity where a step has no tree (imports).

    `score` records the hash and key of each step; the search runs once over
    the whole dataset (`resolve`), since "earlier" spans all trajectories.
    """

    name = "near_duplicate"
    columns = {"phash": pa.int64(), "neardup_of": pa.int64(), "neardup_distance": pa.int16()}

    def __init__(self, max_distance: int | None = None):
        if max_distance is None:
            max_distance = DEFAULT_MAX_DISTANCE
        self.max_distance = max_distance
        self.hashes: list[int] = []
        self.keys: list[str] = []

    def score(self, ctx):
        out = []
        ref = _is_reference(ctx)
        for v in ctx.steps:
            h = v.screen.phash
            if h is None or v.step is None:
                # A unique key matches nothing: no search, and never a reference.
                self.hashes.append(0)
                self.keys.append(f"\x00row{v.row}")
                out.append({"phash": None, "neardup_of": None, "neardup_distance": None})
                continue
            self.hashes.append(h)
            screen = "a" + screen_signature(v.step.a11y_tree) if v.step.a11y_tree else "u" + v.step.url
            key = screen + "\x1e" + action_signature(v.step)
            # A step of a non-reference trajectory is neither searched nor found.
            self.keys.append(key if ref else f"\x00row{v.row}")
            out.append({"phash": to_signed(h), "neardup_of": None, "neardup_distance": None})
        return out

    def settle(self):
        """Each row's nearest earlier match, searched once over every scored step."""
        dup_of, distance = self.resolve()

        def fill(row: dict) -> None:
            i = row["row"]
            if dup_of[i] >= 0:
                row["neardup_of"] = int(dup_of[i])
                row["neardup_distance"] = int(distance[i])

        return fill

    def resolve(self) -> tuple[np.ndarray, np.ndarray]:
        """(dup_of, distance) per scored step, in scoring order (-1: none)."""
        hashes = np.asarray(self.hashes, dtype=np.uint64)
        return nearest_earlier(hashes, self.keys, self.max_distance)

    def histogram(self, max_distance: int = 16) -> dict[int, int]:
        return distance_histogram(
            np.asarray(self.hashes, dtype=np.uint64), self.keys, max_distance=max_distance
        )

    def keep(self, s):
        # The stored match is the closest within the radius searched: a lower
        # threshold re-decides from it; a higher one needs the search run again.
        return s["neardup_of"] is None or s["neardup_distance"] > self.max_distance


class NoOp(Filter):
    """A screen-changing action after which screen and tree stayed the same.

    The crawler's own `screen_changed` wins when recorded; else the next step's
    observation decides (pHash distance <= max_distance and the same a11y text).
    The last step has no next observation: null scores, kept.
    """

    name = "no_op"
    columns = {
        "next_phash_distance": pa.int16(),
        "next_tree_same": pa.bool_(),
        "screen_changed_recorded": pa.bool_(),
    }

    def __init__(self, max_distance: int = 1):
        self.max_distance = max_distance

    def score(self, ctx):
        out = []
        for i, v in enumerate(ctx.steps):
            nxt = ctx.steps[i + 1] if i + 1 < len(ctx.steps) else None
            row = {
                "next_phash_distance": None,
                "next_tree_same": None,
                "screen_changed_recorded": v.step.screen_changed if v.step else None,
            }
            if nxt is not None and v.step is not None and nxt.step is not None:
                if v.screen.phash is not None and nxt.screen.phash is not None:
                    row["next_phash_distance"] = hamming(v.screen.phash, nxt.screen.phash)
                row["next_tree_same"] = v.step.a11y_tree == nxt.step.a11y_tree
            out.append(row)
        return out

    def keep(self, s):
        if s.get("action_type") not in _SCREEN_CHANGING:
            return True
        if s["screen_changed_recorded"] is not None:
            return s["screen_changed_recorded"]
        if s["next_phash_distance"] is None or s["next_tree_same"] is None:
            return True
        return not (s["next_phash_distance"] <= self.max_distance and s["next_tree_same"])


class Loop(Filter):
    """A state (URL + a11y-tree hash; URL + pHash without a tree) visited k or
    more times in one trajectory: the k-th and later visits are dropped."""

    name = "loop"
    columns = {"loop_visits": pa.int32()}

    def __init__(self, k: int = 3):
        self.k = k

    def score(self, ctx):
        seen: Counter[str] = Counter()
        out = []
        for v in ctx.steps:
            st = v.step
            if st is None:
                out.append({"loop_visits": None})
                continue
            if st.a11y_tree:
                state = "t" + hashlib.sha256(st.a11y_tree.encode()).hexdigest()
            elif v.screen.phash is not None:
                state = f"p{v.screen.phash}"
            else:
                state = "s" + st.screenshot
            seen[st.url + "\x1e" + state] += 1
            out.append({"loop_visits": seen[st.url + "\x1e" + state]})
        return out

    def keep(self, s):
        return s["loop_visits"] is None or s["loop_visits"] < self.k


class JudgeIrrelevant(Filter):
    """A step the judge called irrelevant to the task (not for trusted trajectories:
    the judge only advises there)."""

    name = "judge_irrelevant"
    columns = {"judge_irrelevant": pa.bool_()}

    def __init__(self, trusted: tuple[str, ...] = ("state",)):
        self.trusted = tuple(trusted)

    def score(self, ctx):
        v = ctx.judge
        if v is None:
            return _rows(ctx, judge_irrelevant=None)
        bad = set(v.irrelevant_steps)
        return [{"judge_irrelevant": sv.raw.get("index") in bad} for sv in ctx.steps]

    def keep(self, s: Mapping[str, Any]):
        if s.get("verified_by") in self.trusted:
            return True
        return not s["judge_irrelevant"]


FILTER_ORDER = [
    "trajectory_length",
    "task_failed",
    "judge_failure",
    "out_of_bounds",
    "invalid_step",
    "missing_screenshot",
    "broken_screenshot",
    "blank_screenshot",
    "no_element",
    "exact_duplicate",
    "near_duplicate",
    "no_op",
    "loop",
    "judge_irrelevant",
]


def default_filters(config) -> list[Filter]:
    """The filters in their fixed order (FILTER_ORDER): trajectory-level first,
    then the record, the screenshot, the action, duplicates, behaviour, the judge."""
    trusted = tuple(config.trusted_verifiers)
    filters = [
        TrajectoryLength(config.min_steps, config.max_steps),
        TaskFailed(config.drop_failed),
        JudgeFailure(trusted),
        OutOfBounds(config.oob_tolerance),
        InvalidStep(),
        MissingScreenshot(),
        BrokenScreenshot(),
        BlankScreenshot(config.blank_min_std),
        NoElement(config.element_max_distance),
        ExactDuplicate(),
        NearDuplicate(config.near_duplicate_max_distance),
        NoOp(config.noop_max_distance),
        Loop(config.loop_k),
        JudgeIrrelevant(trusted),
    ]
    assert [f.name for f in filters] == FILTER_ORDER
    return filters
