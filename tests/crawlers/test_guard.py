"""The safety guard: sensitive controls in English and Chinese are refused, neighbours are not."""

from __future__ import annotations

import pytest

from crawlers.guard import GuardDecision, SafetyGuard
from schemas.actions import Action, ActionType
from schemas.records import Element
from trajforge.store.audit import AuditLog, read_audit

GUARD = SafetyGuard()


def button(name: str, bbox=(0.4, 0.4, 0.6, 0.5), role: str = "button") -> Element:
    return Element(role=role, name=name, bbox=bbox)


def tap_on(el: Element) -> Action:
    x, y = el.centre()
    return Action.tap(x, y)


@pytest.mark.parametrize(
    "name, category",
    [
        ("Pay now", "payment"),
        ("PAY NOW", "payment"),
        ("Place order", "payment"),
        ("Place your order", "payment"),
        ("Confirm payment", "payment"),
        ("Checkout & pay", "payment"),
        ("Checkout and pay", "payment"),
        ("Pay ¥59.00", "payment"),
        ("立即支付", "payment"),
        ("确认付款", "payment"),
        ("去付款", "payment"),
        ("提交订单并支付", "payment"),
        ("Delete account", "account_deletion"),
        ("Delete my account", "account_deletion"),
        ("Close account", "account_deletion"),
        ("注销账号", "account_deletion"),
        ("删除账户", "account_deletion"),
        ("申请注销", "account_deletion"),
        ("Send to all contacts", "send_to_all"),
        ("群发给所有联系人", "send_to_all"),
        ("Send to all", "send_to_all"),
        ("Send to everyone", "send_to_all"),
        ("Reply all to all contacts", "send_to_all"),
        ("群发", "send_to_all"),
        ("发送给所有人", "send_to_all"),
        ("发送给全部联系人", "send_to_all"),
        ("全部联系人", "send_to_all"),
    ],
)
def test_sensitive_names_are_blocked_with_their_category(name, category):
    el = button(name)
    d = GUARD.check(tap_on(el), el, [el])
    assert not d.allowed
    assert d.category == category
    assert name.lower() in d.reason.lower()
    assert d.label().startswith(f"blocked:{category}: ")


@pytest.mark.parametrize(
    "name",
    [
        "Add to cart",
        "加入购物车",
        "Delete note",
        "删除笔记",
        "Payment methods",
        "Reply all",
        "Checkout",
        "Close",
        "Send",
        "发送",
        "Account settings",
        "账号设置",
        "Order history",
        "我的订单",
        "Close offer",
        "关闭优惠券",
        "Display",
        "Replay",
        "退出登录",
        "Log out",
        "Contacts",
        "联系人",
        "删除",
        "Delete",
        "Forward",
        "转发",
    ],
)
def test_harmless_names_are_allowed(name):
    el = button(name)
    d = GUARD.check(tap_on(el), el, [el])
    assert d.allowed, d.reason
    assert d.category is None and d.label() is None


def test_a_tap_on_the_label_inside_a_pay_button_is_a_tap_on_the_button():
    pay = button("Pay now", bbox=(0.40, 0.40, 0.60, 0.50))
    inner = Element(role="generic", name="", bbox=(0.45, 0.42, 0.55, 0.48))
    d = GUARD.check(tap_on(inner), inner, [pay, inner])
    assert not d.allowed and d.category == "payment"
    # ...while a tap beside the button is fine.
    d = GUARD.check(Action.tap(0.1, 0.1), None, [pay, inner])
    assert d.allowed


def test_typed_and_selected_text_is_judged_too():
    box = Element(role="textbox", name="Command", bbox=(0.1, 0.1, 0.5, 0.2))
    assert not GUARD.check(Action.type_text("delete my account"), box, [box]).allowed
    assert GUARD.check(Action.type_text("coffee beans"), box, [box]).allowed
    sel = Element(role="combobox", name="Recipients", bbox=(0.1, 0.3, 0.5, 0.4))
    d = GUARD.check(Action(type=ActionType.SELECT, x=0.3, y=0.35, text="全部联系人"), sel, [sel])
    assert not d.allowed and d.category == "send_to_all"


def test_actions_that_activate_nothing_are_always_allowed():
    pay = button("Pay now", bbox=(0.0, 0.0, 1.0, 1.0))
    for action in (
        Action.scroll("down", 0.5, 0.5),
        Action(type=ActionType.BACK),
        Action(type=ActionType.DONE),
        Action(type=ActionType.ANSWER, text="Pay now"),
        Action(type=ActionType.WAIT),
    ):
        assert GUARD.check(action, pay, [pay]).allowed, action


def test_custom_patterns_replace_the_defaults():
    guard = SafetyGuard({"shutdown": [r"\bshut down\b"]})
    assert not guard.check(tap_on(button("Shut down")), button("Shut down")).allowed
    assert guard.check(tap_on(button("Pay now")), button("Pay now")).allowed


def test_audit_log_appends_one_json_line_per_decision(tmp_path):
    path = tmp_path / "audit" / "c.jsonl"
    pay = button("立即支付")
    with AuditLog(path) as audit:
        audit.record(
            trajectory_id="t1",
            step_index=0,
            action=tap_on(pay),
            target=pay,
            decision=GUARD.check(tap_on(pay), pay, [pay]),
        )
        audit.record(
            trajectory_id="t1",
            step_index=1,
            action=Action.scroll("down"),
            target=None,
            decision=GuardDecision(True),
        )
    with AuditLog(path) as audit:  # a second run appends
        audit.record(
            trajectory_id="t2",
            step_index=0,
            action=Action.scroll("up"),
            target=None,
            decision=GuardDecision(True),
        )
    rows = read_audit(path)
    assert [(r["trajectory_id"], r["step_index"], r["decision"]) for r in rows] == [
        ("t1", 0, "blocked"),
        ("t1", 1, "allowed"),
        ("t2", 0, "allowed"),
    ]
    assert rows[0]["category"] == "payment"
    assert rows[0]["target"]["name"] == "立即支付"
    assert rows[0]["action"]["type"] == "tap"
    assert rows[1]["target"] is None
    assert all(isinstance(r["time"], float) for r in rows)
    assert "立即支付" in path.read_text(encoding="utf-8")  # readable, not \\u-escaped
