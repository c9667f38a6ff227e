"""The chain-of-thought record of one step (`StepCoT`), its Arrow table schema, and the
recorded action as GUI-Libra answer fields: what both CoT backends (template_cot.py,
cot.py's VLMCoT) write.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

import pyarrow as pa

from schemas.converters.gui_libra import to_gui_libra
from schemas.errors import SchemaError
from schemas.records import Step

TEMPLATE = "template"
LABELS = {"en": ("Observation:", "Reflection:", "Plan:"), "zh": ("观察：", "反思：", "计划：")}

COT_SCHEMA = pa.schema(
    [
        ("trajectory_id", pa.string()),
        ("index", pa.int32()),
        ("language", pa.string()),
        ("observation", pa.string()),
        ("reflection", pa.string()),
        ("plan", pa.string()),
        ("answer", pa.string()),  # JSON of the GUI-Libra fields
        ("backend", pa.string()),
        ("parsed", pa.bool_()),
        ("raw", pa.string()),
    ]
)


@dataclass
class StepCoT:
    trajectory_id: str
    index: int  # the step's own index (Step.index), not its position
    language: str
    observation: str
    reflection: str
    plan: str
    answer: dict  # action_description, action_type, value, point_2d (pixels, from the recording)
    backend: str  # "template" or the VLM's model_id
    parsed: bool
    raw: str = ""

    @property
    def thought(self) -> str:
        o, r, p = LABELS[self.language]
        return (
            f"{o} {self.observation}\n{r} {self.reflection}\n{p} {self.plan}"
            if self.language == "en"
            else f"{o}{self.observation}\n{r}{self.reflection}\n{p}{self.plan}"
        )

    def to_row(self) -> dict:
        row = asdict(self)
        row["answer"] = json.dumps(self.answer, ensure_ascii=False, sort_keys=True)
        return row

    @classmethod
    def from_row(cls, row: dict) -> StepCoT:
        return cls(**{**row, "answer": json.loads(row["answer"])})


def gui_libra_answer(step: Step, description: str) -> dict:
    """The recorded action as GUI-Libra answer fields (point in pixels of the screenshot).

    Raises SchemaError naming the step for an action GUI-Libra cannot express.
    """
    action = step.action.model_copy(update={"description": description})
    try:
        text = to_gui_libra(action, step.width, step.height)
    except SchemaError as exc:
        raise exc.located(record=f"{step.trajectory_id}#{step.index}") from None
    return json.loads(text[text.index("{") : text.rindex("}") + 1])
