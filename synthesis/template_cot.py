"""The template CoT backend: deterministic text grounded in the step's own data.

No model, no randomness. The observation names the page (URL path and first
visible heading), up to three salient elements of the step's accessibility
tree (named, visible, interactive; nearest the action point) and the target
element; the reflection says what the previous action did (first step,
failed, screen unchanged, screen changed); the plan states the next move toward
the task and the action in words. EN and ZH are written separately, not
translated word by word. Every record says backend="template".
"""

from __future__ import annotations

import re
from collections.abc import Callable

from schemas.a11y import parse_snapshot
from schemas.records import Element, Step, Trajectory

from .prompts import action_description, element_words, page_path, step_phrase
from .step_cot import TEMPLATE, StepCoT, gui_libra_answer

SALIENT_ROLES = {
    "button",
    "link",
    "textbox",
    "searchbox",
    "combobox",
    "checkbox",
    "radio",
    "tab",
    "menuitem",
    "switch",
    "option",
    "slider",
    "spinbutton",
    "listbox",
}
MAX_SALIENT = 3
MAX_NAME_WIDTH = 60  # longer names (whole product cards) make poor landmarks; CJK counts 2
MAX_ERROR_CHARS = 100


def _short(name: str) -> bool:
    return sum(2 if ord(c) > 0x2E7F else 1 for c in name) <= MAX_NAME_WIDTH


def _visible(e: Element) -> bool:
    if e.bbox is None:
        return True  # no geometry recorded: cannot tell, keep it
    x0, y0, x1, y1 = e.bbox
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    return 0.0 <= cx <= 1.0 and 0.0 <= cy <= 1.0


def screen_elements(step: Step) -> list[Element]:
    """The step's elements; parsed from its tree (no boxes) when none were stored."""
    if step.elements:
        return list(step.elements)
    return [Element(role=n.role, name=n.name) for n in parse_snapshot(step.a11y_tree)]


def first_heading(elements: list[Element]) -> str | None:
    return next(
        (e.name for e in elements if e.role == "heading" and e.name and _visible(e) and _short(e.name)), None
    )


def salient_elements(step: Step, elements: list[Element], exclude: set[str]) -> list[Element]:
    """Up to MAX_SALIENT named, visible, interactive elements (not the target), the
    ones nearest the action point first; returned in document order."""
    seen: set[tuple[str, str]] = set()
    candidates: list[tuple[int, Element]] = []
    for pos, e in enumerate(elements):
        key = (e.role, e.name)
        if (
            e.role not in SALIENT_ROLES
            or not e.name.strip()
            or not _short(e.name)
            or e.name in exclude
            or key in seen
            or not _visible(e)
        ):
            continue
        seen.add(key)
        candidates.append((pos, e))
    a = step.action
    if a.x is not None:

        def distance(item):
            pos, e = item
            if e.bbox is None:
                return (1.0, pos)
            cx, cy = e.centre()
            return ((cx - a.x) ** 2 + (cy - a.y) ** 2, pos)

        candidates.sort(key=distance)
    chosen = sorted(candidates[:MAX_SALIENT], key=lambda item: item[0])
    return [e for _, e in chosen]


def _join(words: list[str], language: str) -> str:
    if language == "zh":
        return "、".join(words[:-1]) + "和" + words[-1] if len(words) > 1 else words[0]
    return ", ".join(words[:-1]) + " and " + words[-1] if len(words) > 1 else words[0]


class TemplateCoT:
    model_id = TEMPLATE

    def __init__(self, language_of: Callable[[Trajectory], str] | None = None):
        """language_of(traj) -> "en" | "zh"; default the task's language."""
        self.language_of = language_of or (lambda traj: traj.task.language)

    def observation(self, step: Step, language: str) -> str:
        elements = screen_elements(step)
        path, heading = page_path(step.url), first_heading(elements)
        target = step.target if step.target is not None and step.target.name else None
        exclude = {heading or ""} | ({target.name} if target else set())
        salient = salient_elements(step, elements, exclude)
        zh = language == "zh"
        if zh:
            page = f"当前页面是 {path}" if path else "当前是这个界面"
            page += f"，标题为“{heading}”。" if heading else "。"
        else:
            page = f"The screen shows {path}" if path else "The screen shows the current view"
            page += f', headed "{heading}".' if heading else "."
        parts = [page]
        if salient:
            words = _join([element_words(e, language) for e in salient], language)
            parts.append(f"页面上可以看到{words}。" if zh else f"Visible elements include {words}.")
        if target is not None:
            words = element_words(target, language)
            parts.append(
                f"与这一步相关的是{words}。" if zh else f"The element that matters for this step is {words}."
            )
        return "".join(parts) if zh else " ".join(parts)

    def reflection(self, steps: list[Step], upto: int, language: str) -> str:
        zh = language == "zh"
        recorded = recorded_reflection(steps[upto])
        if recorded:  # written from the live screen after a real wrong step: keep it
            return recorded
        if upto == 0:
            return (
                "这是第一步，此前还没有任何操作。"
                if zh
                else "This is the first step; nothing has been done yet."
            )
        prev = steps[upto - 1]
        did = step_phrase(prev, language)
        if prev.error:
            err = prev.error if len(prev.error) <= MAX_ERROR_CHARS else prev.error[:MAX_ERROR_CHARS] + "…"
            return (
                f"上一步（{did}）没有成功：{err}。需要重试或换一种做法。"
                if zh
                else f"The previous action ({did}) failed: {err}. I need to retry it or try another way."
            )
        if prev.screen_changed is False:
            return (
                f"上一步（{did}）之后屏幕没有变化。"
                if zh
                else f"The previous action ({did}) did not change the screen."
            )
        if prev.screen_changed:
            return (
                f"上一步（{did}）之后页面已经更新，操作生效了。"
                if zh
                else f"The previous action ({did}) worked: the screen has changed."
            )
        return f"上一步的操作是{did}。" if zh else f"The previous action was to {did}."

    def plan(self, traj: Trajectory, step: Step, language: str) -> str:
        task, t = traj.task.instruction, step.action.type.value
        phrase = step_phrase(step, language)
        if language == "zh":
            if t == "done":
                return f"任务“{task}”看起来已经完成，我将结束任务。"
            if t == "answer":
                return f"页面上已经有任务“{task}”需要的信息，我将{phrase}。"
            return f"为了完成任务“{task}”，下一步我要{phrase}。"
        if t == "done":
            return f'The task "{task}" looks complete, so I will finish.'
        if t == "answer":
            return f'The screen shows what the task "{task}" asks for, so I will {phrase}.'
        return f'To complete the task "{task}", next I will {phrase}.'

    def generate(self, traj: Trajectory, steps: list[Step], upto: int) -> StepCoT:
        """The CoT of steps[upto] (a position in the list: curated steps may have gaps)."""
        step = steps[upto]
        language = self.language_of(traj)
        return StepCoT(
            trajectory_id=step.trajectory_id,
            index=step.index,
            language=language,
            observation=self.observation(step, language),
            reflection=self.reflection(steps, upto, language),
            plan=self.plan(traj, step, language),
            answer=gui_libra_answer(step, action_description(step, language)),
            backend=TEMPLATE,
            parsed=True,
            raw="",
        )


_REFLECTION = re.compile(r"<reflection>(.*?)</reflection>", re.DOTALL)


def recorded_reflection(step: Step) -> str | None:
    """The `<reflection>` a reflection episode recorded as this step's thought
    (sandbox/reflection.py), so that the template does not overwrite it."""
    m = _REFLECTION.search(step.thought or "")
    return m.group(1).strip() or None if m else None
