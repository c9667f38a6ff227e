"""The notes app (Keep-like / 印象笔记 + 小红书收藏夹): what only the notes app does.

Unit tests cover the seeded data and its planted PII, the pages and POST handlers
(through Flask's test client) and that task parameters name real notes and saved
items. End to end (server and browser shared through conftest.py): solve three notes
tasks on a dark phone with pop-ups.

Every template's shared checks, and one oracle run per template and language on a
desktop, are in test_all_templates.py.
"""

from __future__ import annotations

import json
import re

import pytest

from sandbox.apps._personal_data import is_luhn_valid, is_valid_cn_id, resolve_path
from sandbox.apps.notes import initial_state
from sandbox.tasks.notes import TEMPLATES as NOTES_TEMPLATES
from tests.sandbox.oracle_run import PHONE_DARK, solve_on_small_screens

LANGS = ("en", "zh")
SEEDS = range(6)
CJK = re.compile(r"[\u4e00-\u9fff]")


# -- seeded data -------------------------------------------------------------------------
@pytest.mark.parametrize("lang", LANGS)
def test_initial_state_is_deterministic_json_and_seed_dependent(lang):
    a, b, c = initial_state(lang, 3), initial_state(lang, 3), initial_state(lang, 4)
    assert a == b
    assert json.loads(json.dumps(a, ensure_ascii=False)) == a
    assert a != c and a["facts"]["wifi"] != c["facts"]["wifi"]
    live = [n for n in a["notes"] if not n["deleted"]]
    assert len(live) == 9 and len(a["notes"]) == 10
    assert sum(n["pinned"] for n in live) == 2 and sum(n["favourite"] for n in live) == 2
    # the notes that information tasks ask about are never in the trash
    assert {"wifi", "door"} <= {n["key"] for n in live}
    assert len(a["saved"]) == 7 and all(i["group"] in a["groups"] + [None] for i in a["saved"])


def test_languages_have_their_own_content():
    en, zh = initial_state("en", 0), initial_state("zh", 0)
    assert all(CJK.search(n["title"]) for n in zh["notes"] if n["key"] != "wifi")
    assert not any(CJK.search(n["title"]) for n in en["notes"])
    assert zh["groups"][0] == "美食" and en["groups"][0] == "Recipes"
    assert all(CJK.search(i["title"]) for i in zh["saved"])


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("seed", SEEDS)
def test_planted_pii_is_valid_listed_and_really_in_the_state(lang, seed):
    state = initial_state(lang, seed)
    planted = state["_planted_pii"]
    assert {i["kind"] for i in planted} == {"email", "phone", "address", "bank_card", "cn_id"}
    for item in planted:
        assert item["value"] in resolve_path(state, item["where"]), item
        assert item["where"].startswith("notes.") and item["where"].endswith(".body")
    for item in planted:
        v = item["value"]
        if item["kind"] == "cn_id":
            assert is_valid_cn_id(v), v
        elif item["kind"] == "bank_card":
            assert is_luhn_valid(v), v
        elif item["kind"] == "phone" and lang == "zh":
            assert re.fullmatch(r"1[3-9]\d{9}", v), v
    # a Chinese mobile number and a Chinese address are planted in the English app too
    values = [i["value"] for i in planted]
    assert any(re.fullmatch(r"1[3-9]\d{9}", v) for v in values)
    assert any(re.search(r"[省市].+区.+号$", v) for v in values)


# -- pages and handlers (Flask test client; `open_session` is in conftest.py) ------------
@pytest.mark.parametrize("lang", LANGS)
def test_every_page_renders_in_its_language(open_session, lang):
    c, s = open_session("notes", lang)
    nid = s.state["notes"][0]["id"]
    tag = s.state["notes"][0]["tags"][0]
    words = {"en": ["Search notes", "Favourites", "Trash"], "zh": ["新建笔记", "搜索笔记", "收藏夹"]}
    for path in [
        "/notes/",
        f"/notes/n/{nid}",
        "/notes/new",
        "/notes/favourites",
        "/notes/tags",
        "/notes/trash",
        "/notes/?q=a",
        f"/notes/?tag={tag}",
        f"/notes/favourites?group={s.state['groups'][0]}",
    ]:
        r = c.get(path)
        assert r.status_code == 200, path
        html = r.get_data(as_text=True)
        assert f"/static/notes/{lang}.css" in html and all(w in html for w in words[lang]), path
    assert c.get("/notes/n/nope").status_code == 404


def test_note_handlers_create_edit_tag_pin_and_trash(open_session):
    c, s = open_session("notes", "zh")
    c.post("/notes/new", data={"title": "新笔记", "body": "内容", "tags": "重要，待办, 重要"})
    n = s.state["notes"][-1]
    assert (n["title"], n["body"], n["tags"]) == ("新笔记", "内容", ["重要", "待办"])
    c.post(f"/notes/n/{n['id']}/save", data={"title": "改名", "body": "新内容"})
    assert n["title"] == "改名" and n["body"] == "新内容"
    c.post(f"/notes/n/{n['id']}/tag", data={"tag": "#旅行"})
    c.post(f"/notes/n/{n['id']}/tag", data={"remove": "待办"})
    assert n["tags"] == ["重要", "旅行"]
    for action, key, value in [
        ("pin", "pinned", True),
        ("fav", "favourite", True),
        ("unfav", "favourite", False),
    ]:
        c.post(f"/notes/n/{n['id']}/act", data={"action": action})
        assert n[key] is value
    r = c.post(f"/notes/n/{n['id']}/act", data={"action": "delete"})
    assert n["deleted"] and not n["pinned"] and "msg=deleted" in r.headers["Location"]
    assert n["id"] not in c.get("/notes/").get_data(as_text=True)
    c.post(f"/notes/n/{n['id']}/act", data={"action": "restore"})
    assert not n["deleted"]
    assert c.post(f"/notes/n/{n['id']}/act", data={"action": "burn"}).status_code == 400


def test_search_and_tag_filter(open_session):
    c, s = open_session("notes", "en", seed=2)
    wifi = next(n for n in s.state["notes"] if n["key"] == "wifi")
    html = c.get("/notes/?q=wi-fi").get_data(as_text=True)
    assert wifi["title"] in html and "1 note" in html
    tag = "home"
    n_home = sum(tag in n["tags"] for n in s.state["notes"] if not n["deleted"])
    html = c.get(f"/notes/?tag={tag}").get_data(as_text=True)
    assert html.count("<article") == n_home


def test_saved_items_move_remove_and_new_groups(open_session):
    c, s = open_session("notes", "zh")
    item = s.state["saved"][0]
    c.post("/notes/groups/new", data={"name": "周末"})
    c.post("/notes/groups/new", data={"name": "周末"})
    assert s.state["groups"].count("周末") == 1
    c.post(f"/notes/saved/{item['id']}/move", data={"group": "周末"})
    assert item["group"] == "周末"
    c.post(f"/notes/saved/{item['id']}/move", data={"group": ""})
    assert item["group"] is None
    assert c.post(f"/notes/saved/{item['id']}/move", data={"group": "不存在"}).status_code == 400
    c.post(f"/notes/saved/{item['id']}/remove")
    assert item not in s.state["saved"]


# -- templates (the checks every template shares are in test_all_templates.py) -----------
@pytest.mark.parametrize("lang", LANGS)
def test_task_params_refer_to_the_seeded_data(lang):
    for template in NOTES_TEMPLATES:
        for seed in SEEDS:
            p = template.make_task(lang, seed).params
            data = initial_state(lang, seed)
            if "note_id" in p:
                n = next(n for n in data["notes"] if n["id"] == p["note_id"])
                assert n["title"] == p["title"]
            if "item_id" in p:
                assert any(i["id"] == p["item_id"] for i in data["saved"])


# -- end to end: real server, real Chromium (fixtures in conftest.py) --------------------
@pytest.mark.slow
def test_oracle_clears_distractions_on_a_phone_in_dark_mode(server, env):
    """Pop-ups on every page, a 390 px phone, dark theme, large text: still solved."""
    cleared, scrolled = solve_on_small_screens(
        server,
        env,
        [
            ("notes.pin", "en", PHONE_DARK, 5),
            ("notes.new_group", "zh", PHONE_DARK, 5),
            ("notes.find_fact", "zh", PHONE_DARK, 5),
        ],
    )
    assert cleared >= 3
    assert scrolled >= 1, "on a phone, note cards and bookmarks sit below the fold"
