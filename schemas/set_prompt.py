"""The reasoning set's prompt: the system turn of each mode and the human turn.

synthesis/reasoning_set.py writes the set's samples with it and the agent
(schemas/agent_prompt.py, prompt "reasoning_set") asks a model trained on the
set with it, so a model evaluated live sees exactly the prompt it was trained
on; hence it sits below both.
"""

from __future__ import annotations

from schemas.model_profiles import Coords
from schemas.prompt_data import escape_data

MODES = ("direct", "reason")  # sorted: a step's samples go out in key order
_JSON = '{"action_description": "...", "action_type": "...", "value": "...", "point_2d": [x, y]}'
_FORMAT = {
    ("en", "pixels"): _JSON
    + (
        " (point_2d in pixels of the screenshot; [-100, -100] when the "
        'action has no point; unused fields "None")'
    ),
    ("zh", "pixels"): _JSON + '（point_2d 为截图的像素坐标；没有点时为 [-100, -100]；未使用的字段填 "None"）',
    ("en", "grid1000"): _JSON
    + (
        " (point_2d on a 0-1000 grid over the screenshot: [0, 0] is the "
        "top-left corner, [1000, 1000] the bottom-right; [-100, -100] when "
        'the action has no point; unused fields "None")'
    ),
    ("zh", "grid1000"): _JSON
    + (
        "（point_2d 为截图上 0-1000 网格的坐标：[0, 0] 为左上角，[1000, 1000] "
        '为右下角；没有点时为 [-100, -100]；未使用的字段填 "None"）'
    ),
    ("en", "grid999"): _JSON
    + (
        " (point_2d on a 0-999 grid over the screenshot: [0, 0] is the "
        "top-left corner, [999, 999] the bottom-right; [-100, -100] when "
        'the action has no point; unused fields "None")'
    ),
    ("zh", "grid999"): _JSON
    + (
        "（point_2d 为截图上 0-999 网格的坐标：[0, 0] 为左上角，[999, 999] "
        '为右下角；没有点时为 [-100, -100]；未使用的字段填 "None"）'
    ),
}
_ACTION_NAMES = (
    "Click, LongPress, Swipe, Scroll, Write, Select, KeyboardPress, OpenAPP, "
    "NavigateBack, NavigateHome, Wait, Answer, Terminate"
)
_SYSTEM = {
    ("en", "reason"): "You are a GUI agent. Given a screenshot, a task and the actions taken so "
    "far, decide the next action. First think inside <think></think> "
    "(observation, reflection, plan), then give the action inside "
    "<answer></answer> as JSON: {fmt}. Action types: {names}.",
    ("en", "direct"): "You are a GUI agent. Given a screenshot, a task and the actions taken so "
    "far, decide the next action. Answer directly, without reasoning: give "
    "only the action inside <answer></answer> as JSON: {fmt}. "
    "Action types: {names}.",
    ("zh", "reason"): "你是一个图形界面智能体。根据截图、任务和已经执行的操作，决定下一步操作。"
    "先在 <think></think> 中思考（观察、反思、计划），再在 <answer></answer> "
    "中以 JSON 给出操作：{fmt}。操作类型：{names}。",
    ("zh", "direct"): "你是一个图形界面智能体。根据截图、任务和已经执行的操作，决定下一步操作。"
    "不要写推理过程，直接在 <answer></answer> 中以 JSON 给出操作：{fmt}。"
    "操作类型：{names}。",
}
_HUMAN = {
    "en": ("Task: {task}\nScreenshot: {w}x{h} pixels\n", "Previous actions:\n", "Previous actions: none"),
    "zh": ("任务：{task}\n截图尺寸：{w}x{h} 像素\n", "历史操作：\n", "历史操作：无"),
}


def system_prompt(mode: str, language: str, coords: Coords = "pixels") -> str:
    """The system turn of `mode`; `coords` is the profile's (schemas.model_profiles)."""
    if (language, mode) not in _SYSTEM or (language, coords) not in _FORMAT:
        raise ValueError(
            f"mode={mode!r}, language={language!r}, coords={coords!r}: expected a "
            f"mode in {MODES}, language 'en' or 'zh' and coords pixels, grid1000 "
            f"or grid999"
        )
    return _SYSTEM[(language, mode)].format(fmt=_FORMAT[(language, coords)], names=_ACTION_NAMES)


def human_prompt(instruction: str, history: list[str], width: int, height: int, language: str) -> str:
    """`<image>` then the task and the earlier actions, one line each
    (synthesis.prompts.executed_history numbers them: "Step 1: ...").

    Task and history are recorded or imported text: `<`/`>` are escaped as in
    filters.judge, so that a `<image>` in an instruction cannot become a second
    image slot (and the agent's prompt escapes the task the same way).
    """
    head, hist, none = _HUMAN[language]
    text = "<image>\n" + head.format(task=escape_data(instruction), w=width, h=height)
    if not history:
        return text + none
    return text + hist + "\n".join(escape_data(line) for line in history)
