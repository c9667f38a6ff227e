"""The mobile shop's state model: the seeded session data (`initial_state`) and the
helpers that read it, shared by the pages and the task templates."""

from __future__ import annotations

import random

from ._mobile_shop_catalogue import (
    APP,
    CARRIERS,
    CATALOGUE,
    CITIES,
    COUPONS,
    COURIERS,
    FAMILY_QUERY,
    GIFT_RECIPIENT,
    ORIGINS,
    PINYIN,
    PROMOS,
    SELLERS,
    SHIPPING,
    SHOPPER,
    TRACKING,
    VARIANT_LABEL,
    VARIANTS,
)
from ._personal_data import Planted, address, phone


# -- seeded state ------------------------------------------------------------------
def _price(rng: random.Random, base: float, lang: str) -> float:
    value = base * rng.uniform(0.82, 1.12)
    return float(max(9, round(value))) if lang == "zh" else round(max(5, round(value)) - 0.01, 2)


def _distinct(rng: random.Random, base: float, lang: str, taken: set) -> float:
    price = _price(rng, base, lang)
    while price in taken:  # distinct offers, so "the cheapest" has one answer
        price = round(price + 1.0, 2)
    taken.add(price)
    return price


def initial_state(lang: str, seed: int) -> dict:
    """The app's data for one session: pure and deterministic in (lang, seed)."""
    if lang not in ("en", "zh"):
        raise ValueError(f"lang={lang!r}: expected 'en' or 'zh'")
    rng = random.Random(f"{APP}:{lang}:{seed}")
    zh = lang == "zh"
    li = 1 if zh else 0
    planted = Planted()

    products = []
    for i, (key, family, en, cn, usd, cny, icon, vkind, weight) in enumerate(CATALOGUE):
        brand = cn[:2] if zh else en.split()[0]
        taken: set = set()
        sellers = [SELLERS[lang][0]] + rng.sample(SELLERS[lang][1:], rng.randint(1, 3))
        offers = []
        for s in sellers:
            offers.append(
                {
                    "seller": s.format(brand=brand),
                    "price": _distinct(rng, cny if zh else usd, lang, taken),
                    "shipping": rng.choice(SHIPPING[lang]),
                    "rating": round(rng.uniform(4.2, 5.0), 1),
                    "sold": rng.randint(30, 60000) if zh else rng.randint(5, 6000),
                }
            )
        products.append(
            {
                "id": f"m{i + 1}",
                "key": key,
                "family": family,
                "name": cn if zh else en,
                "brand": brand,
                "icon": icon,
                "offers": offers,
                "list_price": round(max(o["price"] for o in offers) * rng.uniform(1.2, 1.5), 0 if zh else 2),
                "variant_label": VARIANT_LABEL[vkind][li],
                "variants": list(VARIANTS[vkind][li]),
                "weight_g": rng.randint(*weight),
                "rating": round(rng.uniform(4.0, 4.9), 1),
            }
        )

    banner = [
        {"label": label, "pid": p["id"]}
        for label, p in zip(PROMOS[lang], rng.sample(products, len(PROMOS[lang])))
    ]
    feed = [p["id"] for p in rng.sample(products, 8)]

    cart = [
        {
            "pid": p["id"],
            "seller": p["offers"][0]["seller"],
            "variant": p["variants"][0],
            "qty": rng.randint(1, 2),
        }
        for p in rng.sample(products, 3)
    ]
    in_cart = {line["pid"] for line in cart}
    favorites = [p["id"] for p in rng.sample([p for p in products if p["id"] not in in_cart], 2)]

    coupons = [
        {
            "code": code,
            "title": t_zh if zh else t_en,
            "min_spend": ms_zh if zh else ms_en,
            "off": off_zh if zh else off_en,
            "claimed": j == 0,
        }
        for j, (code, t_en, t_zh, ms_en, off_en, ms_zh, off_zh) in enumerate(COUPONS)
    ]

    name = rng.choice(SHOPPER[lang])
    user = {
        "name": name,
        "email": f"{PINYIN[name] if zh else name.split()[0].lower()}{rng.randint(10, 99)}@example.com",
        "phone": phone(rng, lang),
        "address": address(rng, lang),
    }
    planted.add("email", user["email"], "user.email")
    planted.add("phone", user["phone"], "user.phone")
    planted.add("address", user["address"], "user.address")
    gift = {
        "name": rng.choice(GIFT_RECIPIENT[lang]),
        "phone": phone(rng, lang),
        "address": address(rng, lang),
    }

    fill = {
        "carrier": rng.choice(CARRIERS[lang]),
        "origin": rng.choice(ORIGINS[lang]),
        "city": rng.choice(CITIES[lang]),
        "courier": rng.choice(COURIERS[lang]),
    }
    events = [{"status": st, "detail": d.format(**fill)} for st, d in TRACKING[lang]]
    shown = rng.randint(1, 2)  # events already known; each refresh reveals one more
    past = rng.sample([p for p in products if p["id"] not in in_cart], 3)
    orders = [
        {
            "id": f"{'DD' if zh else 'SG'}{rng.randint(10**9, 10**10 - 1)}",
            "pid": past[0]["id"],
            "total": past[0]["offers"][0]["price"],
            "ship_to": "user",
            "events": events[:shown],
            "pending": events[shown:],
        },
        {
            "id": f"{'DD' if zh else 'SG'}{rng.randint(10**9, 10**10 - 1)}",
            "pid": past[1]["id"],
            "total": past[1]["offers"][0]["price"],
            "ship_to": "gift",
            "events": list(events),
            "pending": [],
        },
        {
            "id": f"{'DD' if zh else 'SG'}{rng.randint(10**9, 10**10 - 1)}",
            "pid": past[2]["id"],
            "total": past[2]["offers"][0]["price"],
            "ship_to": "user",
            "events": list(events),
            "pending": [],
        },
    ]
    planted.add("phone", gift["phone"], "gift.phone")
    planted.add("address", gift["address"], "gift.address")

    return {
        "lang": lang,
        "currency": "CNY" if zh else "USD",
        "products": products,
        "banner": banner,
        "feed": feed,
        "cart": cart,
        "favorites": favorites,
        "coupons": coupons,
        "orders": orders,
        "order_refreshes": 0,
        "user": user,
        "gift": gift,
        "search_history": [],
        "payments": [],
        "_planted_pii": planted.items,
    }


# -- state helpers (also used by tasks) --------------------------------------------
def find_product(state: dict, pid: str) -> dict | None:
    return next((p for p in state["products"] if p["id"] == pid), None)


def offer(product: dict, seller: str) -> dict | None:
    return next((o for o in product["offers"] if o["seller"] == seller), None)


def cheapest_offer(product: dict) -> dict:
    return min(product["offers"], key=lambda o: o["price"])


def search(state: dict, query: str) -> list[dict]:
    """Products whose name or family query contains every word of `query`."""
    words = query.lower().split()
    li = 1 if state["lang"] == "zh" else 0
    return [
        p
        for p in state["products"]
        if all(w in f"{p['name']} {FAMILY_QUERY[p['family']][li]}".lower() for w in words)
    ]


def cart_lines(state: dict) -> list[dict]:
    lines = []
    for i, line in enumerate(state["cart"]):
        p = find_product(state, line["pid"])
        o = offer(p, line["seller"]) if p else None
        if o is None:
            continue
        lines.append(
            {
                **line,
                "index": i,
                "product": p,
                "price": o["price"],
                "total": round(o["price"] * line["qty"], 2),
            }
        )
    return lines


def cart_total(state: dict) -> float:
    return round(sum(line["total"] for line in cart_lines(state)), 2)


def cart_qty(state: dict, pid: str, seller: str | None = None, variant: str | None = None) -> int:
    return sum(
        line["qty"]
        for line in state["cart"]
        if line["pid"] == pid
        and (seller is None or line["seller"] == seller)
        and (variant is None or line["variant"] == variant)
    )


def in_transit(state: dict) -> dict:
    """The order whose parcel is on its way (pull-to-refresh moves it on)."""
    return state["orders"][0]


def latest_status(order: dict) -> str:
    return order["events"][-1]["status"]
