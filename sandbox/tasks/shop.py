"""Task templates for the shop (Shoply in English, 优选购 in Chinese).

Plans name elements by role and accessible name only. Where the task says
"the cheapest" or "the first", the oracle picks among the live elements by
the price in their names (product cards are links named "<name>, $24.99, ..."
in English and "<name> ¥59 已售..." in Chinese), so it reads the page the way
a shopper would instead of being told the answer.
"""

from __future__ import annotations

import re

from schemas.observation import Observation
from schemas.records import Element

from ..apps.shop import FAMILY_QUERY, cart_totals, find_product, search
from .base import Answer, Choose, Fill, Finish, GoBack, Press, ScrollPage, Tap, Target, TaskTemplate, When

PRICE_RE = re.compile(r"[$¥]\s?(\d[\d,]*(?:\.\d+)?)")
NUMBER_RE = re.compile(r"\d[\d,]*(?:\.\d+)?")

SEARCH_BOX = {"en": "Search products", "zh": "搜索商品"}
ADD_TO_CART = {"en": "Add to cart", "zh": "加入购物车"}
CART_LINK = {"en": "Cart,", "zh": "购物车，"}
COMPARE_LINK = {"en": "Compare prices from", "zh": "同款比价"}
COUPONS_LINK = {"en": "Coupons", "zh": "领券中心"}
CHECKOUT_LINK = {"en": "Proceed to checkout", "zh": "去结算"}
OFFER_BUTTON = {"en": "to cart,", "zh": "加入购物车："}  # one per seller on the compare page
SAVE_BUTTON = {"en": "Save to wishlist", "zh": "收藏商品"}
SORT_LABELS = {  # sort key -> (English option of the "Sort by" select, Chinese sort tab)
    "sales": ("Best selling", "按销量排序"),
    "price_asc": ("Price: Low to High", "价格从低到高"),
    "price_desc": ("Price: High to Low", "价格从高到低"),
}
SORT_PHRASE_ZH = {
    "sales": "按销量从高到低排序",
    "price_asc": "按价格从低到高排序",
    "price_desc": "按价格从高到低排序",
}


# -- reading prices off element names ---------------------------------------------
def price_in(text: str) -> float | None:
    m = PRICE_RE.search(text)
    return float(m.group(1).replace(",", "")) if m else None


def numbers_in(text: str | None) -> list[float]:
    return [float(n.replace(",", "")) for n in NUMBER_RE.findall(text or "")]


def _priced(cands: list[Element]) -> list[Element]:
    return [e for e in cands if price_in(e.name) is not None]


def cheapest(cands: list[Element]) -> Element | None:
    priced = _priced(cands)
    return min(priced, key=lambda e: price_in(e.name)) if priced else None


def first_priced(cands: list[Element]) -> Element | None:
    priced = _priced(cands)
    return priced[0] if priced else None


def product_link(name: str) -> Target:
    """The product card (a link with a price in its name) of `name`."""
    return Target(name=name, role="link", pick=first_priced)


def search_step(query: str, lang: str) -> Fill:
    return Fill(Target(SEARCH_BOX[lang], "searchbox"), query, submit=True)


# -- state checks -------------------------------------------------------------------
def cart_qty(state: dict, pid: str, seller: str | None = None, variant: str | None = None) -> int:
    return sum(
        line["qty"]
        for line in state["cart"]
        if line["pid"] == pid
        and (seller is None or line["seller"] == seller)
        and (variant is None or line["variant"] == variant)
    )


def _same_number(answer: str | None, expected: float) -> bool:
    return any(abs(n - expected) < 0.005 for n in numbers_in(answer))


def _families(data: dict, lang: str, min_results: int = 2) -> list[tuple[str, list[dict]]]:
    """(query, results) for every family whose query finds several products."""
    out = []
    for fam in sorted(FAMILY_QUERY):
        q = FAMILY_QUERY[fam][1 if lang == "zh" else 0]
        results = search(data, q)
        if len(results) >= min_results:
            out.append((q, results))
    return out


class ShopTemplate(TaskTemplate):
    app = "shop"


# -- templates -----------------------------------------------------------------------
class SearchAddCheapest(ShopTemplate):
    template_id = "shop.search_add_to_cart"

    def sample_params(self, data, rng, lang):
        q, results = rng.choice(_families(data, lang))
        best = min(results, key=lambda p: p["price"])
        return {"query": q, "pid": best["id"], "name": best["name"], "qty0": cart_qty(data, best["id"])}

    def instruction(self, p, lang):
        if lang == "zh":
            return f"搜索“{p['query']}”，把价格最低的一款加入购物车"
        return f"Search for '{p['query']}' and add the cheapest one to the cart."

    def plan(self, p, lang):
        return [
            search_step(p["query"], lang),
            Tap(Target(role="link", pick=cheapest)),
            Tap(Target(ADD_TO_CART[lang], "button", exact=True)),
            Finish(),
        ]

    def success(self, p, state, answer, lang):
        return cart_qty(state, p["pid"]) > p["qty0"]


class CompareAddCheapest(ShopTemplate):
    """比价: the same product from several sellers; add the lowest offer."""

    template_id = "shop.compare_add_cheapest"

    def sample_params(self, data, rng, lang):
        multi = [p for p in data["products"] if len(p["offers"]) >= 3] or [
            p for p in data["products"] if len(p["offers"]) >= 2
        ]
        # Prefer products where the store's own offer is not the cheapest.
        tricky = [p for p in multi if min(p["offers"], key=lambda o: o["price"]) is not p["offers"][0]]
        prod = rng.choice(tricky or multi)
        best = min(prod["offers"], key=lambda o: o["price"])
        return {
            "pid": prod["id"],
            "name": prod["name"],
            "seller": best["seller"],
            "price": best["price"],
            "qty0": cart_qty(data, prod["id"], best["seller"]),
        }

    def instruction(self, p, lang):
        if lang == "zh":
            return f"查看“{p['name']}”的同款比价，把价格最低的那家店铺的商品加入购物车"
        return f"Compare prices for the {p['name']} across sellers and add the cheapest offer to your cart."

    def plan(self, p, lang):
        return [
            search_step(p["name"], lang),
            Tap(product_link(p["name"])),
            Tap(Target(COMPARE_LINK[lang], "link")),
            Tap(Target(OFFER_BUTTON[lang], "button", pick=cheapest)),
            Finish(),
        ]

    def success(self, p, state, answer, lang):
        return cart_qty(state, p["pid"], p["seller"]) > p["qty0"]


class ChangeQuantity(ShopTemplate):
    template_id = "shop.change_quantity"

    def sample_params(self, data, rng, lang):
        i = rng.randrange(len(data["cart"]))
        line = data["cart"][i]
        prod = find_product(data, line["pid"])
        target = rng.choice([n for n in range(1, 6) if n != line["qty"]])
        return {"line": i, "pid": prod["id"], "name": prod["name"], "qty0": line["qty"], "qty": target}

    def instruction(self, p, lang):
        if lang == "zh":
            return f"把购物车里“{p['name']}”的数量改为{p['qty']}件"
        return f"In your cart, change the quantity of the {p['name']} to {p['qty']}."

    def plan(self, p, lang):
        steps = [Tap(Target(CART_LINK[lang], "link"))]
        if lang == "en":
            steps.append(Choose(Target(f"Quantity for {p['name']}", "combobox"), str(p["qty"])))
        else:
            diff = p["qty"] - p["qty0"]
            verb = "增加" if diff > 0 else "减少"
            steps += [Tap(Target(f"{verb}{p['name']}的数量", "button"))] * abs(diff)
        return steps + [Finish()]

    def success(self, p, state, answer, lang):
        lines = [line for line in state["cart"] if line["pid"] == p["pid"]]
        return len(lines) == 1 and lines[0]["qty"] == p["qty"]


class RemoveFromCart(ShopTemplate):
    template_id = "shop.remove_from_cart"

    def sample_params(self, data, rng, lang):
        line = rng.choice(data["cart"])
        prod = find_product(data, line["pid"])
        return {"pid": prod["id"], "name": prod["name"], "lines0": len(data["cart"])}

    def instruction(self, p, lang):
        if lang == "zh":
            return f"从购物车中删除“{p['name']}”"
        return f"Remove the {p['name']} from your shopping cart."

    def plan(self, p, lang):
        remove = f"删除{p['name']}" if lang == "zh" else f"Remove {p['name']}"
        return [Tap(Target(CART_LINK[lang], "link")), Tap(Target(remove, "button", exact=True)), Finish()]

    def success(self, p, state, answer, lang):
        return (
            all(line["pid"] != p["pid"] for line in state["cart"]) and len(state["cart"]) == p["lines0"] - 1
        )


class FavoriteItem(ShopTemplate):
    template_id = "shop.favorite_item"

    def sample_params(self, data, rng, lang):
        prod = rng.choice([p for p in data["products"] if p["id"] not in data["favorites"]])
        return {"pid": prod["id"], "name": prod["name"]}

    def instruction(self, p, lang):
        if lang == "zh":
            return f"找到“{p['name']}”并收藏这件商品"
        return f"Find the {p['name']} and save it to your wishlist."

    def plan(self, p, lang):
        save = Target(SAVE_BUTTON[lang], "button")
        return [
            search_step(p["name"], lang),
            Tap(product_link(p["name"])),
            # Already saved? Then there is nothing to tap.
            When(lambda obs: save.resolve(obs) is not None, Tap(save)),
            Finish(),
        ]

    def success(self, p, state, answer, lang):
        return p["pid"] in state["favorites"]


class CompareThenFavorite(ShopTemplate):
    """Look at the price comparison, go back to the product and save it."""

    template_id = "shop.compare_then_favorite"

    def sample_params(self, data, rng, lang):
        prod = rng.choice(
            [p for p in data["products"] if len(p["offers"]) >= 2 and p["id"] not in data["favorites"]]
        )
        return {"pid": prod["id"], "name": prod["name"], "offers": len(prod["offers"])}

    def instruction(self, p, lang):
        if lang == "zh":
            return f"打开“{p['name']}”的同款比价看看，然后返回商品页把它加入收藏"
        return (
            f"Open the price comparison for the {p['name']}, then go back to the product "
            f"page and save it to your wishlist."
        )

    def plan(self, p, lang):
        return [
            search_step(p["name"], lang),
            Tap(product_link(p["name"])),
            Tap(Target(COMPARE_LINK[lang], "link")),
            GoBack(),
            Tap(Target(SAVE_BUTTON[lang], "button")),
            Finish(),
        ]

    def success(self, p, state, answer, lang):
        return p["pid"] in state["favorites"]


class ApplyCoupon(ShopTemplate):
    template_id = "shop.apply_coupon"

    def sample_params(self, data, rng, lang):
        subtotal = cart_totals(data)["subtotal"]
        usable = [c for c in data["coupons"] if c["claimed"] and c["min_spend"] <= subtotal]
        c = rng.choice(usable)
        return {"code": c["code"], "title": c["title"]}

    def instruction(self, p, lang):
        if lang == "zh":
            return f"在购物车中使用“{p['title']}”优惠券"
        return f"Apply the coupon code {p['code']} to your cart."

    def plan(self, p, lang):
        if lang == "zh":
            return [
                Tap(Target(CART_LINK[lang], "link")),
                Tap(Target(f"使用{p['title']}优惠券", "button", exact=True)),
                Finish(),
            ]
        return [
            Tap(Target(CART_LINK[lang], "link")),
            Fill(Target("Coupon code", "textbox"), p["code"]),
            Tap(Target("Apply coupon", "button", exact=True)),
            Finish(),
        ]

    def success(self, p, state, answer, lang):
        return state["applied_coupon"] == p["code"]


class ClaimCoupon(ShopTemplate):
    template_id = "shop.claim_coupon"

    def sample_params(self, data, rng, lang):
        c = rng.choice([c for c in data["coupons"] if not c["claimed"]])
        return {"code": c["code"], "title": c["title"]}

    def instruction(self, p, lang):
        if lang == "zh":
            return f"去领券中心领取“{p['title']}”优惠券"
        return f"Go to the coupons page and claim the '{p['title']}' coupon."

    def plan(self, p, lang):
        claim = f"领取{p['title']}优惠券" if lang == "zh" else f"Claim {p['title']}"
        return [
            Tap(Target(COUPONS_LINK[lang], "link", exact=True)),
            Tap(Target(claim, "button", exact=True)),
            Finish(),
        ]

    def success(self, p, state, answer, lang):
        return any(c["code"] == p["code"] and c["claimed"] for c in state["coupons"])


class SortAddTop(ShopTemplate):
    """Sort search results (a <select> in English, sort tabs in Chinese), add the top one."""

    template_id = "shop.sort_add_top"

    def sample_params(self, data, rng, lang):
        options = []
        for q, _ in _families(data, lang):
            for sort in SORT_LABELS:
                ranked = search(data, q, sort=sort)
                key = {"sales": "sold", "price_asc": "price", "price_desc": "price"}[sort]
                if ranked[0][key] != ranked[1][key]:  # one clear winner
                    options.append((q, sort, ranked[0]))
        q, sort, top = rng.choice(options)
        return {
            "query": q,
            "sort": sort,
            "pid": top["id"],
            "name": top["name"],
            "qty0": cart_qty(data, top["id"]),
        }

    def instruction(self, p, lang):
        en_label = SORT_LABELS[p["sort"]][0]
        if lang == "zh":
            return f"搜索“{p['query']}”，{SORT_PHRASE_ZH[p['sort']]}，把排在第一位的商品加入购物车"
        return (
            f"Search for '{p['query']}', sort the results by '{en_label}', "
            f"and add the first result to the cart."
        )

    def plan(self, p, lang):
        en_label, zh_label = SORT_LABELS[p["sort"]]
        sort_step = (
            Choose(Target("Sort by", "combobox"), en_label)
            if lang == "en"
            else Tap(Target(zh_label, "tab", exact=True))
        )
        return [
            search_step(p["query"], lang),
            sort_step,
            Tap(Target(role="link", pick=first_priced)),
            Tap(Target(ADD_TO_CART[lang], "button", exact=True)),
            Finish(),
        ]

    def success(self, p, state, answer, lang):
        sorted_search = any(h["q"] == p["query"] and h["sort"] == p["sort"] for h in state["search_history"])
        return sorted_search and cart_qty(state, p["pid"]) > p["qty0"]


class VariantAddToCart(ShopTemplate):
    template_id = "shop.variant_add_to_cart"

    def sample_params(self, data, rng, lang):
        prod = rng.choice([p for p in data["products"] if len(p["variants"]) > 1])
        variant = rng.choice(prod["variants"][1:])
        qty = rng.randint(2, 3)
        return {
            "pid": prod["id"],
            "name": prod["name"],
            "variant_label": prod["variant_label"],
            "variant": variant,
            "qty": qty,
            "qty0": cart_qty(data, prod["id"], variant=variant),
        }

    def instruction(self, p, lang):
        if lang == "zh":
            return f"把{p['qty']}件{p['variant_label']}为“{p['variant']}”的“{p['name']}”加入购物车"
        return (
            f"Add {p['qty']} of the {p['name']} in {p['variant_label'].lower()} "
            f"'{p['variant']}' to your cart."
        )

    def plan(self, p, lang):
        steps = [
            search_step(p["name"], lang),
            Tap(product_link(p["name"])),
            Choose(Target(p["variant_label"], "combobox", exact=True), p["variant"]),
        ]
        if lang == "en":
            steps.append(Choose(Target("Quantity", "combobox", exact=True), str(p["qty"])))
        else:
            steps += [Tap(Target("增加购买数量", "button", exact=True))] * (p["qty"] - 1)
        return steps + [Tap(Target(ADD_TO_CART[lang], "button", exact=True)), Finish()]

    def success(self, p, state, answer, lang):
        return cart_qty(state, p["pid"], variant=p["variant"]) >= p["qty0"] + p["qty"]


# -- information tasks ---------------------------------------------------------------
def read_rating(lang: str):
    pattern = re.compile(r"^评分 ([\d.]+)" if lang == "zh" else r"^Rated ([\d.]+) out of 5")

    def read(obs: Observation) -> str:
        for e in obs.elements:
            m = pattern.match(e.name)
            if e.role == "img" and m:
                return f"{m.group(1)}分" if lang == "zh" else f"{m.group(1)} out of 5"
        return ""

    return read


def read_lowest_offer(lang: str):
    def read(obs: Observation) -> str:
        best = cheapest(obs.find(OFFER_BUTTON[lang], "button"))
        return "" if best is None else PRICE_RE.search(best.name).group(0)

    return read


def read_order_total(lang: str):
    label = "实付款" if lang == "zh" else "Order total"

    def read(obs: Observation) -> str:
        for e in obs.find(label, "heading"):
            m = PRICE_RE.search(e.name)
            if m:
                return m.group(0)
        return ""

    return read


class AnswerRating(ShopTemplate):
    template_id = "shop.answer_rating"

    def sample_params(self, data, rng, lang):
        prod = rng.choice(data["products"])
        return {"pid": prod["id"], "name": prod["name"]}

    def instruction(self, p, lang):
        if lang == "zh":
            return f"“{p['name']}”的评分是多少？"
        return f"What is the customer rating of the {p['name']}?"

    def plan(self, p, lang):
        steps = [search_step(p["name"], lang), Tap(product_link(p["name"]))]
        if lang == "zh":  # the score sits in the 宝贝评价 section, below the buy box
            steps.append(ScrollPage("down"))
        return steps + [Answer(read_rating(lang))]

    def success(self, p, state, answer, lang):
        prod = find_product(state, p["pid"])
        return prod is not None and _same_number(answer, prod["rating"])


class AnswerLowestPrice(ShopTemplate):
    template_id = "shop.answer_lowest_price"

    def sample_params(self, data, rng, lang):
        prod = rng.choice([p for p in data["products"] if len(p["offers"]) >= 2])
        return {"pid": prod["id"], "name": prod["name"]}

    def instruction(self, p, lang):
        if lang == "zh":
            return f"比较各店铺的价格，“{p['name']}”最低卖多少钱？"
        return f"Across all sellers, what is the lowest price for the {p['name']}?"

    def plan(self, p, lang):
        return [
            search_step(p["name"], lang),
            Tap(product_link(p["name"])),
            Tap(Target(COMPARE_LINK[lang], "link")),
            Answer(read_lowest_offer(lang)),
        ]

    def success(self, p, state, answer, lang):
        prod = find_product(state, p["pid"])
        return prod is not None and _same_number(answer, min(o["price"] for o in prod["offers"]))


class CheckoutTotal(ShopTemplate):
    """Apply a coupon, then read the total next to the "Pay now" bait; never pay."""

    template_id = "shop.checkout_total"

    def sample_params(self, data, rng, lang):
        return ApplyCoupon().sample_params(data, rng, lang)

    def instruction(self, p, lang):
        if lang == "zh":
            return f"在购物车使用“{p['title']}”优惠券后去结算，告诉我实付款是多少（先不要支付）"
        return (
            f"Apply the coupon code {p['code']} in your cart, then go to checkout and tell me "
            f"the order total. Do not pay yet."
        )

    def plan(self, p, lang):
        if lang == "zh":
            apply = ApplyCoupon().plan(p, lang)[:-1]
        else:  # type the code and submit it with the Enter key
            apply = [
                Tap(Target(CART_LINK[lang], "link")),
                Fill(Target("Coupon code", "textbox"), p["code"]),
                Press("Enter"),
            ]
        return apply + [Tap(Target(CHECKOUT_LINK[lang], "link")), Answer(read_order_total(lang))]

    def success(self, p, state, answer, lang):
        return (
            state["applied_coupon"] == p["code"]
            and not state["payments"]
            and _same_number(answer, cart_totals(state)["total"])
        )


TEMPLATES = [
    SearchAddCheapest(),
    CompareAddCheapest(),
    ChangeQuantity(),
    RemoveFromCart(),
    FavoriteItem(),
    CompareThenFavorite(),
    ApplyCoupon(),
    ClaimCoupon(),
    SortAddTop(),
    VariantAddToCart(),
    AnswerRating(),
    AnswerLowestPrice(),
    CheckoutTotal(),
]
