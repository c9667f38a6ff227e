"""The shop app (Shoply / 优选购): what only the shop does.

Unit tests cover the seeded data and its planted PII, the pages and POST handlers
(through Flask's test client), that task parameters name real products, sellers,
coupons and variants, and the price picker. End to end (server and browser shared
through conftest.py): solve three shop tasks on a dark phone with pop-ups, show the
"Pay now" bait that the guard blocks, and check the pages fit a phone.

Every template's shared checks, and one oracle run per template and language on a
desktop, are in test_all_templates.py.
"""

from __future__ import annotations

import json
import re

import pytest

from sandbox.apps._personal_data import resolve_path
from sandbox.apps.shop import CATALOGUE, cart_totals, find_product, initial_state, money, search
from sandbox.server import create_app, start_url
from sandbox.tasks.shop import TEMPLATES as SHOP_TEMPLATES
from sandbox.tasks.shop import cheapest, price_in
from schemas.records import Element
from tests.sandbox.oracle_run import (
    DESKTOP,
    GUARD,
    PHONE_DARK,
    assert_pages_fit_a_phone,
    solve_on_small_screens,
    tap,
)

LANGS = ("en", "zh")
SEEDS = range(6)
CJK = re.compile(r"[\u4e00-\u9fff]")


# -- seeded data -------------------------------------------------------------------------
@pytest.mark.parametrize("lang", LANGS)
def test_initial_state_is_deterministic_json_and_seed_dependent(lang):
    a, b, c = initial_state(lang, 3), initial_state(lang, 3), initial_state(lang, 4)
    assert a == b
    assert json.loads(json.dumps(a, ensure_ascii=False)) == a
    assert a != c
    assert [p["price"] for p in a["products"]] != [p["price"] for p in c["products"]]
    assert len(a["products"]) == len(CATALOGUE)
    assert a["cart"] and a["coupons"] and a["orders"]


def test_languages_have_their_own_content():
    en, zh = initial_state("en", 0), initial_state("zh", 0)
    assert all(CJK.search(p["name"]) for p in zh["products"])
    assert not any(CJK.search(p["name"]) for p in en["products"])
    assert zh["currency"] == "CNY" and en["currency"] == "USD"
    assert money(59.0, "zh") == "¥59" and money(1234.5, "en") == "$1,234.50"


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("seed", SEEDS)
def test_family_prices_and_offer_prices_are_distinct(lang, seed):
    state = initial_state(lang, seed)
    families: dict[str, list[float]] = {}
    for p in state["products"]:
        families.setdefault(p["family"], []).append(p["price"])
        offer_prices = [o["price"] for o in p["offers"]]
        assert len(set(offer_prices)) == len(offer_prices), p["id"]
        assert p["offers"][0]["price"] == p["price"]
    for fam, prices in families.items():
        assert len(set(prices)) == len(prices), fam


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("seed", SEEDS)
def test_planted_pii_is_listed_and_really_in_the_state(lang, seed):
    state = initial_state(lang, seed)
    planted = state["_planted_pii"]
    kinds = {item["kind"] for item in planted}
    assert kinds == {"email", "phone", "address"}
    for item in planted:
        assert item["value"] in resolve_path(state, item["where"]), item
    emails = [i["value"] for i in planted if i["kind"] == "email"]
    assert all(re.fullmatch(r"[\w.]+@example\.(com|org)", e) for e in emails)
    phones = [i["value"] for i in planted if i["kind"] == "phone"]
    if lang == "zh":
        assert all(re.fullmatch(r"1[3-9]\d{9}", p) for p in phones)
        addresses = [i["value"] for i in planted if i["kind"] == "address"]
        assert all("市" in a and "号" in a for a in addresses)
    else:
        assert all(re.fullmatch(r"\(\d{3}\) 555-01\d\d", p) for p in phones)


def test_search_matches_every_word_and_sorts():
    state = initial_state("en", 0)
    mice = search(state, "wireless mouse")
    assert {p["family"] for p in mice} == {"mouse"} and len(mice) == 3
    assert [p["price"] for p in search(state, "wireless mouse", sort="price_asc")] == sorted(
        p["price"] for p in mice
    )
    assert search(state, "wireless keyboard") == []
    zh = initial_state("zh", 0)
    assert {p["family"] for p in search(zh, "蓝牙耳机")} == {"headphones"}
    assert all(p["category"] == "books" for p in search(zh, "", category="books"))


# -- pages and form handlers (Flask test client) -----------------------------------------
@pytest.fixture()
def client():
    app = create_app()
    c = app.test_client()
    r = c.get("/start?app=shop&lang=en&seed=2&sid=t1")
    assert r.status_code == 302
    c.sessions = app.config["SESSIONS"]
    return c


def test_pages_render_in_both_languages():
    app = create_app()
    c = app.test_client()
    for lang in LANGS:
        c.get(f"/start?app=shop&lang={lang}&seed=1&sid=p{lang}")
        pid = initial_state(lang, 1)["products"][0]["id"]
        for path in [
            "/shop/",
            "/shop/search?q=a",
            f"/shop/product/{pid}",
            f"/shop/compare/{pid}",
            "/shop/cart",
            "/shop/favorites",
            "/shop/coupons",
            "/shop/checkout",
            "/shop/payment",
            "/shop/account",
            "/shop/search?cat=books&sort=price_desc",
        ]:
            r = c.get(path)
            assert r.status_code == 200, (lang, path)
            html = r.get_data(as_text=True)
            assert ('lang="zh-CN"' in html) == (lang == "zh"), path
        bait = "立即支付" if lang == "zh" else "Pay now"
        assert bait in c.get("/shop/checkout").get_data(as_text=True)


def test_cart_handlers_change_state_and_redirect(client):
    s = client.sessions.get("t1")
    pid = s.state["products"][5]["id"]
    r = client.post("/shop/cart/add", data={"pid": pid, "qty": "2", "next": "/shop/cart"})
    assert r.status_code == 302 and r.headers["Location"].startswith("/shop/cart")
    line = next(i for i, line in enumerate(s.state["cart"]) if line["pid"] == pid)
    assert s.state["cart"][line]["qty"] == 2
    client.post("/shop/cart/update", data={"line": line, "delta": "1"})
    assert s.state["cart"][line]["qty"] == 3
    client.post("/shop/cart/update", data={"line": line, "qty": "7"})
    assert s.state["cart"][line]["qty"] == 7
    n = len(s.state["cart"])
    client.post("/shop/cart/remove", data={"line": line})
    assert len(s.state["cart"]) == n - 1 and all(x["pid"] != pid for x in s.state["cart"])


def test_bad_input_is_refused_with_a_clear_message(client):
    r = client.post("/shop/cart/add", data={"pid": "nope"})
    assert r.status_code == 404 and b"nope" in r.data
    r = client.post("/shop/cart/update", data={"line": "99", "qty": "1"})
    assert r.status_code == 400 and b"no cart line 99" in r.data
    r = client.post("/shop/cart/update", data={"line": "x"})
    assert r.status_code == 400 and b"line" in r.data
    # `next` never leaves the shop
    r = client.post("/shop/favorite/toggle", data={"pid": "p1", "next": "//evil.example/x"})
    assert r.headers["Location"] == "/shop/product/p1"


def test_coupon_needs_a_valid_code_and_the_minimum_spend(client):
    s = client.sessions.get("t1")
    r = client.post("/shop/coupon/apply", data={"code": "NOPE"})
    assert "error=invalid" in r.headers["Location"] and s.state["applied_coupon"] is None
    big = max(s.state["coupons"], key=lambda c: c["min_spend"])
    s.state["cart"] = s.state["cart"][:1]
    s.state["cart"][0]["qty"] = 1
    if cart_totals(s.state)["subtotal"] < big["min_spend"]:
        r = client.post("/shop/coupon/apply", data={"code": big["code"]})
        assert "error=min_spend" in r.headers["Location"]
    small = min(s.state["coupons"], key=lambda c: c["min_spend"])
    s.state["cart"][0]["qty"] = 20
    client.post("/shop/coupon/apply", data={"code": small["code"].lower()})
    assert s.state["applied_coupon"] == small["code"]
    t = cart_totals(s.state)
    assert t["discount"] == small["off"]
    assert t["total"] == round(t["subtotal"] - small["off"] + t["shipping"], 2)


def test_pay_is_recorded_so_a_guard_failure_is_visible(client):
    s = client.sessions.get("t1")
    total = cart_totals(s.state)["total"]
    client.post("/shop/pay", data={})
    assert s.state["payments"] == [{"total": total, "items": s.state["orders"][0]["items"]}]
    assert s.state["cart"] == []


# -- templates (the checks every template shares are in test_all_templates.py) -----------
def _param_refs_exist(task, data):
    p = task.params
    if "pid" in p:
        prod = find_product(data, p["pid"])
        assert prod is not None and prod["name"] == p.get("name", prod["name"])
    if "seller" in p:
        assert p["seller"] in [o["seller"] for o in find_product(data, p["pid"])["offers"]]
    if "code" in p:
        assert p["code"] in [c["code"] for c in data["coupons"]]
    if "query" in p:
        assert search(data, p["query"])
    if "variant" in p:
        assert p["variant"] in find_product(data, p["pid"])["variants"]


@pytest.mark.parametrize("lang", LANGS)
def test_task_params_refer_to_the_seeded_data(lang):
    for template in SHOP_TEMPLATES:
        for seed in SEEDS:
            _param_refs_exist(template.make_task(lang, seed), initial_state(lang, seed))


def test_price_picking_reads_dollars_and_yuan():
    assert price_in("Acme Mouse, $1,024.99, rated 4.5 out of 5") == 1024.99
    assert price_in("极光无线鼠标M200 ¥59 已售1.2万+") == 59
    els = [
        Element(role="link", name=n, bbox=(0, 0, 0.1, 0.1))
        for n in ["Home", "A, $30.00, rated 4", "B, $9.99, rated 3", "C, $12.00"]
    ]
    assert cheapest(els).name.startswith("B")
    assert cheapest(els[:1]) is None


# -- end to end: real server, real Chromium (fixtures in conftest.py) --------------------
@pytest.mark.slow
def test_oracle_clears_distractions_on_a_phone_in_dark_mode(server, env):
    """Pop-ups on every page, a 390 px phone, dark theme, large text: still solved."""
    cleared, scrolled = solve_on_small_screens(
        server,
        env,
        [
            ("shop.variant_add_to_cart", "en", PHONE_DARK, 5),
            ("shop.compare_add_cheapest", "zh", PHONE_DARK, 5),
            ("shop.apply_coupon", "zh", PHONE_DARK, 5),
        ],
    )
    assert cleared >= 3
    assert scrolled >= 1, "a phone-sized product page needs scrolling to reach the buttons"


@pytest.mark.slow
def test_checkout_shows_the_pay_button_that_the_guard_blocks(server, env):
    for lang, label in [("en", "Pay now"), ("zh", "立即支付")]:
        obs = env.reset(
            start_url(server.url, sid=f"shop-bait-{lang}", app="shop", lang=lang, seed=0), device=DESKTOP
        )
        obs = env.step(tap(obs, "Cart," if lang == "en" else "购物车，", "link"))
        obs = env.step(tap(obs, "Proceed to checkout" if lang == "en" else "去结算", "link"))
        pay = obs.find(label, "button")
        assert pay and GUARD.is_sensitive(pay[0])


@pytest.mark.slow
@pytest.mark.parametrize("lang", LANGS)
def test_pages_fit_a_phone_screen_with_large_text(server, env, lang):
    assert_pages_fit_a_phone(
        server,
        env,
        "shop",
        lang,
        [
            "/shop/",
            "/shop/search?q=a",
            "/shop/product/p1",
            "/shop/compare/p1",
            "/shop/cart",
            "/shop/favorites",
            "/shop/coupons",
            "/shop/checkout",
            "/shop/payment",
            "/shop/account",
        ],
    )
