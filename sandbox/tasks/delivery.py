"""Task templates for the delivery app (QuickBite in English, 团团外卖 in Chinese).

Plans name elements by role and accessible name only. Where a task says "the
cheapest" or "the lowest delivery fee", the oracle reads the prices and fees in
the live elements' names (shop cards are links named "<shop>，评分4.8，…，配送费¥3"
or "<shop>, rated 4.7, …, $1.99 delivery fee"), the way a user compares them.

Every template starts on the home page of a phone. Targets inside the page's
one scroll area (`main`) are scrolled into that area before they are touched;
controls outside it (tab bar, bottom bars, sheets, menus, the soft keyboard)
are `TapFixed` steps: see `PhoneOracle`.
"""

from __future__ import annotations

from schemas.actions import ActionType

from ..apps.delivery import (
    ACTIVE,
    add_label,
    cart_qty,
    find_shop,
    options_label,
    search,
    shop_dishes,
    status_label,
    tableware_label,
)
from ._delivery_screen import (
    ADD_TO_CART,
    ADDRESS_ROW,
    ADDRESSES_LINK,
    BANNER,
    DELETE_ORDER,
    KEY_DONE,
    KEY_SEARCH,
    NOTE_BOX,
    NOTES,
    ORDERS_AREA,
    REMOVE_LINE,
    REORDER,
    SEARCH_BOX,
    SUBMIT,
    TABLEWARE_ROW,
    PhoneOracle,
    TapFixed,
    cheapest,
    lowest_fee_shop,
    lowest_on_screen,
    numbers_in,
    order_card,
    promo_threshold,
    shop_card,
    starts_with,
    status_heading,
    tab,
)
from .base import Answer, Fill, Finish, Swipe, Tap, Target, TaskTemplate


def _l(d: dict, lang: str) -> str:
    return d[lang]


def _norm(text: str | None) -> str:
    return " ".join((text or "").lower().split())


class DeliveryTemplate(TaskTemplate):
    app = "delivery"

    def oracle(self, task):
        return PhoneOracle(self.plan(task.params, task.language), lang=task.language)


def _with_options(shop: dict) -> list[dict]:
    return [d for d in shop_dishes(shop) if d["options"]]


def _plain(shop: dict) -> list[dict]:
    return [d for d in shop_dishes(shop) if not d["options"]]


def _active_order(data: dict) -> dict:
    return next(o for o in data["orders"] if o["status"] in ACTIVE)


# -- templates -----------------------------------------------------------------------------
class AddDishWithOptions(DeliveryTemplate):
    """规格 sheet: pick 份量/辣度 (size/spice, cup/sugar) and add to the cart."""

    template_id = "delivery.add_dish_with_options"

    def sample_params(self, data, rng, lang):
        shop = rng.choice([s for s in data["shops"] if _with_options(s)])
        dish = rng.choice(_with_options(shop))
        choices = [
            rng.choice(o["choices"][1:]) if k == 0 else rng.choice(o["choices"])
            for k, o in enumerate(dish["options"])
        ]
        return {
            "shop": shop["id"],
            "shop_name": shop["name"],
            "dish": dish["id"],
            "dish_name": dish["name"],
            "choices": choices,
            "defaults": [o["choices"][0] for o in dish["options"]],
            "qty0": cart_qty(data, shop["id"], dish["id"], choices),
        }

    def instruction(self, p, lang):
        if lang == "zh":
            return f"在“{p['shop_name']}”点一份{p['dish_name']}，要{'、'.join(p['choices'])}，先加入购物车"
        return f"Add a {p['dish_name']} from {p['shop_name']} to my cart: {', '.join(p['choices'])}."

    def plan(self, p, lang):
        picks = [
            TapFixed(Target(c, "radio", exact=True))
            for c, default in zip(p["choices"], p["defaults"])
            if c != default
        ]
        return [
            Tap(shop_card(p["shop_name"], lang)),
            Tap(Target(options_label(p["dish_name"], lang), "button", exact=True)),
            *picks,
            TapFixed(Target(_l(ADD_TO_CART, lang), "button", exact=True)),
            Finish(),
        ]

    def success(self, p, state, answer, lang):
        return cart_qty(state, p["shop"], p["dish"], p["choices"]) > p["qty0"]


def _cart_params(data: dict, rng) -> dict:
    sid = rng.choice(sorted(data["carts"]))
    shop = find_shop(data, sid)
    return {
        "shop": sid,
        "shop_name": shop["name"],
        "lines": [[ln["dish"], ln["choices"], ln["qty"]] for ln in data["carts"][sid]],
    }


def _submitted(p: dict, state: dict) -> list[dict]:
    """Orders for the task's shop waiting for payment, holding exactly its cart lines."""
    want = sorted((d, c, q) for d, c, q in map(tuple, p["lines"]))
    out = []
    for o in state["orders"]:
        got = sorted((i["dish"], i["choices"], i["qty"]) for i in o["items"])
        if o["shop"] == p["shop"] and o["status"] == "pending_payment" and got == want:
            out.append(o)
    return out


def _checkout_start(p: dict, lang: str) -> list:
    checkout = f"去结算：{p['shop_name']}" if lang == "zh" else f"Checkout {p['shop_name']}"
    return [TapFixed(tab("carts", lang)), Tap(Target(checkout, "link", exact=True))]


def _tableware_steps(n: int, lang: str) -> list:
    return [
        Tap(Target(_l(TABLEWARE_ROW, lang), "button")),
        TapFixed(Target(tableware_label(n, lang), "button", exact=True)),
    ]


class CheckoutWithNote(DeliveryTemplate):
    """备注 through the soft keyboard, 餐具数量 in a sheet, then submit unpaid (待支付)."""

    template_id = "delivery.checkout_with_note"

    def sample_params(self, data, rng, lang):
        return {**_cart_params(data, rng), "note": rng.choice(NOTES[lang]), "tableware": rng.randint(1, 3)}

    def instruction(self, p, lang):
        if lang == "zh":
            return (
                f"把购物车里“{p['shop_name']}”的菜下单，备注“{p['note']}”，餐具要{p['tableware']}份，"
                f"先提交订单，不要付款"
            )
        n = p["tableware"]
        return (
            f'Check out my {p["shop_name"]} cart with the note "{p["note"]}" and {n} '
            f"set{'s' if n > 1 else ''} of utensils. Submit the order but don't pay yet."
        )

    def plan(self, p, lang):
        return [
            *_checkout_start(p, lang),
            Fill(Target(_l(NOTE_BOX, lang), "textbox"), p["note"]),
            TapFixed(Target(_l(KEY_DONE, lang), "button", exact=True)),
            *_tableware_steps(p["tableware"], lang),
            TapFixed(Target(_l(SUBMIT, lang), "button", exact=True)),
            Finish(),
        ]

    def success(self, p, state, answer, lang):
        return (
            any(o["note"] == p["note"] and o["tableware"] == p["tableware"] for o in _submitted(p, state))
            and not state["payments"]
        )


class CheckoutToOtherAddress(DeliveryTemplate):
    """Choose a non-default address on the confirm-order page, then submit unpaid."""

    template_id = "delivery.checkout_other_address"

    def sample_params(self, data, rng, lang):
        addr = rng.choice([a for a in data["addresses"] if a["id"] != data["default_address"]])
        return {
            **_cart_params(data, rng),
            "address": addr["id"],
            "tag": addr["tag"],
            "tableware": rng.choice([0, 1, 2]),
        }

    def instruction(self, p, lang):
        tw = tableware_label(p["tableware"], lang)
        if lang == "zh":
            return f"把“{p['shop_name']}”购物车里的菜送到我的{p['tag']}地址，餐具选“{tw}”，提交订单但先别付款"
        return (
            f"Send my {p['shop_name']} cart to my {p['tag']} address with "
            f"{tw.lower()}. Submit the order, but don't pay for it."
        )

    def plan(self, p, lang):
        pick = f"选择地址：{p['tag']}，" if lang == "zh" else f"Deliver to {p['tag']}:"
        return [
            *_checkout_start(p, lang),
            Tap(Target(_l(ADDRESS_ROW, lang), "link")),
            Tap(Target(pick, "button")),
            *_tableware_steps(p["tableware"], lang),
            TapFixed(Target(_l(SUBMIT, lang), "button", exact=True)),
            Finish(),
        ]

    def success(self, p, state, answer, lang):
        return (
            any(
                o["address"] == p["address"] and o["tableware"] == p["tableware"]
                for o in _submitted(p, state)
            )
            and not state["payments"]
        )


class LowestFeeInCategory(DeliveryTemplate):
    """Information: compare 配送费 across a category's shops."""

    template_id = "delivery.lowest_fee_in_category"

    def sample_params(self, data, rng, lang):
        cat = rng.choice(data["categories"])
        shops = [s for s in data["shops"] if s["category"] == cat["key"]]
        best = min(shops, key=lambda s: s["delivery_fee"])
        return {
            "category": cat["key"],
            "category_name": cat["name"],
            "shop": best["id"],
            "shop_name": best["name"],
            "fee": best["delivery_fee"],
            "others": [s["name"] for s in shops if s is not best],
        }

    def instruction(self, p, lang):
        if lang == "zh":
            return f"看看“{p['category_name']}”里哪家店的配送费最低？告诉我店名"
        return f"Which {p['category_name']} place has the lowest delivery fee? Tell me its name."

    def plan(self, p, lang):
        return [Tap(Target(p["category_name"], "link", exact=True)), Answer(lowest_fee_shop)]

    def success(self, p, state, answer, lang):
        a = _norm(answer)
        return _norm(p["shop_name"]) in a and not any(_norm(o) in a for o in p["others"])


def _banner_params(data: dict, rng, want=lambda shop: True) -> dict:
    # Never the first slide: a swipe is needed.
    k = rng.choice(
        [k for k in range(1, len(data["banners"])) if want(find_shop(data, data["banners"][k]["shop"]))]
    )
    b = data["banners"][k]
    shop = find_shop(data, b["shop"])
    return {
        "slide": k,
        "shop": shop["id"],
        "shop_name": shop["name"],
        "threshold": b["threshold"],
        "off": b["off"],
    }


def _swipes(p: dict, lang: str) -> list:
    return [Swipe(Target(_l(BANNER, lang), "region"), "left")] * p["slide"]


class BannerPromoThreshold(DeliveryTemplate):
    """Information: swipe the 轮播 banner to a shop's 满减 and read its threshold."""

    template_id = "delivery.banner_promo_threshold"

    def sample_params(self, data, rng, lang):
        return _banner_params(data, rng)

    def instruction(self, p, lang):
        if lang == "zh":
            return f"首页轮播图里有“{p['shop_name']}”的满减活动，划过去看看，满多少元才能减？"
        return (
            f"Swipe through the deals on the home screen to the {p['shop_name']} one. "
            f"How much do I have to spend to get it?"
        )

    def plan(self, p, lang):
        shop = p["shop_name"]
        return [*_swipes(p, lang), Answer(lambda obs: promo_threshold(obs, shop, lang))]

    def success(self, p, state, answer, lang):
        return bool(numbers_in(answer)) and numbers_in(answer)[0] == p["threshold"]


class BannerShopAdd(DeliveryTemplate):
    """Swipe the banner, open the advertised shop, add a dish with one tap (+)."""

    template_id = "delivery.banner_shop_add"

    def sample_params(self, data, rng, lang):
        p = _banner_params(data, rng, want=_plain)
        dish = rng.choice(_plain(find_shop(data, p["shop"])))
        return {
            **p,
            "dish": dish["id"],
            "dish_name": dish["name"],
            "qty0": cart_qty(data, p["shop"], dish["id"]),
        }

    def instruction(self, p, lang):
        if lang == "zh":
            return f"首页轮播里有“{p['shop_name']}”的满减，点进这家店，加一份{p['dish_name']}到购物车"
        return (
            f"Open the {p['shop_name']} deal from the home screen carousel and add a "
            f"{p['dish_name']} to my cart."
        )

    def plan(self, p, lang):
        slide = f"{p['shop_name']} 满" if lang == "zh" else f"{p['shop_name']}: $"
        return [
            *_swipes(p, lang),
            Tap(Target(role="link", pick=starts_with(slide))),
            Tap(Target(add_label(p["dish_name"], lang), "button", exact=True)),
            Finish(),
        ]

    def success(self, p, state, answer, lang):
        return cart_qty(state, p["shop"], p["dish"]) > p["qty0"]


class ReorderPastOrder(DeliveryTemplate):
    """Long-press a delivered order: 再来一单 puts its items back in the cart."""

    template_id = "delivery.reorder_past_order"

    def sample_params(self, data, rng, lang):
        order = rng.choice([o for o in data["orders"] if o["status"] == "delivered"])
        shop = find_shop(data, order["shop"])
        return {
            "order": order["id"],
            "shop": shop["id"],
            "shop_name": shop["name"],
            "items": [
                [i["dish"], i["choices"], i["qty"], cart_qty(data, shop["id"], i["dish"], i["choices"])]
                for i in order["items"]
            ],
        }

    def instruction(self, p, lang):
        if lang == "zh":
            return f"把之前在“{p['shop_name']}”点过的那单再来一单，放进购物车就行"
        return f"Reorder my past {p['shop_name']} order. Just put it back in my cart."

    def plan(self, p, lang):
        return [
            TapFixed(tab("orders", lang)),
            Tap(order_card(p["shop_name"], lang, "delivered"), kind=ActionType.LONG_PRESS),
            TapFixed(Target(_l(REORDER, lang), "menuitem", exact=True)),
            Finish(),
        ]

    def success(self, p, state, answer, lang):
        return all(cart_qty(state, p["shop"], d, c) >= q0 + q for d, c, q, q0 in p["items"])


class DeleteOrder(DeliveryTemplate):
    """Long-press a finished order: 删除订单."""

    template_id = "delivery.delete_order"

    def sample_params(self, data, rng, lang):
        order = rng.choice([o for o in data["orders"] if o["status"] in ("delivered", "cancelled")])
        shop = find_shop(data, order["shop"])
        return {"order": order["id"], "shop_name": shop["name"], "status": order["status"]}

    def instruction(self, p, lang):
        status = status_label(p["status"], lang)
        if lang == "zh":
            return f"把订单里那条{status}的“{p['shop_name']}”订单删掉"
        return f"Delete the {status.lower()} {p['shop_name']} order from my order list."

    def plan(self, p, lang):
        return [
            TapFixed(tab("orders", lang)),
            Tap(order_card(p["shop_name"], lang, p["status"]), kind=ActionType.LONG_PRESS),
            TapFixed(Target(_l(DELETE_ORDER, lang), "menuitem", exact=True)),
            Finish(),
        ]

    def success(self, p, state, answer, lang):
        deleted = [o["id"] for o in state["orders"] if o["deleted"]]
        return deleted == [p["order"]]


class RefreshDeliveryStatus(DeliveryTemplate):
    """Pull to refresh the orders page, then read the order's new 配送状态."""

    template_id = "delivery.refresh_delivery_status"

    def sample_params(self, data, rng, lang):
        order = _active_order(data)
        shop = find_shop(data, order["shop"])
        return {"order": order["id"], "shop_name": shop["name"], "status0": order["status"]}

    def instruction(self, p, lang):
        if lang == "zh":
            return f"下拉刷新一下订单页，告诉我“{p['shop_name']}”那单现在配送到哪一步了"
        return f"Refresh my orders and tell me where my {p['shop_name']} order is now."

    def plan(self, p, lang):
        return [
            TapFixed(tab("orders", lang)),
            Swipe(Target(_l(ORDERS_AREA, lang), "main"), "down"),
            # The order's own page: read after the refresh, whatever the list showed.
            Tap(
                Target(
                    role="link",
                    pick=starts_with(f"{p['shop_name']}{'订单，' if lang == 'zh' else ' order, '}"),
                )
            ),
            Answer(lambda obs: status_heading(obs, lang)),
        ]

    def success(self, p, state, answer, lang):
        order = next(o for o in state["orders"] if o["id"] == p["order"])
        return (
            state["refreshes"] >= 1
            and order["status"] != p["status0"]
            and _norm(status_label(order["status"], lang)) in _norm(answer)
        )


class SearchCheapestDish(DeliveryTemplate):
    """搜索 with the soft keyboard's search key; add the cheapest result."""

    template_id = "delivery.search_cheapest_dish"

    def sample_params(self, data, rng, lang):
        names = sorted({d["name"] for s in data["shops"] for d in shop_dishes(s)})
        queries = []
        for q in names:
            rows = search(data, q)
            # Dishes sold by several shops, and no shop named like the dish.
            if len(rows) >= 2 and all(q.lower() in r["dish"]["name"].lower() for r in rows):
                queries.append((q, rows))
        q, rows = rng.choice(queries)
        best = min(rows, key=lambda r: r["dish"]["price"])
        return {
            "query": q,
            "shop": best["shop"]["id"],
            "shop_name": best["shop"]["name"],
            "dish": best["dish"]["id"],
            "dish_name": best["dish"]["name"],
            "has_options": bool(best["dish"]["options"]),
            "qty0": cart_qty(data, best["shop"]["id"], best["dish"]["id"]),
        }

    def instruction(self, p, lang):
        if lang == "zh":
            return f"搜一下“{p['query']}”，把最便宜的那一份加入购物车"
        return f'Search for "{p["query"]}" and add the cheapest one to my cart.'

    def plan(self, p, lang):
        if p["has_options"]:  # the sheet's defaults are fine: the task names no options
            add = [
                Tap(Target(options_label(p["dish_name"], lang), "button", exact=True)),
                TapFixed(Target(_l(ADD_TO_CART, lang), "button", exact=True)),
            ]
        else:
            add = [Tap(Target(add_label(p["dish_name"], lang), "button", exact=True))]
        return [
            Fill(Target(_l(SEARCH_BOX, lang), "searchbox"), p["query"]),
            TapFixed(Target(_l(KEY_SEARCH, lang), "button", exact=True, pick=lowest_on_screen)),
            Tap(Target(p["query"], "link", pick=cheapest)),
            *add,
            Finish(),
        ]

    def success(self, p, state, answer, lang):
        return cart_qty(state, p["shop"], p["dish"]) > p["qty0"]


class ChangeDefaultAddress(DeliveryTemplate):
    template_id = "delivery.change_default_address"

    def sample_params(self, data, rng, lang):
        addr = rng.choice([a for a in data["addresses"] if a["id"] != data["default_address"]])
        return {"address": addr["id"], "tag": addr["tag"]}

    def instruction(self, p, lang):
        if lang == "zh":
            return f"把默认收货地址改成“{p['tag']}”的地址"
        return f"Make my {p['tag']} address the default delivery address."

    def plan(self, p, lang):
        button = f"设为默认：{p['tag']}" if lang == "zh" else f"Set {p['tag']} as default"
        return [
            TapFixed(tab("account", lang)),
            Tap(Target(_l(ADDRESSES_LINK, lang), "link", exact=True)),
            Tap(Target(button, "button", exact=True)),
            Finish(),
        ]

    def success(self, p, state, answer, lang):
        return state["default_address"] == p["address"]


class RemoveCartItem(DeliveryTemplate):
    """Long-press a cart line: 删除."""

    template_id = "delivery.remove_cart_item"

    def sample_params(self, data, rng, lang):
        sid = rng.choice(sorted(data["carts"]))
        shop = find_shop(data, sid)
        line = rng.choice(data["carts"][sid])
        dish = next(d for d in shop_dishes(shop) if d["id"] == line["dish"])
        return {
            "shop": sid,
            "shop_name": shop["name"],
            "dish": dish["id"],
            "dish_name": dish["name"],
            "choices": line["choices"],
            "lines0": len(data["carts"][sid]),
        }

    def instruction(self, p, lang):
        if lang == "zh":
            return f"把购物车里“{p['shop_name']}”的{p['dish_name']}删掉"
        return f"Remove the {p['dish_name']} from my {p['shop_name']} cart."

    def plan(self, p, lang):
        if p["choices"]:
            sep = ("（", "，", "）") if lang == "zh" else (" (", ", ", ")")
            line = p["dish_name"] + sep[0] + sep[1].join(p["choices"]) + sep[2]
        else:
            line = f"{p['dish_name']} ×"
        return [
            TapFixed(tab("carts", lang)),
            Tap(Target(role="listitem", pick=starts_with(line)), kind=ActionType.LONG_PRESS),
            TapFixed(Target(_l(REMOVE_LINE, lang), "menuitem", exact=True)),
            Finish(),
        ]

    def success(self, p, state, answer, lang):
        lines = state["carts"].get(p["shop"], [])
        return len(lines) == p["lines0"] - 1 and not any(
            ln["dish"] == p["dish"] and ln["choices"] == p["choices"] for ln in lines
        )


TEMPLATES = [
    AddDishWithOptions(),
    CheckoutWithNote(),
    CheckoutToOtherAddress(),
    LowestFeeInCategory(),
    BannerPromoThreshold(),
    BannerShopAdd(),
    ReorderPastOrder(),
    DeleteOrder(),
    RefreshDeliveryStatus(),
    SearchCheapestDish(),
    ChangeDefaultAddress(),
    RemoveCartItem(),
]
