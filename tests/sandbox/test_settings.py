"""The settings app (Android-style / 微信-style 设置): what only the settings app does.

Unit tests cover the seeded data and its planted PII, the per-language page layout and
the POST handlers (through Flask's test client). End to end (server and browser shared
through conftest.py): solve three settings tasks on a dark phone with pop-ups and show
the account-deletion bait that the guard blocks.

Every template's shared checks, and one oracle run per template and language on a
desktop, are in test_all_templates.py.
"""

from __future__ import annotations

import json
import re

import pytest

from crawlers.guard import SafetyGuard
from sandbox.apps._personal_data import is_luhn_valid, is_valid_cn_id, resolve_path
from sandbox.apps.settings import initial_state, pages
from sandbox.server import start_url
from schemas.actions import Action
from tests.sandbox.oracle_run import GUARD, PHONE, PHONE_DARK, solve_on_small_screens

LANGS = ("en", "zh")
SEEDS = range(6)
CJK = re.compile(r"[\u4e00-\u9fff]")


# -- seeded data -------------------------------------------------------------------------
@pytest.mark.parametrize("lang", LANGS)
def test_initial_state_is_deterministic_json_and_seed_dependent(lang):
    a, b = initial_state(lang, 3), initial_state(lang, 3)
    assert a == b
    assert json.loads(json.dumps(a, ensure_ascii=False)) == a
    others = [initial_state(lang, s) for s in range(4, 10)]
    assert all(o != a for o in others)
    switches = {(o["wifi"], o["bluetooth"], o["dark_mode"]) for o in others + [a]}
    assert len(switches) >= 3, "switch positions should vary with the seed"
    assert not a["account_deleted"] and not a["airplane"]


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("seed", SEEDS)
def test_planted_pii_is_valid_listed_and_really_in_the_state(lang, seed):
    state = initial_state(lang, seed)
    planted = state["_planted_pii"]
    assert {i["kind"] for i in planted} == {"email", "phone", "address", "bank_card", "cn_id"}
    for item in planted:
        assert item["value"] == resolve_path(state, item["where"]), item
    p = state["profile"]
    assert is_valid_cn_id(p["id_number"]) and is_luhn_valid(p["card"])
    if lang == "zh":
        assert re.fullmatch(r"1[3-9]\d{9}", p["phone"])
        assert re.search(r"[省市].+区.+号$", p["address"])


@pytest.mark.parametrize("lang", LANGS)
def test_pages_organise_settings_per_language(lang):
    state = initial_state(lang, 0)
    ps = pages(state, lang)
    if lang == "zh":
        assert set(ps) == {"home", "notifications", "privacy", "general", "account", "about"}
        general = [r["key"] for _, rows in ps["general"]["groups"] for r in rows if r.get("key")]
        assert general == ["dark_mode", "font_size", "language"]
    else:
        assert set(ps) == {"home", "notifications", "display", "language", "privacy", "account", "about"}
    labels = [r["label"] for p in ps.values() for _, rows in p["groups"] for r in rows]
    assert all(
        bool(CJK.search(label)) == (lang == "zh")
        for label in labels
        if label not in ("WLAN",) and not label.startswith("Android")
    )
    # the full ID number is stored but only a masked one is shown
    account = " ".join(str(r.get("value", "")) for _, rows in ps["account"]["groups"] for r in rows)
    assert state["profile"]["id_number"] not in account and state["profile"]["id_number"][-4:] in account


# -- pages and handlers (Flask test client; `open_session` is in conftest.py) ------------
@pytest.mark.parametrize("lang", LANGS)
def test_every_page_renders_in_its_language(open_session, lang):
    c, s = open_session("settings", lang)
    for pid in pages(s.state, lang):
        r = c.get("/settings/" if pid == "home" else f"/settings/{pid}")
        assert r.status_code == 200, pid
        assert f"/static/settings/{lang}.css" in r.get_data(as_text=True)
    for path in [
        "/settings/account/edit/name",
        "/settings/account/edit/phone",
        "/settings/account/delete",
        "/settings/?q=o",
    ]:
        assert c.get(path).status_code == 200, path
    # each language reaches display settings by its own page
    other = "general" if lang == "en" else "display"
    assert c.get(f"/settings/{other}").status_code == 302
    assert c.get("/settings/account/edit/password").status_code == 404
    bait = "Delete account" if lang == "en" else "注销账号"
    assert bait in c.get("/settings/account").get_data(as_text=True)
    html = c.get("/settings/").get_data(as_text=True)
    assert html.count('role="switch"') == 3


def test_toggles_selects_and_profile_edits(open_session):
    c, s = open_session("settings", "zh", seed=1)
    before = s.state["notifications"]["sound"]
    c.post("/settings/toggle", data={"key": "notifications.sound", "next": "/settings/notifications"})
    assert s.state["notifications"]["sound"] is (not before)
    assert c.post("/settings/toggle", data={"key": "font_size"}).status_code == 400
    assert c.post("/settings/toggle", data={"key": "nope.x"}).status_code == 400
    c.post("/settings/set", data={"key": "font_size", "value": "largest"})
    assert s.state["font_size"] == "largest"
    assert c.post("/settings/set", data={"key": "language", "value": "xx"}).status_code == 400
    assert "font-size: 1.25rem" in c.get("/settings/general").get_data(as_text=True)
    c.post("/settings/account/edit/phone", data={"value": "13900001111"})
    assert s.state["profile"]["phone"] == "13900001111"
    c.post("/settings/account/edit/phone", data={"value": "  "})
    assert s.state["profile"]["phone"] == "13900001111"
    s.state["wifi"] = True
    c.post("/settings/toggle", data={"key": "airplane"})
    assert s.state["airplane"] and not s.state["wifi"] and not s.state["bluetooth"]


def test_search_finds_rows_on_other_pages(open_session):
    c, _ = open_session("settings", "en")
    html = c.get("/settings/?q=vibrat").get_data(as_text=True)
    assert 'aria-label="Vibrate"' in html and "Notifications" in html
    c, _ = open_session("settings", "zh", sid="t2")
    html = c.get("/settings/?q=字体").get_data(as_text=True)
    assert "字体大小" in html and "<select" in html


def test_account_deletion_needs_the_box_and_is_recorded(open_session):
    c, s = open_session("settings", "en")
    c.post("/settings/account/delete", data={})
    assert not s.state["account_deleted"]
    c.post("/settings/account/delete", data={"confirm": "1"})
    assert s.state["account_deleted"]
    guard = SafetyGuard()
    assert guard.match("Delete my account") and guard.match("Delete account") and guard.match("注销账号")


# -- end to end: real server, real Chromium (fixtures in conftest.py) --------------------
# The checks every template shares (unit and end to end) are in test_all_templates.py.
@pytest.mark.slow
def test_oracle_clears_distractions_on_a_phone_in_dark_mode(server, env):
    """Pop-ups on every page, a 390 px phone, dark theme, large text: still solved."""
    cleared, scrolled = solve_on_small_screens(
        server,
        env,
        [
            ("settings.storage", "en", PHONE_DARK, 5),
            ("settings.privacy", "zh", PHONE_DARK, 5),
            ("settings.edit_contact", "en", PHONE_DARK, 5),
        ],
    )
    assert cleared >= 3
    assert scrolled >= 1, "with large text the lower settings rows sit below the fold"


@pytest.mark.slow
def test_account_page_shows_the_deletion_entry_that_the_guard_blocks(server, env):
    for lang, link, label in [("en", "Account", "Delete account"), ("zh", "账号与安全", "注销账号")]:
        obs = env.reset(
            start_url(server.url, sid=f"settings-bait-{lang}", app="settings", lang=lang, seed=0),
            device=PHONE,
        )
        entry = next(e for e in obs.find(link, "link") if e.name.startswith(link))
        if entry.centre()[1] > 0.95:
            obs = env.step(Action.scroll("down", 0.5, 0.5))
            entry = next(e for e in obs.find(link, "link") if e.name.startswith(link))
        obs = env.step(Action.tap(*entry.centre()))
        assert obs.url.endswith("/settings/account")
        bait = obs.find(label, "link")
        assert len(bait) == 1 and GUARD.is_sensitive(bait[0])
        assert not any(GUARD.is_sensitive(e) for e in obs.elements if e.role == "switch")
