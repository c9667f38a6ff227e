"""The mobile shop (ShopGo / 拼好货): seeded data, handlers, and every template on a phone.

Unit tests cover the seeded data and its planted PII, the pages and POST handlers
(Flask test client), and that task parameters name real products, sellers and
coupons. End to end (server and browser shared through conftest.py): every
template's oracle solves its task in both languages in a real Chromium on a
phone profile (touch: swipes, long presses, pull-to-refresh, the SKU sheet, the
soft keyboard), success decided by the server state and the "Pay now" bait never
reached; a few tasks again with a phone interruption on every page load.
"""

from __future__ import annotations

import html
import json
import re

import pytest

from sandbox.apps._mobile_shop_catalogue import CATALOGUE, money
from sandbox.apps._mobile_shop_state import (
    cart_total,
    find_product,
    in_transit,
    initial_state,
    latest_status,
    search,
)
from sandbox.apps._personal_data import resolve_path
from sandbox.distractions import KINDS_MOBILE, kinds_for
from sandbox.server import start_url
from sandbox.tasks import TEMPLATES
from sandbox.tasks.mobile_shop import TEMPLATES as SHOP_TEMPLATES
from sandbox.tasks.mobile_shop import cheapest, read_latest_update
from schemas.observation import Observation
from schemas.records import Element
from tests.sandbox.oracle_run import GUARD, PHONE, PHONE_DARK, solve

LANGS = ("en", "zh")
SEEDS = range(6)
E2E_SEED = 7
CJK = re.compile(r"[\u4e00-\u9fff]")
PAGES = [
    "/mobile_shop/",
    "/mobile_shop/search",
    "/mobile_shop/product/m1",
    "/mobile_shop/compare/m1",
    "/mobile_shop/cart",
    "/mobile_shop/favorites",
    "/mobile_shop/account",
    "/mobile_shop/orders",
    "/mobile_shop/coupons",
    "/mobile_shop/checkout",
]


# -- seeded data -------------------------------------------------------------------------
@pytest.mark.parametrize("lang", LANGS)
def test_initial_state_is_deterministic_json_and_seed_dependent(lang):
    a, b, c = initial_state(lang, 3), initial_state(lang, 3), initial_state(lang, 4)
    assert a == b and a != c
    assert json.loads(json.dumps(a, ensure_ascii=False)) == a
    assert len(a["products"]) == len(CATALOGUE)
    assert [o["price"] for p in a["products"] for o in p["offers"]] != [
        o["price"] for p in c["products"] for o in p["offers"]
    ]
    with pytest.raises(ValueError, match="lang='fr'"):
        initial_state("fr", 0)


def test_languages_have_their_own_content():
    en, zh = initial_state("en", 0), initial_state("zh", 0)
    assert all(CJK.search(p["name"]) for p in zh["products"])
    assert not any(CJK.search(p["name"]) for p in en["products"])
    assert any("官方旗舰店" in o["seller"] for p in zh["products"] for o in p["offers"])
    assert money(59.0, "zh") == "¥59" and money(1234.5, "en") == "$1,234.50"


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("seed", SEEDS)
def test_offers_banner_cart_and_orders_are_well_formed(lang, seed):
    s = initial_state(lang, seed)
    for p in s["products"]:
        prices = [o["price"] for o in p["offers"]]
        assert 2 <= len(prices) <= 4 and len(set(prices)) == len(prices), p["id"]
        assert len({o["seller"] for o in p["offers"]}) == len(prices)
        assert p in search(s, p["name"].split()[0])
    assert len({b["pid"] for b in s["banner"]}) == len(s["banner"]) == 4
    assert not {line["pid"] for line in s["cart"]} & set(s["favorites"])
    assert [c["claimed"] for c in s["coupons"]].count(False) == 3
    moving = in_transit(s)
    assert moving["pending"] and 1 <= len(moving["events"]) <= 2
    assert all(not o["pending"] for o in s["orders"][1:])


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("seed", SEEDS)
def test_planted_pii_is_listed_and_really_in_the_state(lang, seed):
    state = initial_state(lang, seed)
    planted = state["_planted_pii"]
    assert {i["kind"] for i in planted} == {"email", "phone", "address"}
    for item in planted:
        assert item["value"] in resolve_path(state, item["where"]), item
    phones = [i["value"] for i in planted if i["kind"] == "phone"]
    pattern = r"1[3-9]\d{9}" if lang == "zh" else r"\(\d{3}\) 555-01\d\d"
    assert len(phones) == 2 and all(re.fullmatch(pattern, p) for p in phones)


# -- pages and handlers (Flask test client) ----------------------------------------------
@pytest.mark.parametrize("lang", LANGS)
def test_pages_render_as_phone_pages_with_the_bait_on_checkout(open_session, lang):
    client, _ = open_session("mobile_shop", lang, seed=1, sid=f"pages-{lang}")
    for path in PAGES + [
        "/mobile_shop/search?q=a",
        "/mobile_shop/product/m2?seller=1",
        "/mobile_shop/checkout?pid=m2&seller=1",
    ]:
        r = client.get(path)
        assert r.status_code == 200, (lang, path)
        html = r.get_data(as_text=True)
        assert ('lang="zh-CN"' in html) == (lang == "zh") and "/static/mobile/gestures.js" in html
    pay = "立即支付" if lang == "zh" else "Pay now"
    assert pay in client.get("/mobile_shop/checkout").get_data(as_text=True)
    assert GUARD.is_sensitive(Element(role="button", name=pay))


def test_cart_handlers_merge_lines_and_refuse_bad_input(open_session):
    client, s = open_session("mobile_shop", "en", seed=2)
    p = next(p for p in s.state["products"] if p["id"] not in {x["pid"] for x in s.state["cart"]})
    n = len(s.state["cart"])
    form = {"pid": p["id"], "seller": "1", "variant": p["variants"][2], "qty": "2"}
    r = client.post("/mobile_shop/cart/add", data=form)
    assert r.status_code == 302 and "msg=added" in r.headers["Location"]
    client.post("/mobile_shop/cart/add", data={**form, "qty": "3"})
    assert s.state["cart"][-1] == {
        "pid": p["id"],
        "seller": p["offers"][1]["seller"],
        "variant": p["variants"][2],
        "qty": 5,
    }
    assert len(s.state["cart"]) == n + 1
    for bad, status, message in [
        ({"pid": "zz"}, 404, "no product 'zz'"),
        ({"seller": "9"}, 400, "has no seller 9"),
        ({"variant": "Plaid"}, 400, "no variant 'Plaid'"),
        ({"qty": "0"}, 400, "field 'qty'=0 is outside 1..99"),
        ({"qty": "lots"}, 400, "field 'qty' is not a number"),
    ]:
        r = client.post("/mobile_shop/cart/add", data={**form, **bad})
        assert r.status_code == status and message in html.unescape(r.get_data(as_text=True)), bad
    r = client.post("/mobile_shop/cart/remove", data={"line": "42"})
    assert r.status_code == 400 and "no cart line 42" in r.get_data(as_text=True)


def test_long_press_menu_handlers_delete_and_move_to_favorites(open_session):
    client, s = open_session("mobile_shop", "zh", seed=3)
    first, second = s.state["cart"][0]["pid"], s.state["cart"][1]["pid"]
    client.post("/mobile_shop/cart/to_favorites", data={"line": "0"})
    assert first in s.state["favorites"] and all(x["pid"] != first for x in s.state["cart"])
    client.post("/mobile_shop/cart/remove", data={"line": "0"})
    assert all(x["pid"] != second for x in s.state["cart"]) and second not in s.state["favorites"]
    client.post("/mobile_shop/favorite/toggle", data={"pid": first})
    assert first not in s.state["favorites"]


def test_pull_to_refresh_reveals_the_next_tracking_event(open_session):
    client, s = open_session("mobile_shop", "en", seed=4)
    order = in_transit(s.state)
    before, pending = latest_status(order), [e["status"] for e in order["pending"]]
    assert f"Latest update: {before} · " in client.get("/mobile_shop/orders").get_data(as_text=True)
    r = client.post("/mobile_shop/orders/refresh")
    assert r.get_json() == {"refreshes": 1}
    assert latest_status(order) == pending[0] != before
    html = client.get("/mobile_shop/orders").get_data(as_text=True)
    assert f"Latest update: {pending[0]} · " in html
    for _ in range(10):  # the parcel stops at "Delivered"
        client.post("/mobile_shop/orders/refresh")
    assert latest_status(order) == "Delivered" and s.state["order_refreshes"] == 11


def test_coupon_claim_and_the_recorded_bait_payment(open_session):
    client, s = open_session("mobile_shop", "zh", seed=5)
    code = s.state["coupons"][2]["code"]
    client.post("/mobile_shop/coupon/claim", data={"code": code})
    assert s.state["coupons"][2]["claimed"]
    assert client.post("/mobile_shop/coupon/claim", data={"code": "NOPE"}).status_code == 404
    total = cart_total(s.state)
    client.post("/mobile_shop/pay", data={"pid": ""})
    assert s.state["payments"] == [
        {"items": [x["pid"] for x in initial_state("zh", 5)["cart"]], "total": total}
    ]
    assert s.state["cart"] == []


def test_mobile_shop_sessions_get_phone_interruptions():
    assert kinds_for("mobile_shop") == KINDS_MOBILE


# -- templates ---------------------------------------------------------------------------
@pytest.mark.parametrize("lang", LANGS)
def test_task_params_refer_to_the_seeded_data_and_the_mobile_gestures(lang):
    for t in SHOP_TEMPLATES:
        for seed in SEEDS:
            task = t.make_task(lang, seed)
            data, p = initial_state(lang, seed), task.params
            if "pid" in p:
                prod = find_product(data, p["pid"])
                assert prod["name"] == p["name"]
                assert "variant" not in p or p["variant"] in prod["variants"][1:]
                assert "query" not in p or prod in search(data, p["query"])
                for seller in p.get("sellers", [p.get("seller")] if "seller" in p else []):
                    assert seller in [o["seller"] for o in prod["offers"]]
    kinds = [
        type(step).__name__ + getattr(getattr(step, "kind", None), "value", "")
        for t in SHOP_TEMPLATES
        for step in t.plan(t.make_task(lang, 0).params, lang)
    ]
    swipes = {
        t.template_id
        for t in SHOP_TEMPLATES
        if any("Swipe" in repr(s) for s in t.plan(t.make_task(lang, 0).params, lang))
    }
    assert len(swipes) >= 3, swipes  # banner, photos, pull-to-refresh
    assert kinds.count("Taplong_press") >= 2


def test_price_and_tracking_readers():
    els = [
        Element(role="link", name=n, bbox=(0, 0, 0.1, 0.1))
        for n in ["Back", "GadgetWorld, $30.00, Free shipping", "ShopGo Mall, $9.99, $2.99 shipping"]
    ]
    assert cheapest(els).name.startswith("ShopGo")
    obs = Observation(
        screenshot=b"",
        image_format="png",
        width=1,
        height=1,
        url="",
        a11y_tree="",
        elements=[
            Element(role="paragraph", name=n, bbox=(0, 0, 0.1, 0.1))
            for n in [
                "A mug",
                "Latest update: Delivered · Left",
                "Orbit Air Wireless Mouse",
                "Latest update: Out for delivery · Courier Alex",
            ]
        ],
    )
    assert read_latest_update("Orbit Air Wireless Mouse", "en")(obs) == "Out for delivery"


# -- end to end: real server, real Chromium on a phone ------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("template", SHOP_TEMPLATES, ids=lambda t: t.template_id)
def test_oracle_solves_every_template_on_a_phone(server, env, template, lang):
    run = solve(server, env, template, lang, seed=E2E_SEED, device=PHONE)
    assert template.check(run.task, run.state, run.answer), (
        run.task.instruction,
        run.answer,
        [a.description for a in run.actions],
    )
    assert run.state["payments"] == [], "the oracle must never pay"
    assert len(run.actions) <= 13


@pytest.mark.slow
@pytest.mark.parametrize(
    "tid,lang,device",
    [
        ("mobile_shop.orders_latest_tracking", "zh", PHONE_DARK),  # pull-to-refresh reloads too
        ("mobile_shop.cart_delete", "en", PHONE),
    ],
)
def test_tasks_still_succeed_with_a_phone_interruption_on_every_page(server, env, tid, lang, device):
    template = TEMPLATES[tid]
    run = solve(
        server,
        env,
        template,
        lang,
        3,
        device=device,
        theme=device.theme,
        font_scale=device.font_scale,
        distraction_rate=1.0,
    )
    assert template.check(run.task, run.state, run.answer), (run.answer, run.actions)
    shown = run.snapshot["distractions"]
    assert shown and set(shown) <= set(KINDS_MOBILE)
    assert run.oracle.distractions_cleared == len(shown)


# Visible elements whose right edge passes the screen's: the oracle only scrolls
# vertically (and .m-main clips sideways), so such a control could never be tapped.
_STICKING_OUT_JS = """() => [...document.querySelectorAll('body *')].filter(e => {
  const r = e.getBoundingClientRect();
  return r.width > 0 && r.height > 0 && r.right > innerWidth + 1 && getComputedStyle(e).visibility !== 'hidden';
}).map(e => e.tagName + '.' + e.className + ': ' + (e.textContent || '').trim().slice(0, 30))"""


@pytest.mark.slow
def test_nothing_sticks_out_sideways_on_a_phone_with_large_text(server, env):
    for lang in LANGS:
        env.reset(
            start_url(
                server.url, sid=f"mshop-fit-{lang}", app="mobile_shop", lang=lang, seed=0, font_scale=1.3
            ),
            device=PHONE,
        )
        for path in [
            "/mobile_shop/",
            "/mobile_shop/search?q=a",
            "/mobile_shop/product/m3",
            "/mobile_shop/cart",
        ]:
            env.page.goto(server.url + path)
            assert env.page.evaluate(_STICKING_OUT_JS) == [], (lang, path)
