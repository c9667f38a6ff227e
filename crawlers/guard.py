"""The safety guard: sensitive actions are refused before they run, and audited.

A crawl clicks through real-looking apps; a few controls must never be pressed
by a policy without a human (pay, delete the account, message everyone). The
guard reads the names of the elements under the action (and the text it
would type or choose) and matches them against English and Chinese patterns.
A refused action is not executed: the runner records it with the verdict and
ends the episode as a failure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from schemas.actions import Action, ActionType
from schemas.records import Element

# Written so that harmless neighbours stay allowed: "Add to cart", "Payment
# methods", "Delete note", "Reply all", "Close" are not matched.
PATTERNS: dict[str, list[str]] = {
    "payment": [
        r"\bpay now\b",
        r"^pay\b(?!ment)",
        r"\bplace (?:your |the )?order\b",
        r"\bconfirm (?:and |& )?pay(?:ment)?\b",
        r"\bcheckout (?:and|&) pay\b",
        r"\bsubmit payment\b",
        r"\bcomplete (?:your )?purchase\b",
        "立即支付",
        "确认付款",
        "确认支付",
        "去付款",
        "去支付",
        "立即付款",
        "提交订单",
        "立即下单",
    ],
    "account_deletion": [
        r"\b(?:delete|close|remove|deactivate|terminate) (?:my |your |this |the )?account\b",
        "注销账号",
        "注销帐号",
        "注销账户",
        "注销帐户",
        "删除账户",
        "删除帐户",
        "删除账号",
        "删除帐号",
        # The last button of a 注销 flow rarely repeats the noun.
        "申请注销",
        "确认注销",
        "立即注销",
        "永久注销",
    ],
    "send_to_all": [
        r"\bsend to (?:all|everyone|everybody)\b",
        r"\breply all to all contacts\b",
        r"\b(?:message|email|mail) (?:all|everyone)\b",
        r"\bbroadcast to all\b",
        "群发",
        "发送给所有人",
        "发给所有人",
        "全部联系人",
        "所有联系人",
    ],
}

_COMPILED = {cat: [re.compile(p, re.IGNORECASE) for p in pats] for cat, pats in PATTERNS.items()}

# Roles a pointer press activates: a tap on the label inside a "Pay now"
# button is a tap on the button, whatever the innermost element is.
ACTIVATABLE_ROLES = {
    "button",
    "link",
    "menuitem",
    "menuitemcheckbox",
    "menuitemradio",
    "checkbox",
    "switch",
    "radio",
    "tab",
    "option",
    "combobox",
    "listbox",
}

_POINTER_ACTIONS = {
    ActionType.TAP,
    ActionType.RIGHT_CLICK,
    ActionType.DOUBLE_TAP,
    ActionType.LONG_PRESS,
    ActionType.SELECT,
}


@dataclass(frozen=True)
class GuardDecision:
    allowed: bool
    category: str | None = None
    reason: str = ""

    def label(self) -> str | None:
        """What a Step's `guard` field holds: None when allowed."""
        if self.allowed:
            return None
        return f"blocked:{self.category}: {self.reason}"


ALLOW = GuardDecision(True, None, "no sensitive pattern")


def _normalise(text: str) -> str:
    return " ".join(text.split())


class SafetyGuard:
    """Decides, before an action runs, whether it is sensitive."""

    def __init__(self, patterns: dict[str, list[str]] | None = None):
        self.patterns = (
            _COMPILED
            if patterns is None
            else {c: [re.compile(p, re.IGNORECASE) for p in ps] for c, ps in patterns.items()}
        )

    def match(self, text: str) -> tuple[str, str] | None:
        """(category, pattern) of the first sensitive pattern in `text`."""
        text = _normalise(text)
        if not text:
            return None
        for category, pats in self.patterns.items():
            for p in pats:
                if p.search(text):
                    return category, p.pattern
        return None

    def check(
        self, action: Action, target: Element | None = None, elements: list[Element] | None = None
    ) -> GuardDecision:
        """Judge `action` on `target` (and the controls under its point)."""
        for what, text in self._texts(action, target, elements or []):
            hit = self.match(text)
            if hit is not None:
                category, pattern = hit
                return GuardDecision(False, category, f"{what} {text!r} matches {pattern!r}")
        return ALLOW

    def is_sensitive(self, element: Element) -> bool:
        return self.match(element.name) is not None

    @staticmethod
    def _texts(action: Action, target: Element | None, elements: list[Element]):
        if action.type in (
            ActionType.DONE,
            ActionType.ANSWER,
            ActionType.TAKE_OVER,
            ActionType.WAIT,
            ActionType.SCROLL,
            ActionType.BACK,
            ActionType.HOME,
        ):
            return  # nothing on the page is activated
        if target is not None and target.name:
            yield f"{target.role}", target.name
        if action.type in _POINTER_ACTIONS and action.x is not None:
            for e in elements:
                if e.role in ACTIVATABLE_ROLES and e.name and e.contains(action.x, action.y):
                    yield f"{e.role} under the point", e.name
        if action.type in (ActionType.TYPE, ActionType.SELECT) and action.text:
            yield f"{action.type.value} text", action.text
