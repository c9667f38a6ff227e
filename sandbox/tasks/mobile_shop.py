"""Task templates for the mobile shop (ShopGo in English, 拼好货 in Chinese).

Touch-first plans: the search goes through the soft keyboard's action key,
the home banner and the product photos are swiped, cart items are
long-pressed for their menu, the orders list is pulled down to refresh its
tracking, and options are picked in the SKU bottom sheet. Plans name elements
by role and accessible name only; where a task says "the cheapest", the oracle
reads the prices in the live elements' names.
"""

from __future__ import annotations

import re

from schemas.actions import ActionType
from schemas.observation import Observation
from schemas.records import Element

from ..apps._mobile_shop_catalogue import FAMILY_QUERY
from ..apps._mobile_shop_state import cart_qty, cheapest_offer, find_product, in_transit, latest_status
from .base import Answer, Fill, Finish, Swipe, Tap, Target, TaskTemplate, When

PRICE_RE = re.compile(r"[$¥]\s?(\d[\d,]*(?:\.\d+)?)")
NUMBER_RE = re.compile(r"\d[\d,]*(?:\.\d+)?")

SEARCH = {"en": "Search products", "zh": "搜索商品"}  # home link, then the search field
SEARCH_KEY = {"en": "Search", "zh": "搜索"}  # the soft keyboard's action key
COMPARE = {"en": "Compare prices from", "zh": "同款比价"}
ADD_TO_CART = {"en": "Add to cart", "zh": "加入购物车"}
CONFIRM = {"en": "Confirm", "zh": "确定"}
INCREASE = {"en": "Increase quantity", "zh": "增加数量"}
FAVORITE = {"en": "Add to favorites", "zh": "收藏"}
CART_TAB = {"en": "Cart,", "zh": "购物车，"}
ME_TAB = {"en": "Me", "zh": "我的"}
MY_ORDERS = {"en": "My orders", "zh": "我的订单"}
ORDERS_LIST = {"en": "Orders", "zh": "订单列表"}
BANNER = {"en": "Featured deals", "zh": "活动轮播"}
PHOTOS = {"en": "Product photos", "zh": "商品图片"}
COUPON_CENTER = {"en": "Coupon center", "zh": "领券中心"}
DELETE = {"en": "Delete", "zh": "删除"}
TO_FAVORITES = {"en": "Move to favorites", "zh": "移入收藏"}
LATEST = {"en": "Latest update: ", "zh": "最新物流："}
WEIGHT_RE = {"en": re.compile(r"Weight: (\d+) g"), "zh": re.compile(r"重量：(\d+)克")}


# -- reading the screen -------------------------------------------------------------
def price_in(text: str) -> float | None:
    m = PRICE_RE.search(text)
    return float(m.group(1).replace(",", "")) if m else None


def numbers_in(text: str | None) -> list[float]:
    return [float(n.replace(",", "")) for n in NUMBER_RE.findall(text or "")]


def cheapest(cands: list[Element]) -> Element | None:
    priced = [e for e in cands if price_in(e.name) is not None]
    return min(priced, key=lambda e: price_in(e.name)) if priced else None


def first_priced(cands: list[Element]) -> Element | None:
    return next((e for e in cands if price_in(e.name) is not None), None)


def read_lower_of(sellers: list[str], lang: str):
    """The cheaper of two sellers' offers on the compare screen, as 'seller price'."""

    def read(obs: Observation) -> str:
        offers = [
            e
            for e in obs.elements
            if e.role == "link"
            and price_in(e.name) is not None
            and any(e.name.startswith(s) for s in sellers)
        ]
        best = cheapest(offers)
        if best is None:
            return ""
        seller = next(s for s in sellers if best.name.startswith(s))
        return f"{seller} {PRICE_RE.search(best.name).group(0)}"

    return read


def read_weight(lang: str):
    def read(obs: Observation) -> str:
        m = WEIGHT_RE[lang].search(obs.a11y_tree)
        return "" if m is None else (f"{m.group(1)}克" if lang == "zh" else f"{m.group(1)} g")

    return read


def read_latest_update(item: str, lang: str):
    """The status in the first "Latest update" line after the order's item name."""

    def read(obs: Observation) -> str:
        seen = False
        for e in obs.elements:
            if e.name.strip() == item:
                seen = True
            elif seen and e.name.startswith(LATEST[lang]):
                return e.name[len(LATEST[lang]) :].split(" · ")[0]
        return ""

    return read


def _not_shown(target: Target):
    return lambda obs: target.resolve(obs) is None


def _same_number(answer: str | None, expected: float) -> bool:
    return any(abs(n - expected) < 0.005 for n in numbers_in(answer))


# -- plan pieces ----------------------------------------------------------------------
def search_steps(query: str, lang: str) -> list:
    """Tap the home search bar, type in the search field, press the keyboard's search key."""
    return [
        Tap(Target(SEARCH[lang], "link")),
        Fill(Target(SEARCH[lang], "searchbox"), query),
        Tap(Target(SEARCH_KEY[lang], "button", exact=True)),
    ]


def open_product_by_name(p: dict, lang: str) -> list:
    """Search with the product family's everyday word (p["query"]), then open the product."""
    return search_steps(p["query"], lang) + [Tap(Target(p["name"], "link", pick=first_priced))]


def swipe_until(region: dict, target: Target, lang: str, times: int) -> list:
    """Swipe a carousel left until `target` shows (at most `times` swipes)."""
    return [
        When(_not_shown(target), Swipe(Target(region[lang], "region", exact=True), "left"))
        for _ in range(times)
    ]


def _query(p: dict, lang: str) -> str:
    return FAMILY_QUERY[p["family"]][1 if lang == "zh" else 0]


def _product_params(p: dict) -> dict:
    return {"pid": p["id"], "name": p["name"]}


class MobileShopTemplate(TaskTemplate):
    app = "mobile_shop"


# -- action tasks -----------------------------------------------------------------------
class SearchCheapestSku(MobileShopTemplate):
    """搜索 -> 比价 -> choose the cheapest seller -> SKU sheet with a colour/size -> 加购."""

    template_id = "mobile_shop.search_cheapest_sku"

    def sample_params(self, data, rng, lang):
        tricky = [p for p in data["products"] if cheapest_offer(p) is not p["offers"][0]]
        p = rng.choice(tricky or data["products"])
        best = cheapest_offer(p)
        variant = rng.choice(p["variants"][1:])
        return {
            **_product_params(p),
            "query": _query(p, lang),
            "seller": best["seller"],
            "variant": variant,
            "qty0": cart_qty(data, p["id"], best["seller"], variant),
        }

    def instruction(self, p, lang):
        if lang == "zh":
            return f"帮我找“{p['name']}”，比比各家店铺的价格，在最便宜的那家把{p['variant']}的加入购物车"
        return (
            f"Find the {p['name']} and add one in {p['variant']} to my cart from whichever "
            f"seller has it cheapest."
        )

    def plan(self, p, lang):
        return open_product_by_name(p, lang) + [
            Tap(Target(COMPARE[lang], "link")),
            Tap(Target(role="link", pick=cheapest)),
            Tap(Target(ADD_TO_CART[lang], "button", exact=True)),
            Tap(Target(p["variant"], "radio", exact=True)),
            Tap(Target(CONFIRM[lang], "button", exact=True)),
            Finish(),
        ]

    def success(self, p, state, answer, lang):
        return cart_qty(state, p["pid"], p["seller"], p["variant"]) > p["qty0"]


class BannerAddPromoted(MobileShopTemplate):
    """Swipe the home banner to a promotion and add its item (default options)."""

    template_id = "mobile_shop.banner_add_promoted"

    def sample_params(self, data, rng, lang):
        b = rng.choice(data["banner"][1:])  # never the slide already showing
        p = find_product(data, b["pid"])
        return {
            **_product_params(p),
            "label": b["label"],
            "slides": len(data["banner"]),
            "qty0": cart_qty(data, p["id"]),
        }

    def instruction(self, p, lang):
        if lang == "zh":
            return f"首页轮播图里有个“{p['label']}”活动，把活动里的那件商品加入购物车"
        return f"There's a {p['label']} promotion on the home banner. Add that item to my cart."

    def plan(self, p, lang):
        sep = "：" if lang == "zh" else ": "
        promo = Target(f"{p['label']}{sep}", "link")
        return swipe_until(BANNER, promo, lang, p["slides"] - 1) + [
            Tap(promo),
            Tap(Target(ADD_TO_CART[lang], "button", exact=True)),
            Tap(Target(CONFIRM[lang], "button", exact=True)),
            Finish(),
        ]

    def success(self, p, state, answer, lang):
        return cart_qty(state, p["pid"]) > p["qty0"]


class SheetQuantity(MobileShopTemplate):
    """The SKU sheet: pick a colour/size and step the quantity up before adding."""

    template_id = "mobile_shop.sheet_quantity"

    def sample_params(self, data, rng, lang):
        p = rng.choice(data["products"])
        variant = rng.choice(p["variants"][1:])
        seller = p["offers"][0]["seller"]
        return {
            **_product_params(p),
            "query": _query(p, lang),
            "variant": variant,
            "qty": rng.randint(2, 3),
            "qty0": cart_qty(data, p["id"], seller, variant),
            "seller": seller,
        }

    def instruction(self, p, lang):
        if lang == "zh":
            return f"把{p['qty']}件{p['variant']}的“{p['name']}”加入购物车"
        return f"Add {p['qty']} of the {p['name']} in {p['variant']} to my cart."

    def plan(self, p, lang):
        return open_product_by_name(p, lang) + [
            Tap(Target(ADD_TO_CART[lang], "button", exact=True)),
            Tap(Target(p["variant"], "radio", exact=True)),
            *[Tap(Target(INCREASE[lang], "button", exact=True)) for _ in range(p["qty"] - 1)],
            Tap(Target(CONFIRM[lang], "button", exact=True)),
            Finish(),
        ]

    def success(self, p, state, answer, lang):
        return cart_qty(state, p["pid"], p["seller"], p["variant"]) - p["qty0"] == p["qty"]


class CartLongPress(MobileShopTemplate):
    """Long-press a cart item and pick an entry of its menu."""

    menu_item: dict = {}

    def sample_params(self, data, rng, lang):
        line = rng.choice(data["cart"])
        p = find_product(data, line["pid"])
        return {**_product_params(p), "lines0": len(data["cart"])}

    def plan(self, p, lang):
        return [
            Tap(Target(CART_TAB[lang], "link")),
            Tap(Target(p["name"], "link"), kind=ActionType.LONG_PRESS),
            Tap(Target(self.menu_item[lang], "menuitem", exact=True)),
            Finish(),
        ]


class CartDelete(CartLongPress):
    template_id = "mobile_shop.cart_delete"
    menu_item = DELETE

    def instruction(self, p, lang):
        if lang == "zh":
            return f"把购物车里的“{p['name']}”删掉"
        return f"Remove the {p['name']} from my cart."

    def success(self, p, state, answer, lang):
        return cart_qty(state, p["pid"]) == 0 and len(state["cart"]) == p["lines0"] - 1


class CartToFavorites(CartLongPress):
    template_id = "mobile_shop.cart_to_favorites"
    menu_item = TO_FAVORITES

    def instruction(self, p, lang):
        if lang == "zh":
            return f"把购物车里的“{p['name']}”移入收藏"
        return f"Move the {p['name']} from my cart to my favorites."

    def success(self, p, state, answer, lang):
        return cart_qty(state, p["pid"]) == 0 and p["pid"] in state["favorites"]


class ClaimCoupon(MobileShopTemplate):
    template_id = "mobile_shop.claim_coupon"

    def sample_params(self, data, rng, lang):
        c = rng.choice([c for c in data["coupons"] if not c["claimed"]])
        return {"code": c["code"], "title": c["title"]}

    def instruction(self, p, lang):
        if lang == "zh":
            return f"去领券中心领一张“{p['title']}”的优惠券"
        return f'Grab the "{p["title"]}" coupon from the coupon center.'

    def plan(self, p, lang):
        claim = f"领取{p['title']}" if lang == "zh" else f"Claim {p['title']}"
        return [Tap(Target(COUPON_CENTER[lang], "link")), Tap(Target(claim, "button", exact=True)), Finish()]

    def success(self, p, state, answer, lang):
        return any(c["code"] == p["code"] and c["claimed"] for c in state["coupons"])


class FavoriteItem(MobileShopTemplate):
    template_id = "mobile_shop.favorite_item"

    def sample_params(self, data, rng, lang):
        p = rng.choice([p for p in data["products"] if p["id"] not in data["favorites"]])
        return {**_product_params(p), "query": _query(p, lang)}

    def instruction(self, p, lang):
        if lang == "zh":
            return f"收藏“{p['name']}”，我回头再买"
        return f"Save the {p['name']} to my favorites for later."

    def plan(self, p, lang):
        return open_product_by_name(p, lang) + [Tap(Target(FAVORITE[lang], "button", exact=True)), Finish()]

    def success(self, p, state, answer, lang):
        return p["pid"] in state["favorites"]


# -- information tasks ----------------------------------------------------------------
class CompareTwoSellers(MobileShopTemplate):
    """比价: which of two named sellers is cheaper, and at what price."""

    template_id = "mobile_shop.compare_two_sellers"

    def sample_params(self, data, rng, lang):
        p = rng.choice(
            [p for p in data["products"] if len(p["offers"]) >= 3]
            or [p for p in data["products"] if len(p["offers"]) >= 2]
        )
        a, b = rng.sample(p["offers"], 2)
        return {**_product_params(p), "query": _query(p, lang), "sellers": [a["seller"], b["seller"]]}

    def instruction(self, p, lang):
        a, b = p["sellers"]
        if lang == "zh":
            return f"“{p['name']}”在{a}和{b}哪家更便宜？告诉我店铺和价格"
        return f"Is the {p['name']} cheaper at {a} or at {b}? Tell me the store and its price."

    def plan(self, p, lang):
        return open_product_by_name(p, lang) + [
            Tap(Target(COMPARE[lang], "link")),
            Answer(read_lower_of(p["sellers"], lang)),
        ]

    def success(self, p, state, answer, lang):
        prod = find_product(state, p["pid"])
        offers = [o for o in prod["offers"] if o["seller"] in p["sellers"]]
        best = min(offers, key=lambda o: o["price"])
        return bool(answer) and best["seller"] in answer and _same_number(answer, best["price"])


class PhotoSpec(MobileShopTemplate):
    """Swipe the product photos to the specification card and read the weight."""

    template_id = "mobile_shop.photo_spec"

    def sample_params(self, data, rng, lang):
        p = rng.choice(data["products"])
        return {**_product_params(p), "query": _query(p, lang)}

    def instruction(self, p, lang):
        if lang == "zh":
            return f"“{p['name']}”有多重？商品图片里有规格参数"
        return f"How much does the {p['name']} weigh? The specs are in its photos."

    def plan(self, p, lang):
        spec = Target("重量：" if lang == "zh" else "Weight:")
        return (
            open_product_by_name(p, lang) + swipe_until(PHOTOS, spec, lang, 2) + [Answer(read_weight(lang))]
        )

    def success(self, p, state, answer, lang):
        prod = find_product(state, p["pid"])
        return _same_number(answer, prod["weight_g"])


class OrdersLatestTracking(MobileShopTemplate):
    """Pull the orders list down to refresh, then read the parcel's newest tracking event."""

    template_id = "mobile_shop.orders_latest_tracking"

    def sample_params(self, data, rng, lang):
        order = in_transit(data)
        p = find_product(data, order["pid"])
        return {**_product_params(p), "order": order["id"]}

    def instruction(self, p, lang):
        if lang == "zh":
            return f"刷新一下我的订单，告诉我“{p['name']}”现在的最新物流状态"
        return f"Refresh my orders and tell me the latest tracking status of the {p['name']}."

    def plan(self, p, lang):
        return [
            Tap(Target(ME_TAB[lang], "link", exact=True)),
            Tap(Target(MY_ORDERS[lang], "link", exact=True)),
            Swipe(Target(ORDERS_LIST[lang], "main", exact=True), "down"),
            Answer(read_latest_update(p["name"], lang)),
        ]

    def success(self, p, state, answer, lang):
        order = next(o for o in state["orders"] if o["id"] == p["order"])
        return (
            state["order_refreshes"] >= 1 and bool(answer) and latest_status(order).lower() in answer.lower()
        )


TEMPLATES = [
    SearchCheapestSku(),
    CompareTwoSellers(),
    BannerAddPromoted(),
    PhotoSpec(),
    CartDelete(),
    CartToFavorites(),
    OrdersLatestTracking(),
    ClaimCoupon(),
    SheetQuantity(),
    FavoriteItem(),
]
