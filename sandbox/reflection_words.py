"""How the reflection episode words its own actions: the wrong tap and its correction.

Phrased like the sandbox oracle's taps (sandbox/tasks/base.py), so the wrong
step reads like any other. IRREVERSIBLE: control names whose activation cannot
be undone by going back or tapping again; a wrong step must stay correctable,
so these are never chosen.
"""

from __future__ import annotations

from schemas.action_words import ZH_ROLE

IRREVERSIBLE = (
    "delete",
    "remove",
    "archive",
    "trash",
    "spam",
    "send",
    "submit",
    "sign out",
    "log out",
    "logout",
    "clear",
    "reset",
    "block",
    "unsubscribe",
    "buy",
    "order",
    "pay",
    "删除",
    "移除",
    "归档",
    "垃圾",
    "发送",
    "提交",
    "退出",
    "清空",
    "清除",
    "重置",
    "拉黑",
    "购买",
    "下单",
    "支付",
    "付款",
    "注销",
)


def is_irreversible(name: str) -> bool:
    low = name.lower()
    return any(word in low for word in IRREVERSIBLE)


def _role(role: str, lang: str) -> str:
    return ZH_ROLE.get(role, role) if lang == "zh" else role


def tap_description(role: str, name: str, lang: str) -> str:
    """The wrong action's description, phrased like the oracle's own taps."""
    if lang == "zh":
        return f"点击{_role(role, lang)}“{name}”"
    return f"Tap the {role} '{name}'"


def back_description(lang: str) -> str:
    return "返回上一页" if lang == "zh" else "Go back"


def undo_description(role: str, name: str, lang: str) -> str:
    if lang == "zh":
        return f"再次点击{_role(role, lang)}“{name}”，恢复原状"
    return f"Tap the {role} '{name}' again to undo it"
