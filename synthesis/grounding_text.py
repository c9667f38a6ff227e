"""Referring expressions for a grounding target, in English or in Chinese.

Kinds (the sample's `kind`):
- "text": by the element's text alone ('"Send"' / '“发送”');
- "role_text": by role and text ('the Send button' / '“发送”按钮');
- "position": by its place among elements of its role, when it is one of several in a
  column or a list ('the second item in the list', 'the third link from the top' /
  '列表中的第二项', '从上往下第三个链接');
- "relation": by its nearest named neighbour on the same row or column ('the icon left
  of the Search box' / '“搜索”框左边的图标');
- "function": by what it did when the recording acted on it (synthesis.grounding_function).

Chinese is written with its own templates and word order (the modifier before the
noun: 位置 + 的 + 角色), not translated from the English ones. An expression that
would fit two targets of the screen is not written: "text" and "role_text" go when
another target has the same text (and role), "relation" when the neighbour's words
fit two neighbours.
"""

from __future__ import annotations

from schemas.records import Element

KINDS = ("text", "role_text", "position", "relation", "function")
_ROLE_EN = {
    "textbox": "text box",
    "searchbox": "search box",
    "combobox": "drop-down",
    "menuitem": "menu item",
    "img": "image",
    "image": "image",
    "StaticText": "text",
    "text": "text",
    "listitem": "item",
    "spinbutton": "number field",
    "radio": "radio button",
    "option": "option",
    "columnheader": "column header",
    "element": "element",
    "icon": "icon",
    "heading": "heading",
    "cell": "cell",
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
    "image": "图片",
    "listitem": "列表项",
    "spinbutton": "数字框",
    "row": "行",
    "cell": "单元格",
    "StaticText": "文字",
    "text": "文字",
    "icon": "图标",
    "element": "元素",
    "columnheader": "列标题",
}
_ORD_EN = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth")
_NUM_ZH = "一二三四五六七八九十"
_SIDE_EN = {"left": "left of", "right": "right of", "above": "above", "below": "below"}
_SIDE_ZH = {"left": "左边", "right": "右边", "above": "上方", "below": "下方"}
_LISTY = frozenset({"listitem", "option", "row", "menuitem", "treeitem"})
MAX_NAME = 60


def _name(e: Element) -> str:
    n = " ".join(e.name.split())
    return n if len(n) <= MAX_NAME else n[: MAX_NAME - 1] + "…"


def role_word(role: str, language: str) -> str:
    if language == "zh":
        return _ROLE_ZH.get(role, "元素")
    return _ROLE_EN.get(role, role.lower())


def named(e: Element, language: str) -> str:
    """'the Send button' / '“发送”按钮'."""
    if language == "zh":
        return f"“{_name(e)}”{role_word(e.role, 'zh')}"
    word = role_word(e.role, "en")
    first, *rest = word.split()
    if first in _name(e).lower().split():  # "the Search box", not "the Search search box"
        return " ".join(["the", _name(e), *rest])
    return f"the {_name(e)} {word}"


def text_expression(e: Element, language: str) -> str:
    return f"“{_name(e)}”" if language == "zh" else f'"{_name(e)}"'


def ordinal(k: int, language: str) -> str:
    """1 -> 'first' / '第一'; beyond ten, '11th' / '第11'."""
    if language == "zh":
        return f"第{_NUM_ZH[k - 1]}" if k <= 10 else f"第{k}"
    return _ORD_EN[k - 1] if k <= 10 else f"{k}th"


def position_expression(e: Element, others: list[Element], language: str) -> str | None:
    """Its rank among same-role elements of its column (left edges within 2 % of the
    width), top to bottom; None when it is alone there. List-like roles say "in the list"."""
    column = sorted(
        (o for o in others if o.role == e.role and abs(o.bbox[0] - e.bbox[0]) <= 0.02),
        key=lambda o: (o.bbox[1], o.bbox[0]),
    )
    if len(column) < 2 or e not in column:
        return None
    k = column.index(e) + 1
    if e.role in _LISTY:
        return (
            f"列表中的{ordinal(k, 'zh')}项"
            if language == "zh"
            else f"the {ordinal(k, 'en')} item in the list"
        )
    if language == "zh":
        return f"从上往下{ordinal(k, 'zh')}个{role_word(e.role, 'zh')}"
    return f"the {ordinal(k, 'en')} {role_word(e.role, 'en')} from the top"


def _side(e: Element, o: Element) -> tuple[str, float] | None:
    """Where e lies from o, and how far, when they share a row or a column."""
    ex0, ey0, ex1, ey1 = e.bbox
    ox0, oy0, ox1, oy1 = o.bbox
    rows = min(ey1, oy1) - max(ey0, oy0) > 0.5 * min(ey1 - ey0, oy1 - oy0)
    cols = min(ex1, ox1) - max(ex0, ox0) > 0.5 * min(ex1 - ex0, ox1 - ox0)
    if rows and ex1 <= ox0:
        return "left", ox0 - ex1
    if rows and ex0 >= ox1:
        return "right", ex0 - ox1
    if cols and ey1 <= oy0:
        return "above", oy0 - ey1
    if cols and ey0 >= oy1:
        return "below", ey0 - oy1
    return None


def relation_expression(e: Element, others: list[Element], language: str) -> str | None:
    """'the icon left of the Search box' from the nearest neighbour on its row or column
    (within 15 % of the screen) whose words name one element only."""
    best = None
    for o in others:
        if o is e or o.bbox is None:
            continue
        side = _side(e, o)
        if side is None or side[1] > 0.15:
            continue
        if sum(1 for p in others if (p.role, _name(p)) == (o.role, _name(o))) > 1:
            continue
        if best is None or side[1] < best[1][1]:
            best = (o, side)
    if best is None:
        return None
    o, (side, _) = best
    if language == "zh":
        return f"{named(o, 'zh')}{_SIDE_ZH[side]}的{role_word(e.role, 'zh')}"
    return f"the {role_word(e.role, 'en')} {_SIDE_EN[side]} {named(o, 'en')}"


def function_expression(e: Element, function: str, language: str) -> str:
    """'the button that opens the compose dialog' / '打开写邮件对话框的按钮'."""
    if language == "zh":
        return f"{function}的{role_word(e.role, 'zh')}"
    return f"the {role_word(e.role, 'en')} that {function}"


def expressions(e: Element, targets: list[Element], language: str) -> dict[str, str]:
    """{kind: expression} for the kinds that name `e` alone among `targets` (function aside)."""
    out = {}
    same_text = sum(1 for t in targets if _name(t) == _name(e))
    same_role_text = sum(1 for t in targets if (t.role, _name(t)) == (e.role, _name(e)))
    if same_text == 1:
        out["text"] = text_expression(e, language)
    if same_role_text == 1:
        out["role_text"] = named(e, language)
    pos = position_expression(e, targets, language)
    if pos is not None:
        out["position"] = pos
    rel = relation_expression(e, targets, language)
    if rel is not None:
        out["relation"] = rel
    return out
