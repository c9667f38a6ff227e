"""What an element does, read from the screen before and after the recording acted on it.

Where a step's action was executed on its target, the next recorded step's screen is
"after" (AutoGUI's idea: the change an interaction causes describes the element).
`screen_change(before, after)` gives the facts: URL change, elements (role, name) that
appeared and disappeared, a dialog opened or closed.

Two writers, labelled in every sample (`function_backend`, like cot's `backend`):
- `TemplateFunction` ("template"): a phrase from the facts, EN or ZH, in a fixed order:
  a dialog opened, a dialog closed, the page changed (its heading, else its path),
  new elements shown; None when nothing usable changed (no sample is written);
- `VLMFunction` (the model's id): the VLM is asked for one short phrase, with both
  screenshots and the facts as data (filters.judge's markers, page text escaped); an
  empty or over-long answer falls back to the template, which then labels it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from urllib.parse import urlparse

from filters.judge import DATA_CLOSE, DATA_OPEN, escape_data
from schemas.records import Element, Step
from trajforge.vlm.backends import VLMBackend, VLMRequest
from trajforge.vlm.messages import image_part, text_part

TEMPLATE = "template"
_DIALOGS = frozenset({"dialog", "alertdialog"})
MAX_WORDS, MAX_CHARS = 12, 40  # a VLM phrase longer than this is not a description


@dataclass(frozen=True)
class ScreenChange:
    url_before: str
    url_after: str
    appeared: list[tuple[str, str]] = field(default_factory=list)
    disappeared: list[tuple[str, str]] = field(default_factory=list)
    heading_after: str = ""

    def as_data(self) -> dict:
        return {
            "url_before": self.url_before,
            "url_after": self.url_after,
            "appeared": [f"{r} {n}" for r, n in self.appeared[:12]],
            "disappeared": [f"{r} {n}" for r, n in self.disappeared[:12]],
            "heading_after": self.heading_after,
        }


def _named(step: Step) -> list[tuple[str, str]]:
    seen, out = set(), []
    for e in step.elements:
        key = (e.role, " ".join(e.name.split()))
        if key[1] and key not in seen:
            seen.add(key)
            out.append(key)
    return out


def screen_change(before: Step, after: Step) -> ScreenChange:
    b, a = _named(before), _named(after)
    bs, as_ = set(b), set(a)
    heading = next((n for r, n in a if r == "heading"), "")
    return ScreenChange(
        before.url, after.url, [x for x in a if x not in bs], [x for x in b if x not in as_], heading
    )


def _page(url: str) -> str:
    p = urlparse(url)
    part = (p.fragment or p.path).strip("/#").split("/")[-1]
    return part.replace("-", " ").replace("_", " ")


class TemplateFunction:
    backend = TEMPLATE

    def describe(self, target: Element, change: ScreenChange, language: str) -> str | None:
        zh = language == "zh"
        opened = next((n for r, n in change.appeared if r in _DIALOGS), None)
        if opened:
            return f"打开“{opened}”对话框" if zh else f"opens the {opened} dialog"
        closed = next((n for r, n in change.disappeared if r in _DIALOGS), None)
        if closed:
            return f"关闭“{closed}”对话框" if zh else f"closes the {closed} dialog"
        if change.url_after and change.url_after != change.url_before:
            page = change.heading_after or _page(change.url_after)
            if page:
                return f"跳转到“{page}”页面" if zh else f"goes to the {page} page"
        shown = [n for r, n in change.appeared if r not in ("StaticText", "text")]
        if shown:
            return (
                f"显示“{shown[0]}”等{len(shown)}个新元素"
                if zh and len(shown) > 1
                else f"显示“{shown[0]}”"
                if zh
                else f"shows {shown[0]}" + (f" and {len(shown) - 1} more" if len(shown) > 1 else "")
            )
        return None


_SYSTEM = {
    "en": "You describe what a GUI element does. Given the screen before and after it "
    "was used and the recorded change, answer with one short verb phrase in "
    "English (e.g. 'opens the compose dialog'), nothing else.",
    "zh": "你负责描述界面元素的功能。根据使用该元素前后的截图和记录下的变化，只用一个简短的"
    "中文动词短语回答（例如“打开写邮件对话框”），不要写别的。",
}


class VLMFunction:
    def __init__(self, backend: VLMBackend, max_new_tokens: int = 32):
        self.vlm, self.max_new_tokens = backend, max_new_tokens
        self.template = TemplateFunction()

    @property
    def backend(self) -> str:
        return self.vlm.model_id

    def request(
        self, target: Element, change: ScreenChange, language: str, before: bytes, after: bytes, key: str
    ) -> VLMRequest:
        data = {"element": {"role": target.role, "name": target.name}, "change": change.as_data()}
        block = escape_data(json.dumps(data, ensure_ascii=False, indent=1))
        content = [text_part(f"{DATA_OPEN}\n{block}\n{DATA_CLOSE}\n")]
        for label, image in (("before", before), ("after", after)):
            if image:
                content += [text_part(label + ":"), image_part(image)]
        return VLMRequest(
            messages=[{"role": "system", "content": _SYSTEM[language]}, {"role": "user", "content": content}],
            key=key,
        )

    def describe_many(self, items: list[tuple]) -> list[tuple[str | None, str]]:
        """items: (target, change, language, before image, after image, key) ->
        (phrase or None, backend label) each; the template answers where the VLM does not."""
        if not items:
            return []
        texts = self.vlm.generate([self.request(*it) for it in items], self.max_new_tokens)
        out = []
        for (target, change, language, *_), raw in zip(items, texts):
            phrase = clean_phrase(raw if isinstance(raw, str) else raw[0])
            if phrase is None:
                out.append((self.template.describe(target, change, language), TEMPLATE))
            else:
                out.append((phrase, self.backend))
        return out


def clean_phrase(raw: str) -> str | None:
    """The first line, stripped of quotes and a final stop; None when empty or too long."""
    line = next((ln.strip() for ln in raw.splitlines() if ln.strip()), "")
    line = line.rstrip(".。").strip("\"'“”「」 ").rstrip(".。")
    words = line.split()
    if not line or len(words) > MAX_WORDS or len(line) > MAX_CHARS * (2 if len(words) > 1 else 1):
        return None
    return line[:1].lower() + line[1:] if words and line.isascii() else line
