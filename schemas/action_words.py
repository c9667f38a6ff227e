"""Actions in plain words (EN and ZH): 'tap the button "Go"' / '点击“Go”按钮'.

The agent (crawlers/agent.py) words its own history with these phrases exactly
as synthesis words a recorded step (synthesis/prompts.py), so a model sees the
same history text live and in its training set; hence they sit below both.
ZH_ROLE is the shorter set of role words the sandbox oracle's descriptions use
(and the reflection text that quotes its taps).
"""

from __future__ import annotations

from schemas.actions import Action, ActionType
from schemas.converters import swipe_direction
from schemas.model_profiles import ModelProfile
from schemas.records import Element

LANGUAGES = ("en", "zh")
ZH_ROLE = {
    "button": "按钮",
    "link": "链接",
    "textbox": "输入框",
    "searchbox": "搜索框",
    "checkbox": "复选框",
    "switch": "开关",
    "radio": "单选项",
    "combobox": "下拉框",
    "tab": "标签页",
    "option": "选项",
    "menuitem": "菜单项",
}
_ROLE_EN = {
    "textbox": "text box",
    "searchbox": "search box",
    "combobox": "drop-down",
    "menuitem": "menu item",
    "img": "image",
    "generic": "element",
    "StaticText": "text",
    "listitem": "list item",
    "spinbutton": "number field",
    "radio": "radio button",
}
_ROLE_ZH = {
    "button": "按钮",
    "link": "链接",
    "textbox": "输入框",
    "searchbox": "搜索框",
    "combobox": "下拉框",
    "checkbox": "复选框",
    "radio": "单选按钮",
    "tab": "标签页",
    "menuitem": "菜单项",
    "switch": "开关",
    "option": "选项",
    "slider": "滑块",
    "heading": "标题",
    "img": "图片",
    "region": "区域",
    "listitem": "列表项",
    "navigation": "导航栏",
    "dialog": "对话框",
    "spinbutton": "数字框",
    "listbox": "列表框",
    "main": "主区域",
    "banner": "页头",
    "article": "文章",
    "row": "行",
    "cell": "单元格",
}
_DIR_ZH = {"up": "上", "down": "下", "left": "左", "right": "右"}


def check_language(language: str) -> None:
    if language not in LANGUAGES:
        raise ValueError(f"language={language!r} is not one of {LANGUAGES}")


def element_words(element: Element, language: str) -> str:
    """'the button "Add to cart"' / '“加入购物车”按钮'."""
    if language == "zh":
        return f"“{element.name}”{_ROLE_ZH.get(element.role, '元素')}"
    role = _ROLE_EN.get(element.role, element.role) or "element"  # a role-less element (some desktop trees)
    return f'the {role} "{element.name}"'


def _where(
    action: Action,
    target: Element | None,
    width: int,
    height: int,
    language: str,
    profile: ModelProfile | None = None,
) -> str:
    if target is not None and target.name:
        return element_words(target, language)
    if action.x is not None:
        px, py = (
            action.point_px(width, height)
            if profile is None
            else profile.to_model(action.x, action.y, width, height)
        )
        return f"({px}, {py}) 处" if language == "zh" else f"({px}, {py})"
    return "屏幕" if language == "zh" else "the screen"


def action_phrase(
    action: Action,
    target: Element | None,
    width: int,
    height: int,
    language: str,
    profile: ModelProfile | None = None,
) -> str:
    """The action in plain words, lower case: 'tap the button "Go"' / '点击“Go”按钮'.

    A point without a named target is written in pixels of the width x height
    screenshot, or, with a model `profile`, as that profile's answer writes it
    (schemas.model_profiles: pixels of its frame, or its grid)."""
    check_language(language)
    t, zh = action.type, language == "zh"
    where = _where(action, target, width, height, language, profile)
    named = target is not None and bool(target.name)
    text = action.text or ""
    if t == ActionType.TAP:
        return f"点击{where}" if zh else f"tap {where}" if named else f"tap at {where}"
    if t == ActionType.RIGHT_CLICK:
        return f"右键点击{where}" if zh else f"right-click {where}" if named else f"right-click at {where}"
    if t == ActionType.DOUBLE_TAP:
        return f"双击{where}" if zh else f"double-tap {where}" if named else f"double-tap at {where}"
    if t == ActionType.LONG_PRESS:
        return f"长按{where}" if zh else f"long-press {where}" if named else f"long-press at {where}"
    if t == ActionType.SWIPE:
        d = swipe_direction(action)
        if zh:
            return f"在{where}上向{_DIR_ZH[d]}滑动" if named else f"向{_DIR_ZH[d]}滑动"
        return f"swipe {d} on {where}" if named else f"swipe {d}"
    if t == ActionType.SCROLL:
        d = action.direction
        if zh:
            return f"在{where}上向{_DIR_ZH[d]}滚动" if named else f"向{_DIR_ZH[d]}滚动页面"
        return f"scroll {d} over {where}" if named else f"scroll {d}"
    if t == ActionType.TYPE:
        if zh:
            return f"在{where}中输入“{text}”" if named else f"输入“{text}”"
        return f'type "{text}" into {where}' if named else f'type "{text}"'
    if t == ActionType.KEY:
        return f"按下 {text} 键" if zh else f"press the {text} key"
    if t == ActionType.OPEN_APP:
        return f"打开应用“{text}”" if zh else f'open the app "{text}"'
    if t == ActionType.SELECT:
        if zh:
            return f"在{where}中选择“{text}”"
        return f'choose "{text}" in {where}'
    if t == ActionType.ANSWER:
        return f"回答“{text}”" if zh else f'answer "{text}"'
    simple = {
        ActionType.BACK: ("返回上一页", "go back to the previous page"),
        ActionType.HOME: ("回到主屏幕", "go to the home screen"),
        ActionType.WAIT: ("等待页面加载", "wait for the screen to update"),
        ActionType.TAKE_OVER: ("请用户接管操作", "hand control to the user"),
        ActionType.DONE: ("结束任务", "finish the task"),
    }
    return simple[t][0 if zh else 1]
