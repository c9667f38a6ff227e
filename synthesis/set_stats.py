"""Figures and checks over reasoning-set samples (their JSON), streamed.

`SetStats` takes sample JSONs one at a time (from the writer as it writes,
or from the shards: `reasoning_set_stats`) and gives: the mode mix, languages,
the action-type histogram (per step, canonical names), thought lengths,
whether every answer parses back to the recorded action, whether every span
slices what it claims, and the alignment figures. `set_checks` turns them into
pass/fail with a reason, for asset checks.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from schemas.actions import Action, ActionType
from schemas.converters import swipe_direction
from schemas.converters.gui_libra import from_gui_libra
from schemas.errors import SchemaError
from synthesis.language import is_chinese

_EXAMPLES = 5  # failures kept by key, to look at


def gpt_text(sample: dict) -> str:
    return next(t["value"] for t in sample["conversations"] if t["from"] == "gpt")


def same_action(parsed: Action, recorded: Action, width: int, height: int) -> bool:
    """Does a parsed GUI-Libra answer say what was recorded? Points within 1 px; what the
    format cannot carry (a swipe's length, durations of presses) is not compared."""
    if parsed.type != recorded.type:
        return False
    a, b = parsed.point_px(width, height), recorded.point_px(width, height)
    if (a is None) != (b is None) or (a and max(abs(a[0] - b[0]), abs(a[1] - b[1])) > 1):
        return False
    t = recorded.type
    if t == ActionType.SWIPE:
        return parsed.direction == swipe_direction(recorded)
    if t == ActionType.SCROLL:
        return parsed.direction == recorded.direction
    if t == ActionType.WAIT:
        return parsed.duration_ms == recorded.duration_ms
    if t in (ActionType.LONG_PRESS, ActionType.TAP, ActionType.RIGHT_CLICK, ActionType.BACK, ActionType.HOME):
        return True
    return parsed.text == recorded.text


def _span_problem(text: str, sample: dict) -> str | None:
    answer, spans = sample["answer"], sample["spans"]
    want_action = [answer["action_type"], answer["value"]]
    got_action = []
    for s, e in spans["action"]:
        piece = text[s:e]
        # A string value's span is its JSON text without the quotes (escapes kept).
        got_action.append(
            json.loads(f'"{piece}"') if isinstance(want_action[len(got_action)], str) else json.loads(piece)
        )
    if got_action != want_action:
        return f"action spans give {got_action}, the answer says {want_action}"
    point = answer["point_2d"]
    want_coords = [] if point == [-100, -100] else point
    got_coords = [json.loads(text[s:e]) for s, e in spans["coords"]]
    if got_coords != want_coords:
        return f"coord spans give {got_coords}, the answer says {want_coords}"
    return None


class SetStats:
    """Accumulates figures over sample JSONs; `result()` is a plain JSON-able dict."""

    def __init__(self) -> None:
        self.samples = 0
        self.modes: Counter = Counter()
        self.languages: Counter = Counter()
        self.platforms: Counter = Counter()
        self.apps: Counter = Counter()
        self.action_types: Counter = Counter()
        self.backends: Counter = Counter()
        self.profiles: Counter = Counter()
        self.max_image_pixels = 0
        self.thought_chars: list[int] = []
        self.thought_chinese = 0
        self.parsed = self.matches = self.spans_ok = 0
        self.failures: list[dict] = []
        self._steps: set[tuple[str, int]] = set()
        self._trajectories: set[str] = set()
        self.align_checked = self.align_in_box = 0
        self._match_rates: list[float] = []

    def add(self, key: str, sample: dict) -> None:
        try:
            self._add(key, sample)
        except (KeyError, TypeError, StopIteration, ValidationError) as exc:
            raise SchemaError(f"sample lacks {exc!r}", record=key, field="json") from None

    def _add(self, key: str, sample: dict) -> None:
        self.samples += 1
        mode = sample["mode"]
        self.modes[mode] += 1
        self.languages[sample["language"]] += 1
        self.backends[sample["thought_backend"]] += 1
        text = gpt_text(sample)
        width, height = sample["image"]["width"], sample["image"]["height"]
        # The answer's frame: pixels of the sample's image, or the model profile's grid.
        coords = sample.get("coords", "pixels")
        cmp_size = (width, height) if coords == "pixels" else (1000, 1000)
        self.profiles[sample.get("model_profile") or "none"] += 1
        self.max_image_pixels = max(self.max_image_pixels, int(width) * int(height))
        recorded = Action.model_validate(sample["action"])
        try:
            parsed, thought = from_gui_libra(text, width, height, coords=coords)
        except SchemaError as err:
            self._fail(key, "unparsed", str(err))
            parsed, thought = None, None
        if parsed is not None:
            self.parsed += 1
            if same_action(parsed, recorded, *cmp_size):
                self.matches += 1
            else:
                self._fail(key, "answer_differs", f"{parsed.brief()} != recorded {recorded.brief()}")
            if (mode == "reason") != (thought is not None):
                self._fail(key, "mode_mismatch", f"mode {mode}, thought {'present' if thought else 'absent'}")
        problem = _span_problem(text, sample)
        if problem is None:
            self.spans_ok += 1
        else:
            self._fail(key, "bad_spans", problem)
        if mode == "reason" and thought is not None:
            self.thought_chars.append(len(thought))
            self.thought_chinese += is_chinese(thought)
        step = (sample["trajectory_id"], sample["index"])
        if step not in self._steps:  # per step, not per sample: the mix doubles samples
            self._steps.add(step)
            self.action_types[recorded.type.value] += 1
            align = sample["alignment"]
            if align["checked"]:
                self.align_checked += 1
                self.align_in_box += bool(align["point_in_box"])
                if align["match_rate"] is not None:
                    self._match_rates.append(align["match_rate"])
        if sample["trajectory_id"] not in self._trajectories:
            self._trajectories.add(sample["trajectory_id"])
            self.platforms[sample["platform"]] += 1
            self.apps[sample["app"]] += 1

    def _fail(self, key: str, kind: str, detail: str) -> None:
        if len(self.failures) < _EXAMPLES:
            self.failures.append({"key": key, "kind": kind, "detail": detail})

    def result(self) -> dict[str, Any]:
        n = self.samples
        rates = self._match_rates
        return {
            "samples": n,
            "steps": len(self._steps),
            "trajectories": len(self._trajectories),
            "modes": dict(sorted(self.modes.items())),
            "languages": dict(sorted(self.languages.items())),
            "language_share": {k: v / n for k, v in sorted(self.languages.items())},
            "platforms": dict(sorted(self.platforms.items())),
            "apps": dict(sorted(self.apps.items())),
            "action_types": dict(sorted(self.action_types.items())),
            "thought_backends": dict(sorted(self.backends.items())),
            "model_profiles": dict(sorted(self.profiles.items())),
            "max_image_pixels": self.max_image_pixels,  # the largest image (frame) in the set
            # share of the samples whose thought each backend wrote ("template", a VLM's id)
            "thought_backend_share": {k: v / n for k, v in sorted(self.backends.items())},
            "thought_chars": length_stats(self.thought_chars),
            "thought_chinese": self.thought_chinese,
            "answers": {
                "total": n,
                "parsed": self.parsed,
                "match_recording": self.matches,
                "spans_ok": self.spans_ok,
                "failures": self.failures,
            },
            "alignment": {
                "checked_steps": self.align_checked,
                "point_in_box": self.align_in_box,
                "mean_match_rate": sum(rates) / len(rates) if rates else None,
            },
        }


def length_stats(lengths: list[int]) -> dict[str, Any]:
    """n, min, mean, p50, p90, max (None when empty)."""
    if not lengths:
        return {"n": 0, "min": None, "mean": None, "p50": None, "p90": None, "max": None}
    xs = sorted(lengths)

    def pct(p: float) -> int:  # nearest rank
        return xs[min(len(xs) - 1, max(0, -(-len(xs) * p // 100) - 1))]

    return {
        "n": len(xs),
        "min": xs[0],
        "mean": round(sum(xs) / len(xs), 1),
        "p50": pct(50),
        "p90": pct(90),
        "max": xs[-1],
    }


def summarise(samples: Iterable[dict]) -> dict[str, Any]:
    """SetStats over sample JSONs, or over samples as build_samples gives them."""
    stats = SetStats()
    for i, sample in enumerate(samples):
        if "__key__" in sample:
            stats.add(sample["__key__"], sample["json"])
        else:
            stats.add(str(i), sample)
    return stats.result()


# The helpers the asset checks name, each over sample JSONs.
def answers_parse(samples: Iterable[dict]) -> dict[str, Any]:
    return summarise(samples)["answers"]


def mix_ratio(samples: Iterable[dict]) -> dict[str, Any]:
    modes = summarise(samples)["modes"]
    direct = modes.get("direct", 0)
    return {**modes, "ratio": modes.get("reason", 0) / direct if direct else None}


def language_share(samples: Iterable[dict]) -> dict[str, float]:
    return summarise(samples)["language_share"]


def action_type_histogram(samples: Iterable[dict]) -> dict[str, int]:
    return summarise(samples)["action_types"]


def thought_length_stats(samples: Iterable[dict]) -> dict[str, Any]:
    return summarise(samples)["thought_chars"]


def set_checks(
    stats: dict[str, Any],
    *,
    language: str | None = None,
    require_chinese_thought: bool = False,
    skipped_steps: dict[str, int] | None = None,
    min_alignment_pass: float = 0.5,
) -> dict[str, dict[str, Any]]:
    """{check: {"passed": bool, "detail": str}}: answers parse, 1:1 mix, language, alignment.

    Alignment pass rate = kept checked steps / (those + steps dropped as
    misaligned). With no checked step (template backend) the check did not run: it is
    reported as not passed, with "severity": "warn" and "not_run": True (a warning, not
    a pass, and nothing to block on). Other checks carry no severity: an error.
    """
    ans = stats["answers"]
    n = stats["samples"]
    checks = {}
    ok = n > 0 and ans["parsed"] == n and ans["match_recording"] == n and ans["spans_ok"] == n
    checks["answers_parse"] = {
        "passed": ok,
        "detail": (
            f"{ans['parsed']}/{n} parse, {ans['match_recording']} match the recording, "
            f"{ans['spans_ok']} spans exact; failures: {ans['failures']}"
        ),
    }
    modes = stats["modes"]
    checks["mix_1_to_1"] = {
        "passed": modes.get("reason", 0) == modes.get("direct", 0) > 0 and set(modes) == {"reason", "direct"},
        "detail": f"modes {modes}",
    }
    lang_ok = language is None or set(stats["languages"]) <= {language}
    detail = f"languages {stats['languages']}"
    if require_chinese_thought:
        lang_ok = lang_ok and stats["thought_chinese"] == stats["thought_chars"]["n"]
        detail += f"; {stats['thought_chinese']}/{stats['thought_chars']['n']} thoughts Chinese"
    checks["language"] = {"passed": lang_ok and n > 0, "detail": detail}
    checked = stats["alignment"]["checked_steps"]
    dropped = (skipped_steps or {}).get("misaligned", 0)
    if checked + dropped == 0:
        backends = ", ".join(f"{k} {v:.0%}" for k, v in stats.get("thought_backend_share", {}).items())
        checks["alignment_rate"] = {
            "passed": False,
            "severity": "warn",
            "not_run": True,
            "detail": (
                f"not run: no step's alignment was checked (thoughts by {backends or 'nobody'}; "
                "the checks need a VLM)"
            ),
        }
    else:
        rate = checked / (checked + dropped)
        checks["alignment_rate"] = {
            "passed": rate >= min_alignment_pass,
            "detail": (
                f"{checked} kept, {dropped} dropped as misaligned: pass rate {rate:.3f} "
                f"(min {min_alignment_pass})"
            ),
        }
    return checks


# -- over a written set -------------------------------------------------------------


def reasoning_set_stats(shard_dir: Path | str) -> dict[str, Any]:
    """The figures of a written reasoning set, read from its shards (images skipped)."""
    from trajforge.publish.shards import iter_tar_samples, read_manifest

    shard_dir = Path(shard_dir)
    manifest = read_manifest(shard_dir)
    stats = SetStats()
    splits: dict[str, dict[str, int]] = {}
    for shard in manifest["shards"]:
        split = splits.setdefault(shard["split"], {"samples": 0, "shards": 0})
        split["shards"] += 1
        path = shard_dir / shard["name"]
        for key, sample in iter_tar_samples(path, images=False):
            if "json" not in sample:
                raise SchemaError("sample has no json member", source=str(path), record=key)
            try:
                stats.add(key, sample["json"])
            except SchemaError as err:
                raise err.located(source=str(path), record=key) from None
            split["samples"] += 1
    totals = manifest.get("totals", {})
    return {
        "dataset": manifest["dataset"],
        "version": manifest["version"],
        "kind": manifest.get("kind"),
        **stats.result(),
        "shards": len(manifest["shards"]),
        "bytes": sum(s["bytes"] for s in manifest["shards"]),
        "splits": splits,
        "skipped_trajectories": totals.get("skipped_trajectories", {}),
        "skipped_steps": totals.get("skipped_steps", {}),
    }


def format_reasoning_table(stats: dict[str, Any]) -> str:
    """A plain-text rendering for people (`trajforge stats` without --json)."""
    t = stats["thought_chars"]
    ans = stats["answers"]
    lines = [
        f"dataset {stats['dataset']}  version {stats['version']}  (reasoning set)",
        f"  samples           {stats['samples']}  ({stats['steps']} steps, "
        f"{stats['trajectories']} trajectories)",
        "  modes             " + ", ".join(f"{k} {v}" for k, v in stats["modes"].items()),
        "  languages         " + ", ".join(f"{k} {v}" for k, v in stats["languages"].items()),
        f"  thought chars     n {t['n']}, mean {t['mean']}, p50 {t['p50']}, p90 {t['p90']}, max {t['max']}",
        f"  answers           {ans['parsed']}/{ans['total']} parse, "
        f"{ans['match_recording']} match the recording",
        f"  shards            {stats['shards']}  ({stats['bytes'] / 1e6:.1f} MB)",
    ]
    for name, s in stats["splits"].items():
        lines.append(f"    {name:<16}{s['samples']:>8} samples {s['shards']:>5} shards")
    lines.append("  action_types (steps)")
    for k, v in sorted(stats["action_types"].items(), key=lambda kv: (-kv[1], kv[0])):
        lines.append(f"    {k:<16}{v:>8}")
    for name in ("skipped_trajectories", "skipped_steps"):
        if stats.get(name):
            lines.append(f"  {name}: " + ", ".join(f"{k} {v}" for k, v in stats[name].items()))
    return "\n".join(lines)
