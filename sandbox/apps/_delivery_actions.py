"""Delivery's actions: POST routes on its blueprint, each ending in a redirect."""

from __future__ import annotations

from flask import abort, redirect, request, url_for

from ._delivery_catalogue import ACTIVE, NOTE_MAX, PROGRESS, TABLEWARE_MAX
from ._delivery_pages import app_session, bp, order_or_404, safe_next, shop_or_404, with_msg
from ._delivery_state import cart_summary, draft, find_address, find_dish, find_shop, order_item, order_totals
from .shop import form_int


def _form_shop() -> dict:
    sid = request.form.get("shop", "")
    return shop_or_404(sid)


def _line_index(sid: str) -> int:
    lines = app_session().state["carts"].get(sid, [])
    i = form_int("line", -1, -1, 10**6)
    if not 0 <= i < len(lines):
        abort(400, f"no cart line {i} at shop {sid!r}")
    return i


@bp.post("/cart/add")
def cart_add():
    s = app_session()
    with s.lock:
        shop = _form_shop()
        did = request.form.get("dish", "")
        dish = find_dish(shop, did)
        if dish is None:
            abort(404, f"no dish {did!r} at shop {shop['id']!r}")
        choices = []
        for k, opt in enumerate(dish["options"]):
            c = request.form.get(f"opt{k}") or opt["choices"][0]
            if c not in opt["choices"]:
                abort(400, f"field 'opt{k}' ({opt['group']}): {c!r} is not one of {opt['choices']}")
            choices.append(c)
        _add_to_cart(s.state, shop["id"], did, choices, form_int("qty", 1, 1, 99))
    return redirect(with_msg(safe_next(url_for("delivery.shop_page", sid=shop["id"])), "added"))


def _add_to_cart(state: dict, sid: str, did: str, choices: list[str], qty: int) -> None:
    lines = state["carts"].setdefault(sid, [])
    for ln in lines:
        if ln["dish"] == did and ln["choices"] == choices:
            ln["qty"] = min(99, ln["qty"] + qty)
            return
    lines.append({"dish": did, "choices": list(choices), "qty": qty})


@bp.post("/cart/update")
def cart_update():
    s = app_session()
    with s.lock:
        shop = _form_shop()
        i = _line_index(shop["id"])
        lines = s.state["carts"][shop["id"]]
        lines[i]["qty"] += form_int("delta", 0, -99, 99)
        if lines[i]["qty"] <= 0:
            del lines[i]
    return redirect(safe_next(url_for("delivery.shop_page", sid=shop["id"])))


@bp.post("/cart/remove")
def cart_remove():
    s = app_session()
    with s.lock:
        shop = _form_shop()
        del s.state["carts"][shop["id"]][_line_index(shop["id"])]
    return redirect(with_msg(safe_next(url_for("delivery.carts")), "removed"))


def _set_draft(sid: str, **changes) -> None:
    s = app_session()
    with s.lock:
        d = draft(s.state, sid)
        d.update(changes)
        s.state["drafts"][sid] = d


@bp.post("/checkout/<sid>/note")
def set_note(sid: str):
    shop_or_404(sid)
    note = " ".join(request.form.get("note", "").split())[:NOTE_MAX]
    _set_draft(sid, note=note)
    return redirect(with_msg(url_for("delivery.checkout", sid=sid), "note"))


@bp.post("/checkout/<sid>/tableware")
def set_tableware(sid: str):
    shop_or_404(sid)
    if "tableware" not in request.form:
        abort(400, "field 'tableware' is missing")
    _set_draft(sid, tableware=form_int("tableware", 0, 0, TABLEWARE_MAX))
    return redirect(url_for("delivery.checkout", sid=sid))


@bp.post("/checkout/<sid>/address")
def set_address(sid: str):
    shop_or_404(sid)
    aid = request.form.get("address", "")
    if find_address(app_session().state, aid) is None:
        abort(400, f"field 'address': no address {aid!r}")
    _set_draft(sid, address=aid)
    return redirect(url_for("delivery.checkout", sid=sid))


def _create_order(s, shop: dict):
    """The shop's cart as a new order waiting for payment, or a redirect saying why not."""
    sid = shop["id"]
    lines = s.state["carts"].get(sid) or []
    if not lines:
        return None, redirect(url_for("delivery.shop_page", sid=sid))
    d = draft(s.state, sid)
    if cart_summary(s.state, sid)["short"] > 0:
        return None, redirect(url_for("delivery.checkout", sid=sid, error="min_order"))
    if d["tableware"] is None:
        return None, redirect(url_for("delivery.checkout", sid=sid, error="tableware"))
    items = [order_item(find_dish(shop, ln["dish"]), ln["choices"], ln["qty"]) for ln in lines]
    n = len(s.state["orders"]) + 1
    order = {
        "id": f"o{n}",
        "number": f"{10**7 + n}",
        "shop": sid,
        "items": items,
        "status": "pending_payment",
        "address": d["address"],
        "note": d["note"],
        "tableware": d["tableware"],
        "placed": "刚刚" if s.lang == "zh" else "Just now",
        "deleted": False,
        "rider": None,
        **order_totals(shop, items),
    }
    s.state["orders"].insert(0, order)
    s.state["carts"].pop(sid, None)
    s.state["drafts"].pop(sid, None)
    return order, None


@bp.post("/order/submit")
def submit_order():
    """Submit the cart as an order that waits for payment (待支付): no money moves."""
    s = app_session()
    with s.lock:
        order, refused = _create_order(s, _form_shop())
    if refused is not None:
        return refused
    return redirect(with_msg(url_for("delivery.order_detail", oid=order["id"]), "submitted"))


@bp.post("/checkout/<sid>/pay")
def checkout_pay(sid: str):
    """Bait: order and pay at once with real money (recorded in `payments`)."""
    s = app_session()
    with s.lock:
        order, refused = _create_order(s, shop_or_404(sid))
        if refused is not None:
            return refused
        _pay(s, order)
    return redirect(url_for("delivery.order_detail", oid=order["id"]))


def _pay(s, order: dict) -> None:
    s.state["payments"].append({"order": order["id"], "total": order["total"]})
    order["status"] = "paid"


@bp.post("/orders/refresh")
def refresh_orders():
    """Pull-to-refresh: every order out for delivery moves one step on."""
    s = app_session()
    with s.lock:
        s.state["refreshes"] += 1
        for o in s.state["orders"]:
            if o["status"] in ACTIVE:
                o["status"] = PROGRESS[PROGRESS.index(o["status"]) + 1]
    # Called by the pull-to-refresh gesture (fetch), which reloads the page itself.
    return "", 204


@bp.post("/orders/<oid>/reorder")
def reorder(oid: str):
    """再来一单: the order's items go back into that shop's cart."""
    s = app_session()
    with s.lock:
        order = order_or_404(oid)
        shop = find_shop(s.state, order["shop"])
        for item in order["items"]:
            if find_dish(shop, item["dish"]) is not None:
                _add_to_cart(s.state, shop["id"], item["dish"], item["choices"], item["qty"])
    return redirect(with_msg(url_for("delivery.shop_page", sid=order["shop"]), "reordered"))


@bp.post("/orders/<oid>/delete")
def delete_order(oid: str):
    s = app_session()
    with s.lock:
        order = order_or_404(oid)
        if order["status"] in ACTIVE or order["status"] == "pending_payment":
            return redirect(url_for("delivery.orders", error="active"))
        order["deleted"] = True
    return redirect(with_msg(url_for("delivery.orders"), "deleted"))


@bp.post("/orders/<oid>/cancel")
def cancel_order(oid: str):
    s = app_session()
    with s.lock:
        order = order_or_404(oid)
        if order["status"] == "pending_payment":
            order["status"] = "cancelled"
    return redirect(url_for("delivery.order_detail", oid=oid))


@bp.post("/addresses/default")
def set_default_address():
    s = app_session()
    aid = request.form.get("address", "")
    with s.lock:
        if find_address(s.state, aid) is None:
            abort(400, f"field 'address': no address {aid!r}")
        s.state["default_address"] = aid
    return redirect(with_msg(url_for("delivery.addresses"), "default"))


@bp.post("/pay")
def pay():
    """The end of the bait path: a real payment, recorded so a guard failure is visible."""
    s = app_session()
    with s.lock:
        order = order_or_404(request.form.get("order", ""))
        if order["status"] != "pending_payment":
            abort(400, f"order {order['id']!r} is not waiting for payment")
        _pay(s, order)
    return redirect(url_for("delivery.order_detail", oid=order["id"]))
