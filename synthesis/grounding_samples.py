"""Grounding samples of one trajectory's screens: targets, dedup, balance, frame, prompts.

A screen (one recorded step with a screenshot) becomes one shard record holding all its
samples, so the image is stored once; a sample is one (target element, expression).

- Targets: synthesis.grounding_targets (measured visible, or a dataset-given box).
- Dedup: the same element (role, name, box to 0.01) on screens of one screen signature
  (schemas.screen_signature of the tree, the curation's key; the URL without a
  tree) is used once, the first time it is met (trajectories in id order).
- Balance: a cap of ROLE_CAP targets per (role, size bucket) per screen, in reading
  order: a screen of forty links gives four small, four medium and four large ones,
  so small targets are kept (and counted) without crowding out the rest.
  `GroundingStats` has the role and size counts before and after the cap.
- Language: the task's (zh expressions on Chinese screens, en on English ones).
- Frame: the model profile's (schemas.model_profiles): the answer's point (the box's
  centre) and box are in pixels of the frame or on its grid; `point_norm`/`box_norm`
  are normalised to the screenshot. Boxes round outwards, so the point stays inside.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable

from schemas.actions import ActionType
from schemas.model_profiles import ModelProfile
from schemas.prompt_data import escape_data
from schemas.records import Element, Step, Trajectory
from schemas.screen_signature import screen_signature

from .grounding_function import TemplateFunction, screen_change
from .grounding_targets import DROP_REASONS, candidates, element_key, size_bucket
from .grounding_text import expressions, function_expression

ROLE_CAP = 4
KEY_SUFFIX = "ground"
_ACTED = frozenset(
    {
        ActionType.TAP,
        ActionType.DOUBLE_TAP,
        ActionType.LONG_PRESS,
        ActionType.RIGHT_CLICK,
        ActionType.SELECT,
        ActionType.TYPE,
    }
)
_GRID = {"grid1000": 1000, "grid999": 999}
_SYSTEM = {
    "en": "You are a GUI grounding model. Given a screenshot and a description of one element "
    "on it, give that element's box and a point inside it as JSON: "
    '{{"bbox_2d": [x0, y0, x1, y1], "point_2d": [x, y]}} ({coords}).',
    "zh": "你是一个图形界面定位模型。根据截图和对其中一个元素的描述，以 JSON 给出该元素的框和框内的一个点："
    '{{"bbox_2d": [x0, y0, x1, y1], "point_2d": [x, y]}}（{coords}）。',
}
_COORDS = {
    ("en", "pixels"): "pixels of the screenshot",
    ("zh", "pixels"): "截图的像素坐标",
    ("en", "grid1000"): "on a 0-1000 grid over the screenshot",
    ("zh", "grid1000"): "截图上 0-1000 网格的坐标",
    ("en", "grid999"): "on a 0-999 grid over the screenshot",
    ("zh", "grid999"): "截图上 0-999 网格的坐标",
}
_ASK = {"en": "Find {expr}.", "zh": "请找到{expr}。"}


def system_prompt(language: str, coords: str) -> str:
    return _SYSTEM[language].format(coords=_COORDS[(language, coords)])


def screen_key(step: Step) -> str:
    """The screen's signature: the curation's (tree), else its URL (imports without a tree)."""
    return "a" + screen_signature(step.a11y_tree) if step.a11y_tree else "u" + step.url


def frame_box(bbox, width: int, height: int, profile: ModelProfile) -> list[int]:
    """The normalised box in the answer's frame, rounded outwards (floor / ceil)."""
    x0, y0, x1, y1 = bbox
    if profile.coords == "pixels":
        fw, fh = profile.frame(width, height)
    else:
        fw = fh = _GRID[profile.coords]
    return [
        max(0, math.floor(x0 * fw)),
        max(0, math.floor(y0 * fh)),
        min(fw, math.ceil(x1 * fw)),
        min(fh, math.ceil(y1 * fh)),
    ]


class GroundingStats:
    """Counts while writing: drops by reason, roles and sizes before/after the cap, dedup."""

    def __init__(self) -> None:
        self.drops: Counter = Counter({r: 0 for r in DROP_REASONS})
        self.candidates = self.deduplicated = self.capped = 0
        self.roles_before: Counter = Counter()
        self.roles_after: Counter = Counter()
        self.sizes_before: Counter = Counter()
        self.sizes_after: Counter = Counter()
        self.samples = 0
        self.kinds: Counter = Counter()
        self.languages: Counter = Counter()
        self.box_sources: Counter = Counter()
        self.function_backends: Counter = Counter()
        self.screens = 0
        self.signatures: set[str] = set()

    def result(self) -> dict:
        unique = len(self.signatures)
        met = self.candidates - sum(self.drops.values())  # visible targets met
        return {
            "samples": self.samples,
            "screens": self.screens,
            "unique_screens": unique,
            "samples_per_unique_screen": self.samples / unique if unique else 0.0,
            "candidates": self.candidates,
            "dropped": dict(self.drops),
            "dropped_share": {
                r: n / self.candidates if self.candidates else 0.0 for r, n in self.drops.items()
            },
            "targets_met": met,
            "deduplicated": self.deduplicated,
            "dedup_rate": self.deduplicated / met if met else 0.0,
            "balance": {
                "method": f"cap of {ROLE_CAP} targets per role and size bucket per screen, reading order",
                "capped": self.capped,
                "roles_before": dict(sorted(self.roles_before.items())),
                "roles_after": dict(sorted(self.roles_after.items())),
                "sizes_before": dict(sorted(self.sizes_before.items())),
                "sizes_after": dict(sorted(self.sizes_after.items())),
            },
            "small_targets": self.sizes_after.get("small", 0),
            "kinds": dict(sorted(self.kinds.items())),
            "languages": dict(sorted(self.languages.items())),
            "language_share": {k: v / self.samples for k, v in sorted(self.languages.items())},
            "box_sources": dict(sorted(self.box_sources.items())),
            "function_backends": dict(sorted(self.function_backends.items())),
        }


def _functions(traj: Trajectory, steps: list[Step], describe) -> dict[int, tuple[str, str]]:
    """{step index: (phrase, backend)} for steps acted on their target, from the next screen."""
    by_index = {s.index: s for s in steps}
    items = []
    for s in steps:
        after = by_index.get(s.index + 1)
        if (
            after is None
            or s.target is None
            or s.target.bbox is None
            or s.error
            or s.guard
            or s.action.type not in _ACTED
            or s.screen_changed is False
        ):
            continue
        items.append((s, after))
    return describe(traj, items) if items else {}


def template_describer(traj: Trajectory, items: list[tuple[Step, Step]]) -> dict:
    t = TemplateFunction()
    out = {}
    for before, after in items:
        phrase = t.describe(before.target, screen_change(before, after), traj.task.language)
        if phrase:
            out[before.index] = (phrase, t.backend)
    return out


def screen_records(
    traj: Trajectory,
    steps: list[Step],
    profile: ModelProfile,
    seen: set,
    stats: GroundingStats,
    describe: Callable | None = None,
) -> list[tuple[Step, str, dict]]:
    """(step, key, record JSON) per screen with at least one sample. `seen` holds the
    element keys used so far (dedup across the whole set); `describe(traj, [(before,
    after)])` -> {index: (phrase, backend)} writes the functional descriptions."""
    from schemas.provenance import provenance
    from trajforge.publish.shards import sample_key

    lang = traj.task.language
    functions = _functions(traj, steps, describe or template_describer)
    made_by = provenance(model_profile=profile.name)
    out = []
    for step in steps:
        if not step.screenshot:
            continue
        try:
            frame = profile.frame(step.width, step.height)
        except ValueError:
            continue
        judged = candidates(traj, step)
        stats.candidates += len(judged)
        for c in judged:
            if c.drop:
                stats.drops[c.drop] += 1
        targets = sorted(
            [c for c in judged if c.drop is None], key=lambda c: (c.element.bbox[1], c.element.bbox[0])
        )
        sig = screen_key(step)
        fresh = []
        for c in targets:
            k = element_key(sig, c.element)
            if k in seen:
                stats.deduplicated += 1
                continue
            seen.add(k)
            fresh.append(c)
        per_role: Counter = Counter()
        kept = []
        for c in fresh:
            bucket = size_bucket(c.element.bbox, frame)
            stats.roles_before[c.element.role] += 1
            stats.sizes_before[bucket] += 1
            if per_role[c.element.role, bucket] >= ROLE_CAP:
                stats.capped += 1
                continue
            per_role[c.element.role, bucket] += 1
            stats.roles_after[c.element.role] += 1
            stats.sizes_after[bucket] += 1
            kept.append((c, bucket))
        everyone = [c.element for c in targets]
        acted = functions.get(step.index)
        samples = []
        key = f"{sample_key(traj.trajectory_id, step.index)}_{KEY_SUFFIX}"
        for c, bucket in kept:
            e = c.element
            exprs = expressions(e, everyone, lang)
            fn = None
            if acted and step.target is not None and _same(step.target, e):
                fn = acted
                exprs["function"] = function_expression(e, acted[0], lang)
            for kind, expr in exprs.items():
                samples.append(
                    _sample(
                        f"{key}_{len(samples):03d}",
                        kind,
                        expr,
                        lang,
                        e,
                        c.box_source,
                        bucket,
                        step,
                        profile,
                        fn,
                    )
                )
                stats.kinds[kind] += 1
                stats.box_sources[c.box_source] += 1
                if fn:
                    stats.function_backends[fn[1]] += kind == "function"
        if not samples:
            continue
        stats.samples += len(samples)
        stats.languages[lang] += len(samples)
        stats.screens += 1
        stats.signatures.add(sig)
        out.append(
            (
                step,
                key,
                {
                    "trajectory_id": traj.trajectory_id,
                    "index": step.index,
                    "language": lang,
                    "app": traj.app,
                    "platform": traj.platform,
                    "source": traj.source,
                    "source_name": traj.source_name,
                    "task_id": traj.task.task_id,
                    "template_id": traj.task.template_id,
                    "instruction": traj.task.instruction,
                    "url": step.url,
                    "screen_signature": sig,
                    "image": {"width": frame[0], "height": frame[1], "format": step.image_format},
                    "screenshot": {"width": step.width, "height": step.height},
                    "model_profile": profile.name,
                    "coords": profile.coords,
                    "provenance": made_by,
                    "samples": samples,
                },
            )
        )
    return out


def _same(a: Element, b: Element) -> bool:
    return (
        a.role == b.role
        and a.name == b.name
        and a.bbox is not None
        and b.bbox is not None
        and all(abs(p - q) <= 1e-6 for p, q in zip(a.bbox, b.bbox))
    )


def _sample(
    sid, kind, expr, lang, e: Element, box_source, bucket, step: Step, profile: ModelProfile, fn
) -> dict:
    cx, cy = e.centre()
    point = profile.to_model(cx, cy, step.width, step.height)
    box = frame_box(e.bbox, step.width, step.height, profile)
    gpt = json.dumps({"bbox_2d": box, "point_2d": point})
    s = {
        "id": sid,
        "kind": kind,
        "language": lang,
        "expression": expr,
        "element": {"role": e.role, "name": e.name},
        "box_source": box_source,
        "size_bucket": bucket,
        "point": point,
        "box": box,
        "point_norm": [cx, cy],
        "box_norm": [float(c) for c in e.bbox],
        "conversations": [
            {"from": "system", "value": system_prompt(lang, profile.coords)},
            {"from": "human", "value": "<image>\n" + _ASK[lang].format(expr=escape_data(expr))},
            {"from": "gpt", "value": gpt},
        ],
    }
    if fn:
        s["function"], s["function_backend"] = fn
    return s


def vlm_describer(backend, blobs) -> Callable:
    """A describer asking `backend` (a trajforge.vlm VLMBackend) with both screenshots
    from `blobs` (a BlobStore); the template answers (labelled) where the VLM gives nothing."""
    from .grounding_function import VLMFunction

    vlm = VLMFunction(backend)

    def describe(traj: Trajectory, items: list[tuple[Step, Step]]) -> dict:
        asks = [
            (
                b.target,
                screen_change(b, a),
                traj.task.language,
                blobs.get(b.screenshot, b.image_format) if b.screenshot else b"",
                blobs.get(a.screenshot, a.image_format) if a.screenshot else b"",
                f"{b.trajectory_id}#{b.index}",
            )
            for b, a in items
        ]
        return {
            b.index: (phrase, label)
            for (b, _), (phrase, label) in zip(items, vlm.describe_many(asks))
            if phrase
        }

    return describe
