"""Delivery's formatting and accessible names, shared by its pages and the task
templates (a plan finds a control by the name these give it)."""

from __future__ import annotations

import re

from ._delivery_catalogue import STATUS
from ._delivery_state import find_shop
from .shop import money


# -- formatting shared by pages and tasks -------------------------------------------------
def status_label(status: str, lang: str) -> str:
    return STATUS[status][1 if lang == "zh" else 0]


def fee_label(fee: float, lang: str) -> str:
    """What a shop card says about the delivery fee (tasks parse it back)."""
    if lang == "zh":
        return "免配送费" if fee == 0 else f"配送费{money(fee, lang)}"
    return f"{money(fee, lang)} delivery fee"


def promo_label(tier: dict, lang: str) -> str:
    """满40减12 / $6 off $40+ (whole numbers in both currencies)."""
    if lang == "zh":
        return f"满{tier['threshold']}减{tier['off']}"
    return f"${tier['off']} off ${tier['threshold']}+"


def sales_label(n: int, lang: str) -> str:
    return f"月售{n}" if lang == "zh" else f"{n:,} orders"


def tableware_label(n: int | None, lang: str) -> str:
    if n is None:
        return "未选择" if lang == "zh" else "Not selected"
    if n == 0:
        return "无需餐具" if lang == "zh" else "No utensils"
    return f"{n}份" if lang == "zh" else f"{n} set" + ("s" if n > 1 else "")


def shop_card_label(shop: dict, lang: str) -> str:
    """The accessible name of a shop's card (a link): what a list shows about it."""
    if lang == "zh":
        return (
            f"{shop['name']}，评分{shop['rating']}，{sales_label(shop['monthly_sales'], lang)}，"
            f"起送{money(shop['min_order'], lang)}，{fee_label(shop['delivery_fee'], lang)}，"
            f"约{shop['eta']}分钟"
        )
    return (
        f"{shop['name']}, rated {shop['rating']}, {shop['eta']} min, "
        f"{fee_label(shop['delivery_fee'], lang)}, {money(shop['min_order'], lang)} minimum"
    )


def order_card_label(state: dict, order: dict) -> str:
    lang = state["lang"]
    shop = find_shop(state, order["shop"])
    status = status_label(order["status"], lang)
    n = sum(i["qty"] for i in order["items"])
    if lang == "zh":
        return f"{shop['name']}订单，{status}，共{n}件，实付{money(order['total'], lang)}"
    return f"{shop['name']} order, {status}, {n} items, {money(order['total'], lang)}"


def add_label(dish_name: str, lang: str) -> str:
    return f"加购{dish_name}" if lang == "zh" else f"Add {dish_name}"


def options_label(dish_name: str, lang: str) -> str:
    return f"选规格：{dish_name}" if lang == "zh" else f"Choose options for {dish_name}"


def mask_phone(number: str) -> str:
    """138****1234 for a Chinese mobile, (•••) •••-0123 for a US number."""
    digits = re.sub(r"\D", "", number)
    if len(digits) == 11:
        return f"{digits[:3]}****{digits[-4:]}"
    return f"(•••) •••-{digits[-4:]}"


def choices_text(choices: list[str], lang: str) -> str:
    return ("，" if lang == "zh" else ", ").join(choices)
