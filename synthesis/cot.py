"""Chain-of-thought for recorded steps: observation / reflection / plan + the action.

Two backends write the text:
- `TemplateCoT` (synthesis/template_cot.py): deterministic, grounded in the
  step's accessibility tree, labelled backend="template". The demo's default.
- `VLMCoT`: a VLMBackend (transformers, batched; or an OpenAI-compatible
  endpoint) prompted with the task, the history, the screenshot and the
  recorded action as a hint (prompts.py). Its output is parsed leniently; an
  unparseable answer gives parsed=False with the raw text kept, never a guess.

Either way the answer's action type, value and point come from the recording
(to_gui_libra pixels of the screenshot): the model only writes text.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from schemas.converters.gui_libra import TO_NAME
from schemas.records import Step, Trajectory
from trajforge.vlm.answers import json_objects
from trajforge.vlm.backends import VLMBackend

from . import prompts
from .step_cot import StepCoT, gui_libra_answer
from .template_cot import TemplateCoT

__all__ = ["StepItem", "VLMCoT", "blob_loader", "generate_cot", "parse_cot", "supported"]
log = logging.getLogger(__name__)


@dataclass
class StepItem:
    """steps[position] of a trajectory and its encoded screenshot (b"" when none)."""

    trajectory: Trajectory
    steps: list[Step]
    position: int
    image: bytes = b""

    @property
    def step(self) -> Step:
        return self.steps[self.position]

    @property
    def language(self) -> str:
        return self.trajectory.task.language


# ---------------------------------------------------------------- parsing model output
_KEYS = {
    "observation": ("observation", "观察"),
    "reflection": ("reflection", "反思"),
    "plan": ("plan", "计划"),
}
_SECTION = re.compile(
    r"(?:^|\n)\s*(?:[#*]+\s*)?(observation|reflection|plan|观察|反思|计划)\s*(?:\*\*)?\s*[:：]\s*(?:\*\*)?",
    re.IGNORECASE,
)
_TAG = re.compile(r"<(observation|reflection|plan)>(.*?)</\1>", re.DOTALL | re.IGNORECASE)
_CANON = {"观察": "observation", "反思": "reflection", "计划": "plan"}


@dataclass(frozen=True)
class ParsedCoT:
    observation: str = ""
    reflection: str = ""
    plan: str = ""
    description: str = ""

    @property
    def parsed(self) -> bool:
        return bool(self.observation and self.reflection and self.plan)


def _text(value) -> str:
    return value.strip() if isinstance(value, str) else ""


def _from_json(raw: str) -> ParsedCoT | None:
    for obj in json_objects(raw):
        if not isinstance(obj, dict):
            continue
        fields = {
            name: next((_text(obj.get(k)) for k in keys if _text(obj.get(k))), "")
            for name, keys in _KEYS.items()
        }
        if any(fields.values()):
            action = obj.get("action")
            desc = _text(action.get("description")) if isinstance(action, dict) else ""
            return ParsedCoT(**fields, description=desc or _text(obj.get("action_description")))
    return None


def _from_sections(raw: str) -> ParsedCoT:
    found = {m.group(1).lower(): m.group(2).strip() for m in _TAG.finditer(raw)}
    if not found:
        marks = list(_SECTION.finditer(raw))
        for m, nxt in zip(marks, marks[1:] + [None]):
            name = _CANON.get(m.group(1), m.group(1).lower())
            body = raw[m.end() : nxt.start() if nxt else len(raw)]
            body = re.split(r"\n\s*(?:action|answer|操作)\s*[:：]|<answer>", body, flags=re.IGNORECASE)[0]
            found.setdefault(name, body.strip())
    return ParsedCoT(found.get("observation", ""), found.get("reflection", ""), found.get("plan", ""))


def parse_cot(raw: str) -> ParsedCoT:
    """Observation / reflection / plan from a JSON object (keys in EN or ZH), else from
    labelled sections ("Observation: ...", "观察：...", <plan>...</plan>). Missing parts
    are ""; `parsed` is True only when all three are there."""
    from_json = _from_json(raw)
    if from_json is not None and from_json.parsed:
        return from_json
    sections = _from_sections(raw)
    if sections.parsed or from_json is None:
        return sections
    return from_json


# ---------------------------------------------------------------- the VLM backend
class VLMCoT:
    def __init__(
        self,
        backend: VLMBackend,
        batch_size: int = 16,
        max_new_tokens: int = 384,
        max_page_chars: int = prompts.MAX_PAGE_CHARS,
    ):
        """batch_size: requests handed to backend.generate at once (it sorts them by
        length and batches on the GPU); bounds the decoded images held."""
        if batch_size < 1:
            raise ValueError(f"batch_size={batch_size} must be >= 1")
        self.backend = backend
        self.batch_size = batch_size
        self.max_new_tokens = max_new_tokens
        self.max_page_chars = max_page_chars

    @property
    def model_id(self) -> str:
        return self.backend.model_id

    def build_request(self, item: StepItem, answer: dict):
        step, lang = item.step, item.language
        data = prompts.step_data(item.trajectory, item.steps, item.position, lang, self.max_page_chars)
        data["action_taken"] = prompts.hint_data(step, answer, lang)
        return prompts.build_request(
            "cot", data, item.image, lang, step.width, step.height, key=f"{step.trajectory_id}#{step.index}"
        )

    def generate_many(self, items: list[StepItem]) -> list[StepCoT]:
        """One StepCoT per item, in order. Raises SchemaError for an action that
        GUI-Libra cannot express (filter those out first: generate_cot does)."""
        out: list[StepCoT] = []
        model_id = self.backend.model_id
        for start in range(0, len(items), self.batch_size):
            chunk = items[start : start + self.batch_size]
            answers = [
                gui_libra_answer(it.step, prompts.action_description(it.step, it.language)) for it in chunk
            ]
            texts = self.backend.generate(
                [self.build_request(it, a) for it, a in zip(chunk, answers)], self.max_new_tokens
            )
            if len(texts) != len(chunk):
                raise RuntimeError(f"{model_id}: {len(texts)} answers for {len(chunk)} requests")
            for item, answer, raw in zip(chunk, answers, texts):
                p = parse_cot(raw)
                if p.parsed and p.description:
                    answer = {**answer, "action_description": p.description}
                out.append(
                    StepCoT(
                        item.step.trajectory_id,
                        item.step.index,
                        item.language,
                        p.observation if p.parsed else "",
                        p.reflection if p.parsed else "",
                        p.plan if p.parsed else "",
                        answer,
                        model_id,
                        p.parsed,
                        raw,
                    )
                )
        unparsed = sum(not c.parsed for c in out)
        if unparsed:
            log.info("%s: %d of %d CoT answers unparseable (parsed=False)", model_id, unparsed, len(out))
        return out


# ---------------------------------------------------------------- the driver
def supported(step: Step) -> bool:
    """Whether the step's action has a GUI-Libra form (double_tap, take_over do not)."""
    return step.action.type in TO_NAME


def generate_cot(
    trajectories_with_steps: Iterable[tuple[Trajectory, list[Step]]],
    backend: VLMBackend | None = None,
    *,
    load_image: Callable[[Step], bytes] | None = None,
    batch_size: int = 16,
    max_new_tokens: int = 384,
    skipped: Counter | None = None,
) -> Iterator[StepCoT]:
    """A StepCoT for every step, streamed a batch at a time.

    backend None: the template backend. With a VLM, `load_image(step)` gives the
    step's encoded screenshot (b"" when it has none; e.g. `blob_loader(store.blobs)`).
    Steps whose action GUI-Libra cannot express are skipped and counted in
    `skipped["unsupported_action"]` when a Counter is passed.
    """
    skipped = skipped if skipped is not None else Counter()
    if backend is None:
        template = TemplateCoT()
        for traj, steps in trajectories_with_steps:
            for pos, step in enumerate(steps):
                if supported(step):
                    yield template.generate(traj, steps, pos)
                else:
                    skipped["unsupported_action"] += 1
        return
    if load_image is None:
        raise ValueError("generate_cot with a VLM backend needs load_image (step -> screenshot bytes)")
    vlm = VLMCoT(backend, batch_size=batch_size, max_new_tokens=max_new_tokens)
    pending: list[StepItem] = []
    for traj, steps in trajectories_with_steps:
        for pos, step in enumerate(steps):
            if not supported(step):
                skipped["unsupported_action"] += 1
                continue
            pending.append(StepItem(traj, steps, pos, load_image(step) if step.screenshot else b""))
            if len(pending) >= batch_size:
                yield from vlm.generate_many(pending)
                pending = []
    if pending:
        yield from vlm.generate_many(pending)


def blob_loader(blobs) -> Callable[[Step], bytes]:
    """load_image for a trajforge.store.raw.BlobStore (the curated store's screenshots)."""
    return lambda step: blobs.get(step.screenshot, step.image_format)
