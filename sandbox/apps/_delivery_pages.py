"""Delivery's blueprint, the request helpers its routes share, and its pages (GET).

The actions (POST, then redirect) are in `_delivery_actions`.
"""

from __future__ import annotations

import re

from flask import Blueprint, abort, redirect, request, url_for

from ._delivery_catalogue import TABLEWARE_MAX
from ._delivery_labels import (
    add_label,
    choices_text,
    fee_label,
    mask_phone,
    options_label,
    order_card_label,
    promo_label,
    sales_label,
    shop_card_label,
    status_label,
    tableware_label,
)
from ._delivery_state import cart_lines, cart_summary, draft, find_address, find_order, find_shop, search
from .shop import money

# -- pages -------------------------------------------------------------------------------
bp = Blueprint("delivery", __name__)
SORTS = ["default", "fee", "rating", "sales"]


def app_session():
    from ..server import current_session

    return current_session(bp.name)


def _render(template: str, **ctx):
    from ..server import render_page

    s = app_session()
    lang = s.lang
    return render_page(
        template,
        m=lambda v: money(v, lang),
        fee=lambda v: fee_label(v, lang),
        promo=lambda t: promo_label(t, lang),
        sales=lambda n: sales_label(n, lang),
        status=lambda st: status_label(st, lang),
        shop_label=lambda sh: shop_card_label(sh, lang),
        order_label=lambda o: order_card_label(s.state, o),
        add_label=lambda n: add_label(n, lang),
        options_label=lambda n: options_label(n, lang),
        tableware=lambda n: tableware_label(n, lang),
        choices_text=lambda c: choices_text(c, lang),
        find_shop=lambda sid: find_shop(s.state, sid),
        find_address=lambda aid: find_address(s.state, aid),
        mask=mask_phone,
        cart_count=sum(ln["qty"] for lines in s.state["carts"].values() for ln in lines),
        notice=request.args.get("msg"),
        error=request.args.get("error"),
        **ctx,
    )


def shop_or_404(sid: str) -> dict:
    shop = find_shop(app_session().state, sid)
    if shop is None:
        abort(404, f"no shop {sid!r}")
    return shop


def order_or_404(oid: str) -> dict:
    order = find_order(app_session().state, oid)
    if order is None or order["deleted"]:
        abort(404, f"no order {oid!r}")
    return order


def with_msg(url: str, msg: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}msg={msg}"


def safe_next(default: str) -> str:
    nxt = request.form.get("next") or ""
    # Only paths inside this app: never an open redirect.
    return nxt if re.fullmatch(r"/delivery/[\w/\-]*(\?[\w=&%\-]*)?", nxt) else default


@bp.get("/")
def home():
    s = app_session()
    shops = sorted(s.state["shops"], key=lambda sh: (-sh["rating"], -sh["monthly_sales"]))
    slides = [{"banner": b, "shop": find_shop(s.state, b["shop"])} for b in s.state["banners"]]
    return _render("home.html", shops=shops, slides=slides)


@bp.get("/category/<key>")
def category(key: str):
    s = app_session()
    names = dict((c["key"], c["name"]) for c in s.state["categories"])
    if key not in names:
        abort(404, f"unknown category {key!r}")
    sort = request.args.get("sort", "default")
    if sort not in SORTS:
        sort = "default"
    shops = [sh for sh in s.state["shops"] if sh["category"] == key]
    if sort == "fee":
        shops.sort(key=lambda sh: sh["delivery_fee"])
    elif sort == "rating":
        shops.sort(key=lambda sh: -sh["rating"])
    elif sort == "sales":
        shops.sort(key=lambda sh: -sh["monthly_sales"])
    return _render("category.html", key=key, title=names[key], shops=shops, sort=sort)


@bp.get("/search")
def search_page():
    s = app_session()
    q = request.args.get("q", "").strip()[:40]
    if q:
        with s.lock:
            hist = s.state["search_history"]
            hist.append(q)
            del hist[:-10]
    return _render("search.html", q=q, rows=search(s.state, q) if q else None)


@bp.get("/shop/<sid>")
def shop_page(sid: str):
    s = app_session()
    shop = shop_or_404(sid)
    return _render(
        "shop.html",
        shop=shop,
        lines=cart_lines(s.state, sid),
        summary=cart_summary(s.state, sid),
        focus=request.args.get("dish"),
    )


@bp.get("/carts")
def carts():
    s = app_session()
    groups = [
        {
            "shop": find_shop(s.state, sid),
            "lines": cart_lines(s.state, sid),
            "summary": cart_summary(s.state, sid),
        }
        for sid, lines in s.state["carts"].items()
        if lines
    ]
    return _render("carts.html", groups=groups)


@bp.get("/checkout/<sid>")
def checkout(sid: str):
    s = app_session()
    shop = shop_or_404(sid)
    if not s.state["carts"].get(sid):
        return redirect(url_for("delivery.shop_page", sid=sid))
    return _render(
        "checkout.html",
        shop=shop,
        lines=cart_lines(s.state, sid),
        summary=cart_summary(s.state, sid),
        draft=draft(s.state, sid),
        tableware_choices=list(range(TABLEWARE_MAX + 1)),
    )


@bp.get("/checkout/<sid>/address")
def choose_address(sid: str):
    s = app_session()
    shop = shop_or_404(sid)
    return _render("choose_address.html", shop=shop, draft=draft(s.state, sid))


@bp.get("/orders")
def orders():
    s = app_session()
    return _render("orders.html", orders=[o for o in s.state["orders"] if not o["deleted"]])


@bp.get("/orders/<oid>")
def order_detail(oid: str):
    order = order_or_404(oid)
    s = app_session()
    return _render(
        "order.html",
        order=order,
        shop=find_shop(s.state, order["shop"]),
        addr=find_address(s.state, order["address"]),
    )


@bp.get("/account")
def account():
    return _render("account.html")


@bp.get("/addresses")
def addresses():
    return _render("addresses.html")
