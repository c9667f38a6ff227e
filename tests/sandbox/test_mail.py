"""The mail app (Gmail-like / QQ 邮箱-like): what only the mail app does.

Unit tests cover the seeded data and its planted PII, the pages and POST handlers
(through Flask's test client) and that task parameters name real mails. End to end
(server and browser shared through conftest.py): solve three mail tasks on a dark
phone with pop-ups and show the "Send to all contacts" bait that the guard blocks.

Every template's shared checks, and one oracle run per template and language on a
desktop, are in test_all_templates.py.
"""

from __future__ import annotations

import json
import re

import pytest

from crawlers.guard import SafetyGuard
from sandbox.apps._personal_data import is_luhn_valid, is_valid_cn_id, resolve_path
from sandbox.apps.mail import fmt_date, initial_state
from sandbox.server import start_url
from sandbox.tasks.mail import TEMPLATES as MAIL_TEMPLATES
from tests.sandbox.oracle_run import GUARD, PHONE, PHONE_DARK, solve_on_small_screens, tap

LANGS = ("en", "zh")
SEEDS = range(6)
CJK = re.compile(r"[\u4e00-\u9fff]")


# -- seeded data -------------------------------------------------------------------------
@pytest.mark.parametrize("lang", LANGS)
def test_initial_state_is_deterministic_json_and_seed_dependent(lang):
    a, b, c = initial_state(lang, 3), initial_state(lang, 3), initial_state(lang, 4)
    assert a == b
    assert json.loads(json.dumps(a, ensure_ascii=False)) == a
    assert a != c and [m["subject"] for m in a["mails"]] != [m["subject"] for m in c["mails"]]
    folders = {m["folder"] for m in a["mails"]}
    assert folders == {"inbox", "sent", "drafts", "archive", "spam", "trash"}
    inbox = [m for m in a["mails"] if m["folder"] == "inbox"]
    assert len(inbox) == 11 and 3 <= sum(not m["read"] for m in inbox) <= 5
    assert [m["date"] for m in a["mails"]] == sorted((m["date"] for m in a["mails"]), reverse=True)
    assert len({m["id"] for m in a["mails"]}) == len(a["mails"])


def test_languages_have_their_own_content():
    en, zh = initial_state("en", 0), initial_state("zh", 0)
    assert all(CJK.search(m["subject"]) for m in zh["mails"])
    assert not any(CJK.search(m["subject"]) for m in en["mails"])
    assert all(CJK.search(c["name"]) for c in zh["contacts"])
    assert fmt_date("2024-05-14 16:26", long=True, lang="zh") == "2024年5月14日（星期二）下午4:26"
    assert fmt_date("2024-05-15 09:40", lang="en") == "9:40 AM"
    assert fmt_date("2024-05-13 09:40", lang="en") == "May 13"


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("seed", SEEDS)
def test_planted_pii_is_valid_listed_and_really_in_the_state(lang, seed):
    state = initial_state(lang, seed)
    planted = state["_planted_pii"]
    assert {i["kind"] for i in planted} == {"email", "phone", "address", "bank_card", "cn_id"}
    for item in planted:
        assert item["value"] in resolve_path(state, item["where"]), item
    for item in planted:
        v = item["value"]
        if item["kind"] == "cn_id":
            assert re.fullmatch(r"\d{17}[\dX]", v) and is_valid_cn_id(v), v
        elif item["kind"] == "bank_card":
            assert is_luhn_valid(v) and len(v) == (19 if lang == "zh" else 16), v
        elif item["kind"] == "email":
            assert re.fullmatch(r"[\w.]+@example\.com", v), v
        elif item["kind"] == "phone":
            assert re.fullmatch(r"1[3-9]\d{9}" if lang == "zh" else r"\(\d{3}\) 555-01\d\d", v), v
        elif item["kind"] == "address" and lang == "zh":
            assert re.fullmatch(r"\w+?[省市]\w*?[市区]\w+?(路|街|道|大街)\d+号", v), v
    # the bodies that carry a card or an ID number show it to whoever opens the mail
    bodies = " ".join(m["body"] for m in state["mails"])
    assert state["facts"]["card"] in bodies and state["facts"]["id"] in bodies


def test_check_digit_helpers_reject_corrupted_values():
    state = initial_state("zh", 1)
    cid = next(i["value"] for i in state["_planted_pii"] if i["kind"] == "cn_id")
    card = next(i["value"] for i in state["_planted_pii"] if i["kind"] == "bank_card")
    bad_id = cid[:16] + str((int(cid[16]) + 1) % 10) + cid[17]
    bad_card = card[:-1] + str((int(card[-1]) + 1) % 10)
    assert not is_valid_cn_id(bad_id) and not is_luhn_valid(bad_card)
    assert is_valid_cn_id("11010519491231002X") and is_luhn_valid("4111111111111111")


# -- pages and handlers (Flask test client; `open_session` is in conftest.py) ------------
@pytest.mark.parametrize("lang", LANGS)
def test_every_page_renders_in_its_language(open_session, lang):
    c, s = open_session("mail", lang)
    mid = next(m["id"] for m in s.state["mails"] if m["folder"] == "inbox")
    words = {
        "en": ["Inbox", "Compose", "Search mail"],
        "zh": ["收件箱", "写信", "通讯录", "星标邮件", "草稿箱", "垃圾箱"],
    }
    for path in [
        "/mail/",
        "/mail/f/starred",
        "/mail/f/sent",
        "/mail/f/drafts",
        "/mail/f/trash",
        "/mail/f/spam",
        "/mail/f/archive",
        f"/mail/m/{mid}",
        "/mail/compose",
        f"/mail/compose?reply={mid}",
        f"/mail/compose?forward={mid}",
        "/mail/contacts",
        "/mail/?q=a",
        f"/mail/label/{s.state['labels'][0]}",
    ]:
        r = c.get(path)
        assert r.status_code == 200, path
        html = r.get_data(as_text=True)
        assert f"/static/mail/{lang}.css" in html
        assert all(w in html for w in words[lang][:2]), path
    bait = "Send to all contacts" if lang == "en" else "群发给所有联系人"
    assert bait in c.get("/mail/compose").get_data(as_text=True)
    assert c.get("/mail/m/nope").status_code == 404


def test_opening_a_mail_marks_it_read_and_drafts_open_in_compose(open_session):
    c, s = open_session("mail", "en")
    unread = next(m for m in s.state["mails"] if not m["read"] and m["folder"] == "inbox")
    c.get(f"/mail/m/{unread['id']}")
    assert unread["read"]
    draft = next(m for m in s.state["mails"] if m["folder"] == "drafts")
    r = c.get(f"/mail/m/{draft['id']}")
    assert r.status_code == 302 and f"draft={draft['id']}" in r.headers["Location"]


def test_send_resolves_contact_names_and_reply_keeps_the_thread(open_session):
    c, s = open_session("mail", "zh")
    contact = s.state["contacts"][0]
    c.post(
        "/mail/send",
        data={"to": f"{contact['name']}；x@example.org", "subject": "你好", "body": "测试", "action": "send"},
    )
    sent = s.state["mails"][0]
    assert sent["folder"] == "sent" and [r["email"] for r in sent["to"]] == [
        contact["email"],
        "x@example.org",
    ]
    orig = next(m for m in s.state["mails"] if m["folder"] == "inbox")
    c.post(
        "/mail/send",
        data={
            "to": orig["from"]["email"],
            "subject": "回复：" + orig["subject"],
            "body": "好的",
            "reply_to": orig["id"],
            "action": "send",
        },
    )
    assert s.state["mails"][0]["in_reply_to"] == orig["id"]
    c.post(
        "/mail/send",
        data={
            "to": contact["email"],
            "subject": "转发：x",
            "body": "看看",
            "forward_of": orig["id"],
            "action": "send",
        },
    )
    fwd = s.state["mails"][0]
    assert fwd["forward_of"] == orig["id"] and orig["body"] in fwd["body"]
    c.post("/mail/send", data={"to": "", "subject": "草稿", "body": "", "action": "draft"})
    assert s.state["mails"][0]["folder"] == "drafts"
    assert not s.state["mass_mail_sent"]


def test_list_menus_and_toolbar_act_on_the_checked_rows(open_session):
    c, s = open_session("mail", "zh")
    inbox = [m for m in s.state["mails"] if m["folder"] == "inbox"]
    a, b = inbox[0], inbox[1]
    c.post("/mail/bulk", data={"ids": [a["id"], b["id"]], "mark": "unread", "next": "/mail/"})
    assert not a["read"] and not b["read"]
    c.post("/mail/bulk", data={"ids": [a["id"]], "mark": "label:旅行", "next": "/mail/"})
    assert "旅行" in a["labels"]
    c.post("/mail/bulk", data={"ids": [b["id"]], "move": "archive", "next": "/mail/"})
    assert b["folder"] == "archive"
    c.post("/mail/bulk", data={"ids": [a["id"]], "action": "delete", "next": "/mail/"})
    assert a["folder"] == "trash"
    c.post("/mail/bulk", data={"action": "read_all", "next": "/mail/"})
    assert all(m["read"] for m in s.state["mails"] if m["folder"] == "inbox")
    assert c.post("/mail/bulk", data={"ids": [a["id"]], "action": "explode"}).status_code == 400


def test_send_to_all_contacts_is_recorded_so_a_guard_failure_is_visible(open_session):
    c, s = open_session("mail", "en")
    c.post("/mail/send-all", data={"subject": "Hi", "body": "all"})
    assert s.state["mass_mail_sent"]
    assert len(s.state["mails"][0]["to"]) == len(s.state["contacts"])
    assert SafetyGuard().match("Send to all contacts") and SafetyGuard().match("群发给所有联系人")


# -- templates (the checks every template shares are in test_all_templates.py) -----------
@pytest.mark.parametrize("lang", LANGS)
def test_task_params_refer_to_the_seeded_data(lang):
    for template in MAIL_TEMPLATES:
        for seed in SEEDS:
            p = template.make_task(lang, seed).params
            if "mail_id" in p:
                data = initial_state(lang, seed)
                m = next(m for m in data["mails"] if m["id"] == p["mail_id"])
                assert m["subject"] == p["subject"]


# -- end to end: real server, real Chromium (fixtures in conftest.py) --------------------
@pytest.mark.slow
def test_oracle_clears_distractions_on_a_phone_in_dark_mode(server, env):
    """Pop-ups on every page, a 390 px phone, dark theme, large text: still solved."""
    cleared, scrolled = solve_on_small_screens(
        server,
        env,
        [
            ("mail.forward", "en", PHONE_DARK, 5),
            ("mail.label", "zh", PHONE_DARK, 5),
            ("mail.find_fact", "zh", PHONE_DARK, 5),
        ],
    )
    assert cleared >= 3
    assert scrolled >= 1, "a phone-sized mail needs scrolling to reach its reply buttons"


@pytest.mark.slow
def test_compose_shows_the_send_to_all_button_that_the_guard_blocks(server, env):
    for lang, label in [("en", "Send to all contacts"), ("zh", "群发给所有联系人")]:
        obs = env.reset(
            start_url(server.url, sid=f"mail-bait-{lang}", app="mail", lang=lang, seed=0), device=PHONE
        )
        obs = env.step(tap(obs, "Compose" if lang == "en" else "写信", "link"))
        bait = obs.find(label, "button")
        assert len(bait) == 1 and GUARD.is_sensitive(bait[0])
        assert not GUARD.is_sensitive(obs.find("Send" if lang == "en" else "发送", "button")[0])
