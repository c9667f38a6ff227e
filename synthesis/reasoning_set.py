"""The reasoning set: every kept step as two training samples, reason-then-act and direct-act.

For each step of a curated trajectory that has a usable chain of thought
(synthesis.step_cot.StepCoT), two samples come out, 1:1:

- mode "reason": the gpt turn is `<think>thought</think>\\n<answer>\\n{…}\\n</answer>`;
- mode "direct": the same answer without the thought.

The answer is written by schemas.converters.gui_libra.to_gui_libra from the
RECORDED action, in the frame of a named model profile (schemas.model_profiles,
default qwen2.5-vl): the sample's image is the screenshot resized to the frame
that profile's trainer feeds (`image` = its size, `screenshot` = the recorded
size), and point_2d is in pixels of that image, or on the profile's grid
(`coords`). A trainer that reads the sample, resizes the image as it will (a
no-op: the image is already at its smart_resize size) and executes the answer
lands on the recorded target. It parses back with from_gui_libra (width/height
= `image`, coords = `coords`) to the recording; the CoT contributes the thought and the
action description only. The two modes have different system prompts: the
same screen and history map to two different outputs, so the model must be
told which one is wanted.

`spans` are character offsets (Python str indices) into the gpt text: "action"
covers the JSON values of action_type and value (without their quotes),
"coords" each number of point_2d (none when the action has no point). The
free-text description is left out of "action": it is prose like the thought,
and weighting it like the action tokens would reward wording, not acting.

The human turn's "Previous actions" are the trajectory as executed
(synthesis.prompts.executed_history): every executed step before this one, so
sample k lists k actions, whether or not a filter dropped some of them as
targets (DESIGN: a dropped step is not a training target but stays in the
history of the steps after it). A curated trajectory holds its kept steps
only, so the dropped ones come from `recorded` (the steps the curation read);
their text is scrubbed of personal data as the kept steps were (a synthetic
source's values kept, real ones given the same surrogates). A step whose
earlier steps are neither kept nor recorded is skipped as
"history_incomplete", never given a shorter history. A step the guard blocked
was not executed: it has no history line (and ends its episode anyway).

Every step or trajectory left out is listed in `skipped` with its reason.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from filters.pii_sources import is_synthetic
from filters.pii_surrogate import Surrogates
from schemas.actions import Action
from schemas.converters.gui_libra import NO_POINT, from_gui_libra, to_gui_libra
from schemas.errors import SchemaError
from schemas.model_profiles import ModelProfile, model_profile
from schemas.provenance import provenance
from schemas.records import Step, Trajectory
from schemas.set_prompt import MODES, human_prompt, system_prompt  # noqa: F401 (callers read them here)
from synthesis.language import is_chinese
from synthesis.prompts import executed_history
from synthesis.step_cot import StepCoT

MIN_STEPS, MAX_STEPS = 3, 50
_TAGS = ("<think>", "</think>", "<thinking>", "</thinking>", "<answer>", "</answer>")

# The prompt's system and human turns are schemas.set_prompt's: the agent asks a
# trained model in exactly the words of its set.


# -- answers and their spans ------------------------------------------------------


def answer_text(
    action: Action,
    width: int,
    height: int,
    thought: str | None = None,
    profile: ModelProfile | str | None = None,
) -> str:
    """The GUI-Libra answer, with the thought for mode "reason": for a width x height
    screenshot, in the frame of `profile` (schemas.model_profiles); without one, in
    pixels of width x height as given."""
    if profile is None:
        return to_gui_libra(action, width, height, thought=thought, coords="pixels")
    p = model_profile(profile)
    fw, fh = p.frame(width, height)
    return to_gui_libra(action, fw, fh, thought=thought, coords=p.coords, think_tag=p.think_tag)


def answer_spans(text: str) -> dict[str, list[list[int]]]:
    """{"action": [[s, e], ...], "coords": [[s, e], ...]}: offsets into `text`.

    Found by walking the answer's JSON object token by token (raw_decode), so
    a description that itself contains `"value": ` cannot fool it.
    """
    think_end = text.find("</think>")
    start = text.index("<answer>", 0 if think_end < 0 else think_end)
    brace = text.index("{", start)
    fields = _object_fields(text, brace)
    action = []
    for key in ("action_type", "value"):
        s, e, value = fields[key]
        action.append([s + 1, e - 1] if isinstance(value, str) else [s, e])
    coords = []
    s, e, point = fields["point_2d"]
    if point != NO_POINT:
        coords = [[a, b] for a, b, _ in _array_items(text, s)]
    return {"action": action, "coords": coords}


_DECODER = json.JSONDecoder()


def _skip_ws(text: str, i: int) -> int:
    while text[i] in " \t\r\n":
        i += 1
    return i


def _object_fields(text: str, brace: int) -> dict[str, tuple[int, int, Any]]:
    """{key: (start, end, value)} of a flat JSON object starting at `brace`."""
    out, i = {}, _skip_ws(text, brace + 1)
    while text[i] != "}":
        key, i = _DECODER.raw_decode(text, i)
        i = _skip_ws(text, i)
        if text[i] != ":":
            raise SchemaError(f"expected ':' at offset {i}", field="answer")
        start = _skip_ws(text, i + 1)
        value, i = _DECODER.raw_decode(text, start)
        out[key] = (start, i, value)
        i = _skip_ws(text, i)
        if text[i] == ",":
            i = _skip_ws(text, i + 1)
    return out


def _array_items(text: str, bracket: int) -> list[tuple[int, int, Any]]:
    out, i = [], _skip_ws(text, bracket + 1)
    while text[i] != "]":
        start = i
        value, i = _DECODER.raw_decode(text, start)
        out.append((start, i, value))
        i = _skip_ws(text, i)
        if text[i] == ",":
            i = _skip_ws(text, i + 1)
    return out


# -- CoT rows -------------------------------------------------------------------------

_COT_FIELDS = (
    "trajectory_id",
    "index",
    "language",
    "observation",
    "reflection",
    "plan",
    "answer",
    "backend",
    "parsed",
    "raw",
)


def as_step_cot(row: StepCoT | Mapping) -> StepCoT:
    """A StepCoT from itself or from a row of a CoT table (answer as a dict or JSON text)."""
    if isinstance(row, StepCoT):
        return row
    kw = {k: row[k] for k in _COT_FIELDS if k in row}
    if isinstance(kw.get("answer"), str):
        kw["answer"] = json.loads(kw["answer"])
    return StepCoT(**kw)


def alignment_view(result: Any) -> dict:
    """An AlignmentResult (or its dict, or None) as the sample's `alignment` object."""
    if result is None:
        return {"match_rate": None, "box": None, "point_in_box": None, "checked": False}
    get = result.get if isinstance(result, Mapping) else lambda k: getattr(result, k, None)
    box = get("box")
    return {
        "match_rate": get("match_rate"),
        "box": None if box is None else list(box),
        "point_in_box": get("point_in_box"),
        # The template backend is "unchecked": never reported as a pass.
        "checked": get("match_rate") is not None or get("point_in_box") is not None,
    }


def _alignment_keeps(result: Any) -> bool:
    if result is None:
        return True
    keep = result.get("keep", True) if isinstance(result, Mapping) else getattr(result, "keep", True)
    return bool(keep)


# -- samples ----------------------------------------------------------------------------


def sample_jsons(
    traj: Trajectory,
    steps: list[Step],
    cots: Mapping[int, Any],
    *,
    alignment: Mapping[int, Any] | None = None,
    language: str | None = None,
    require_chinese_thought: bool = False,
    min_steps: int = MIN_STEPS,
    max_steps: int = MAX_STEPS,
    skipped: list[dict] | None = None,
    recorded: list[Step] | None = None,
    profile: ModelProfile | str | None = None,
) -> list[tuple[Step, str, dict]]:
    """(step, key, sample JSON) for both modes of every usable step, in key order.

    `steps` are the trajectory's kept steps in index order (gaps allowed);
    `cots` and `alignment` are keyed by step index. `recorded`: the trajectory's
    steps as recorded, dropped ones included (the history; not needed when
    `steps` has no gaps). `profile`: the model profile the set is written for
    (None: schemas.model_profiles.DEFAULT_PROFILE); the image a writer stores for
    a sample is the screenshot resized to `image`'s size. What is left out goes
    to `skipped` as {trajectory_id, index (None for the whole trajectory),
    reason, detail}.
    """
    from trajforge.publish.shards import sample_key

    tid = traj.trajectory_id
    lang = traj.task.language
    prof = model_profile(profile)
    made_by = provenance(model_profile=prof.name)

    def skip(index, reason, detail=""):
        if skipped is not None:
            skipped.append({"trajectory_id": tid, "index": index, "reason": reason, "detail": detail})

    if language is not None and lang != language:
        skip(None, "other_language", f"task language {lang}, set wants {language}")
        return []
    if not min_steps <= traj.num_steps <= max_steps:
        skip(
            None,
            "too_short" if traj.num_steps < min_steps else "too_long",
            f"num_steps={traj.num_steps} not in [{min_steps}, {max_steps}]",
        )
        return []
    out = []
    executed = history_steps(steps, recorded, traj)
    for step in steps:
        why = _unusable(
            traj,
            step,
            cots.get(step.index),
            require_chinese_thought,
            None if alignment is None else alignment.get(step.index),
        )
        if why is None:
            why = _history_gap(executed, step.index)
        if why is None:
            try:
                frame = prof.frame(step.width, step.height)
            except ValueError as err:
                why = "bad_screenshot", f"no {prof.name} frame for it: {err}"
        if why is not None:
            skip(step.index, *why)
            continue
        cot = as_step_cot(cots[step.index])
        action = _with_description(step.action, cot)
        history = executed_history(executed, step.index, lang, prof)
        base = {
            "trajectory_id": tid,
            "index": step.index,
            "language": lang,
            "app": traj.app,
            "platform": traj.platform,
            "source": traj.source,
            "source_name": traj.source_name,
            "verifier": traj.verifier,
            "task_id": traj.task.task_id,
            # The image as stored in the sample: the screenshot at the profile's frame.
            "image": {"width": frame[0], "height": frame[1], "format": step.image_format},
            "screenshot": {"width": step.width, "height": step.height},
            "model_profile": prof.name,
            "coords": prof.coords,
            "provenance": made_by,
            "action": step.action.model_dump(mode="json", exclude_none=True),
            # The target element's normalised box: RL's step reward tests point-in-box on it.
            "target_box": _target_box(step),
            "thought_backend": cot.backend,
            "alignment": alignment_view(None if alignment is None else alignment.get(step.index)),
        }
        human = human_prompt(traj.task.instruction, history, frame[0], frame[1], lang)
        for mode in MODES:
            text = answer_text(
                action,
                step.width,
                step.height,
                thought=cot.thought if mode == "reason" else None,
                profile=prof,
            )
            _, _, brace = text.partition("<answer>")
            answer = json.loads(brace[brace.index("{") : brace.rindex("}") + 1])
            out.append(
                (
                    step,
                    f"{sample_key(tid, step.index)}_{mode}",
                    {
                        **base,
                        "mode": mode,
                        "conversations": [
                            {"from": "system", "value": system_prompt(mode, lang, prof.coords)},
                            {"from": "human", "value": human},
                            {"from": "gpt", "value": text},
                        ],
                        "answer": answer,
                        "spans": answer_spans(text),
                    },
                )
            )
    return out


def history_steps(
    kept: list[Step], recorded: list[Step] | None, traj: Trajectory | None = None
) -> list[Step]:
    """The trajectory's steps for its histories, in index order: the kept (curated,
    scrubbed) ones as they are, the recorded ones that were dropped with their
    action text and target name scrubbed as curation scrubs: a synthetic source's
    values kept (filters.pii_sources, the default registry), real ones replaced by the
    surrogates curation gave them (filters.pii_surrogate: seeded by the trajectory id
    and the value, so the same)."""
    keep = traj is not None and is_synthetic(traj)
    by_index = {s.index: s for s in kept}
    surrogates: dict[str, Surrogates] = {}
    for s in recorded or ():
        if s.index not in by_index:
            by_index[s.index] = (
                s
                if keep
                else _scrubbed(s, surrogates.setdefault(s.trajectory_id, Surrogates(s.trajectory_id)))
            )
    return [by_index[i] for i in sorted(by_index)]


def _scrubbed(step: Step, surrogates: Surrogates) -> Step:
    update = {}
    if step.action.text:
        update["action"] = step.action.model_copy(update={"text": surrogates.scrub(step.action.text)[0]})
    if step.target is not None and step.target.name:
        update["target"] = step.target.model_copy(update={"name": surrogates.scrub(step.target.name)[0]})
    return step.model_copy(update=update) if update else step


def _history_gap(executed: list[Step], index: int) -> tuple[str, str] | None:
    have = sum(1 for s in executed if s.index < index)
    if have == index:
        return None
    missing = sorted(set(range(index)) - {s.index for s in executed})
    return "history_incomplete", (
        f"steps {missing[:8]} before it are neither kept nor recorded: "
        "its history would not be the actions taken"
    )


def _target_box(step: Step) -> list[float] | None:
    """[x0, y0, x1, y1] of the step's target element (normalised), or None without one."""
    if step.target is None or step.target.bbox is None:
        return None
    return [float(c) for c in step.target.bbox]


def _unusable(
    traj: Trajectory, step: Step, row: Any, require_chinese_thought: bool, aligned: Any
) -> tuple[str, str] | None:
    """(reason, detail) when the step cannot become samples; None when it can."""
    if not step.screenshot:
        return "no_screenshot", "step has no screenshot"
    if row is None:
        return "missing_cot", "no CoT row for this step"
    try:
        cot = as_step_cot(row)
    except (TypeError, ValueError) as err:
        return "bad_cot", str(err)
    if not cot.parsed:
        return "cot_unparsed", f"backend {cot.backend}: the thought did not parse"
    if not any(part.strip() for part in (cot.observation, cot.reflection, cot.plan)):
        return "empty_thought", "observation, reflection and plan are all empty"
    thought = cot.thought
    if any(tag in thought for tag in _TAGS):
        return "thought_has_tags", "the thought holds a <think>/<answer> tag"
    if cot.language != traj.task.language:
        return "cot_language_mismatch", f"CoT in {cot.language}, task in {traj.task.language}"
    if require_chinese_thought and not is_chinese(thought):
        return "thought_not_chinese", thought[:80]
    if not _alignment_keeps(aligned):
        return "misaligned", str(
            getattr(aligned, "reason", None)
            or (aligned.get("reason") if isinstance(aligned, Mapping) else "")
        )
    try:
        text = answer_text(step.action, step.width, step.height)
    except SchemaError as err:
        return "unsupported_action", str(err)
    mismatch = _cot_answer_mismatch(cot.answer, text, step)
    if mismatch:
        return "cot_answer_mismatch", mismatch
    return None


def _cot_answer_mismatch(answer: Any, recorded_text: str, step: Step) -> str | None:
    """Why the CoT's answer disagrees with the recording (type or point), or None."""
    if not isinstance(answer, Mapping):
        return f"answer is a {type(answer).__name__}, not an object"
    try:
        theirs, _ = from_gui_libra(json.dumps(dict(answer), ensure_ascii=False), step.width, step.height)
    except SchemaError as err:
        return f"answer does not parse: {err}"
    ours, _ = from_gui_libra(recorded_text, step.width, step.height)
    if theirs.type != ours.type:
        return f"type {theirs.type.value} != recorded {ours.type.value}"
    a, b = theirs.point_px(step.width, step.height), ours.point_px(step.width, step.height)
    if (a is None) != (b is None) or (a and max(abs(a[0] - b[0]), abs(a[1] - b[1])) > 1):
        return f"point {a} != recorded {b}"
    return None


def _with_description(action: Action, cot: StepCoT) -> Action:
    desc = cot.answer.get("action_description") if isinstance(cot.answer, Mapping) else None
    if isinstance(desc, str) and desc.strip() and desc != "None":
        return action.model_copy(update={"description": desc})
    return action


def build_samples(
    traj: Trajectory,
    steps: list[Step],
    cots: Mapping[int, Any],
    images: Mapping[int, bytes] | Callable[[Step], bytes],
    **options,
) -> list[dict]:
    """WebDataset samples ({"__key__", "png"|"jpg"|"webp": bytes, "json": dict}) of one
    trajectory; `images` gives each step's encoded screenshot as stored (by index, or a
    function of the step), and each sample holds it resized to the profile's frame
    (frame_image). `options` are those of `sample_jsons`."""
    from trajforge.publish.shards import IMAGE_EXT

    get = images if callable(images) else (lambda s: images[s.index])
    out, framed = [], {}
    for step, key, obj in sample_jsons(traj, steps, cots, **options):
        if step.index not in framed:  # both modes share the step's image
            framed[step.index] = frame_image(get(step), step, obj)
        out.append({"__key__": key, IMAGE_EXT[step.image_format]: framed[step.index], "json": obj})
    return out


def frame_image(data: bytes, step: Step, sample: dict) -> bytes:
    """The step's encoded screenshot at the sample's `image` size (its profile's frame),
    resized with schemas.resolution.resize_image (LANCZOS, same format); the bytes as
    they are when the sizes agree. The agent resizes what it sees the same way."""
    from schemas.resolution import resize_image

    size = (sample["image"]["width"], sample["image"]["height"])
    if size == (step.width, step.height):
        return data
    return resize_image(data, step.image_format, size, source=f"{step.trajectory_id}#{step.index}")
