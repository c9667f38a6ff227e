"""What the delivery plans name and read on the phone's screen: the controls' names,
targets for shop and order cards, prices and fees read off element names, and the
oracle for a phone page with one scroll area (`PhoneOracle`, `TapFixed`)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from schemas.actions import Action
from schemas.observation import Observation
from schemas.records import Element

from ..apps.delivery import status_label
from .base import OracleError, PlanOracle, Tap, Target

# -- names of the controls the plans use (see templates/delivery/<lang>/) ------------------
SEARCH_BOX = {"en": "Search stores and dishes", "zh": "搜索商家或商品"}
KEY_SEARCH = {"en": "Search", "zh": "搜索"}  # the soft keyboard's action key
KEY_DONE = {"en": "Done", "zh": "完成"}
BANNER = {"en": "Deals for you", "zh": "满减优惠"}
TABS = {"carts": ("Carts", "购物车"), "orders": ("Orders", "订单"), "account": ("Account", "我的")}
ADDRESSES_LINK = {"en": "Addresses", "zh": "收货地址"}
ADD_TO_CART = {"en": "Add to cart", "zh": "加入购物车"}  # in the options sheet
NOTE_BOX = {"en": "Note for the store", "zh": "订单备注"}
TABLEWARE_ROW = {"en": "Utensils:", "zh": "餐具数量："}
ADDRESS_ROW = {"en": "Delivery address:", "zh": "收货地址："}
SUBMIT = {"en": "Submit order, pay later", "zh": "下单，稍后支付"}
REORDER = {"en": "Reorder", "zh": "再来一单"}
DELETE_ORDER = {"en": "Delete order", "zh": "删除订单"}
REMOVE_LINE = {"en": "Remove", "zh": "删除"}
ORDERS_AREA = {"en": "Your orders", "zh": "订单列表"}
NOTES = {
    "en": ["Less spicy please", "No cilantro", "Extra napkins", "Sauce on the side", "Leave it at the door"],
    "zh": ["少放辣", "不要香菜", "多放醋", "米饭多一点", "放门口就行"],
}

PRICE_RE = re.compile(r"[$¥]\s?(\d[\d,]*(?:\.\d+)?)")
NUMBER_RE = re.compile(r"\d[\d,]*(?:\.\d+)?")


def tab(key: str, lang: str) -> Target:
    return Target(TABS[key][1 if lang == "zh" else 0], "link", exact=True)


def starts_with(prefix: str):
    """Pick the first candidate whose name starts with `prefix` (a dish name can be
    a substring of another: 拿铁 / 生椰拿铁, Fries / Cheese Fries)."""

    def pick(cands: list[Element]) -> Element | None:
        return next((e for e in cands if e.name.startswith(prefix)), None)

    return pick


def lowest_on_screen(cands: list[Element]) -> Element | None:
    """The soft keyboard's key shares its name with a search button higher up."""
    return max(cands, key=lambda e: e.bbox[1]) if cands else None


def shop_card(shop: str, lang: str) -> Target:
    return Target(role="link", pick=starts_with(f"{shop}，评分" if lang == "zh" else f"{shop}, rated"))


def order_card(shop: str, lang: str, status: str) -> Target:
    sep = "订单，" if lang == "zh" else " order, "
    return Target(role="link", pick=starts_with(f"{shop}{sep}{status_label(status, lang)}"))


# -- reading names -----------------------------------------------------------------------
def price_in(text: str) -> float | None:
    m = PRICE_RE.search(text)
    return float(m.group(1).replace(",", "")) if m else None


def numbers_in(text: str | None) -> list[float]:
    return [float(n.replace(",", "")) for n in NUMBER_RE.findall(text or "")]


def fee_in(name: str) -> float | None:
    """The delivery fee on a shop card: 配送费¥3 / 免配送费 / $1.99 delivery fee."""
    if "免配送费" in name:
        return 0.0
    m = re.search(r"配送费¥(\d+(?:\.\d+)?)", name) or re.search(r"\$(\d+\.\d\d) delivery fee", name)
    return float(m.group(1)) if m else None


def shop_name_of_card(name: str) -> str:
    return re.split(r"，评分|, rated", name, maxsplit=1)[0]


def cheapest(cands: list[Element]) -> Element | None:
    priced = [e for e in cands if price_in(e.name) is not None]
    return min(priced, key=lambda e: price_in(e.name)) if priced else None


def lowest_fee_shop(obs: Observation) -> str:
    cards = [e for e in obs.elements if e.role == "link" and fee_in(e.name) is not None]
    return shop_name_of_card(min(cards, key=lambda e: fee_in(e.name)).name) if cards else ""


def promo_threshold(obs: Observation, shop: str, lang: str) -> str:
    """Read '满40减12' / '$6 off $40+' off the visible banner slide of `shop`."""
    for e in obs.elements:
        if e.role != "link" or not e.name.startswith(shop):
            continue
        m = re.search(r"满(\d+)减", e.name) or re.search(r"off \$(\d+)\+", e.name)
        if m:
            return f"满{m.group(1)}元" if lang == "zh" else f"${m.group(1)}"
    return ""


def status_heading(obs: Observation, lang: str) -> str:
    labels = {
        status_label(s, lang)
        for s in ("accepted", "picked_up", "on_the_way", "delivered", "pending_payment", "cancelled", "paid")
    }
    return next((e.name for e in obs.elements if e.role == "heading" and e.name in labels), "")


# -- the oracle on a phone ----------------------------------------------------------------
@dataclass(frozen=True)
class TapFixed(Tap):
    """A control that stays put while the page scrolls (tab bar, bottom bar, sheet,
    menu, soft keyboard): touched where it is, never scrolled to."""


class PhoneOracle(PlanOracle):
    """PlanOracle for phone pages with one scroll area (`main`) between fixed bars.

    The base oracle counts anything whose centre is on the screen as reachable;
    on a phone, a list item clipped at the bottom of the scroll area has its
    centre on screen too, under the tab bar, and a tap there would hit a tab.
    Here a target in the scroll area must have its centre inside that area.
    """

    _area: Element | None = None  # the `main` element of the step being resolved

    def _act(self, step, obs: Observation):
        fixed = isinstance(step, TapFixed)
        self._area = None if fixed else next((e for e in obs.elements if e.role == "main"), None)
        return super()._act(step, obs)

    def _scroll_towards(self, el: Element, obs: Observation | None = None) -> Action | None:
        area = self._area
        if area is None or area is el:
            return super()._scroll_towards(el, obs)
        _, top, _, bottom = area.bbox
        cy = el.centre()[1]
        margin = 0.02
        if top + margin <= cy <= bottom - margin:
            return super()._scroll_towards(el, obs)  # keeps the base checks (off to the side)
        self.scrolls += 1
        if self.scrolls > self.max_scrolls:
            raise OracleError(f"'{el.name}' stays outside the scroll area after {self.max_scrolls} scrolls")
        direction = "down" if cy > bottom - margin else "up"
        ax, ay = area.centre()
        return Action.scroll(
            direction, ax, ay, description=self._say("scroll_to", direction=direction, name=el.name)
        )
