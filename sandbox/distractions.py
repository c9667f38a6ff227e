"""Distractions injected at random from the session's seed.

A distraction is a modal or banner drawn over the app. Each has one dismiss
control whose accessible name is listed in DISMISS_NAMES, so that an oracle
reading the accessibility tree can clear it before going on.
"""
from __future__ import annotations

from .sessions import Session

KINDS = ["coupon_popup", "notification_banner", "cookie_dialog"]

TEXT = {
    "coupon_popup": {
        "en": ("Limited offer!", "Get 20% off your next order with code SAVE20.", "Close offer"),
        "zh": ("限时优惠券", "新人专享：满99减20，立即领取！", "关闭优惠券"),
    },
    "notification_banner": {
        "en": ("New notification", "You have 3 new updates from people you follow.", "Dismiss notification"),
        "zh": ("新消息提醒", "您关注的好友有3条新动态。", "关闭通知"),
    },
    "cookie_dialog": {
        "en": ("We use cookies", "We use cookies to improve your experience.", "Accept cookies"),
        "zh": ("隐私政策提示", "我们使用Cookie以提升您的使用体验。", "同意并继续"),
    },
}

DISMISS_NAMES = {texts[lang][2] for texts in TEXT.values() for lang in ("en", "zh")}

MAX_PER_SESSION = 2


def pick_distraction(session: Session) -> dict | None:
    """Decide, from the seed and the page-load count, whether to show one now."""
    if session.distraction_rate <= 0 or len(session.distractions) >= MAX_PER_SESSION:
        return None
    rng = session.rng(f"distraction:{session.page_loads}")
    if rng.random() >= session.distraction_rate:
        return None
    kind = rng.choice(KINDS)
    title, body, dismiss = TEXT[kind][session.lang]
    session.distractions.append(kind)
    return {"kind": kind, "title": title, "body": body, "dismiss": dismiss}
