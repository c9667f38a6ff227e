"""The phone shell (_mobile_layout.html + static/mobile/gestures.js) in a real Chromium.

A tiny Flask page built on the shell exercises every widget of the gesture
contract through the shared WebEnv: touch on a phone profile (the way a crawl
drives it), mouse on a desktop profile (desktop tools). Its handlers record what
reached the server, so each test asserts on what the page really did.
"""

from __future__ import annotations

import threading

import pytest
from flask import Flask, jsonify, redirect, render_template_string, request
from werkzeug.serving import make_server

from sandbox.distractions import DISMISS_NAMES, KINDS, KINDS_MOBILE, TEXT, kinds_for, pick_distraction
from sandbox.sessions import Session
from sandbox.tasks.base import Finish, PlanOracle, Swipe, Tap, Target
from schemas.actions import Action, ActionType
from schemas.records import DeviceProfile

from .oracle_run import PHONE

# Mouse input (no touch): what desktop tools send. Phone-sized, so it costs no more to observe.
MOUSE = DeviceProfile(name="mouse", viewport_width=412, viewport_height=915)

SANDBOX = __import__("sandbox").__path__[0]

PAGE = """{% extends "_mobile_layout.html" %}
{% block title %}Shell test{% endblock %}
{% block body %}
<header class="m-header"><h1>Shell test</h1>
  <button type="button" class="m-btn" data-sheet="opts">Options</button></header>
<main class="m-main" aria-label="Feed" data-ptr="/ptr">
  <div data-carousel role="region" aria-roledescription="carousel" aria-label="Deals" style="height:160px;background:#ccd">
    {% for n in ["A", "B", "C"] %}
    <div data-slide role="group" aria-roledescription="slide" aria-label="{{ loop.index }} of 3">
      <a href="/tapped?item=slide{{ n }}" style="display:block;padding:50px">Slide {{ n }}</a></div>
    {% endfor %}
  </div>
  <form action="/search" method="get" role="search" style="padding:10px">
    <input type="search" name="q" aria-label="Search goods" data-enterkey="search" style="width:100%;height:44px">
  </form>
  <ul style="list-style:none;padding:0">
  {% for i in ["one", "two"] %}
    <li><a class="m-card" style="display:block" href="/tapped?item={{ i }}" data-longpress="menu-{{ i }}">Item {{ i }}</a></li>
  {% endfor %}
  </ul>
  {% for i in range(20) %}<p class="m-card">Filler {{ i }}</p>{% endfor %}
</main>
{% endblock %}
{% block tabbar %}<nav class="m-tabbar" aria-label="Tabs">
  <a class="m-tab" href="/page" aria-current="page"><span class="m-tab-icon" aria-hidden="true">⌂</span>Home</a>
  <a class="m-tab" href="/tapped?item=me"><span class="m-tab-icon" aria-hidden="true">☺</span>Me</a></nav>{% endblock %}
{% block overlays %}
  {% for i in ["one", "two"] %}
  <div class="m-menu" id="menu-{{ i }}" role="menu" aria-label="Item {{ i }} actions" hidden>
    <form method="post" action="/delete?item={{ i }}"><button role="menuitem">Delete</button></form>
    <button type="button" role="menuitem" data-close>Cancel</button>
  </div>
  {% endfor %}
  <div class="m-sheet" id="opts" role="dialog" aria-label="Options sheet" style="min-height:340px" hidden>
    <p>Pick an option</p><button type="button" class="m-btn" data-close>Close</button>
  </div>
{% endblock %}
"""


class ShellSite:
    """The test page and a log of what the page sent back."""

    def __init__(self):
        self.events: list[tuple[str, str]] = []
        app = Flask(
            __name__,
            template_folder=f"{SANDBOX}/templates",
            static_folder=f"{SANDBOX}/static",
            static_url_path="/static",
        )

        @app.get("/page")
        def page():
            args = request.args
            s = Session(sid="shell", app="shell", lang=args.get("lang", "en"), seed=3)
            kind = args.get("kind")
            distraction = None
            if kind:
                title, body, dismiss, other = TEXT[kind][s.lang]
                distraction = {"kind": kind, "title": title, "body": body, "dismiss": dismiss, "other": other}
            return render_template_string(PAGE, s=s, distraction=distraction)

        def log(kind, value=""):
            self.events.append((kind, value))

        @app.post("/ptr")
        def ptr():
            log("ptr")
            return jsonify(ok=True)

        @app.get("/search")
        def search():
            log("search", request.args.get("q", ""))
            return "searched"

        @app.get("/tapped")
        def tapped():
            log("tap", request.args["item"])
            return redirect("/page")

        @app.post("/delete")
        def delete():
            log("delete", request.args["item"])
            return redirect("/page")

        self._server = make_server("127.0.0.1", 0, app, threaded=True)
        self.url = f"http://127.0.0.1:{self._server.server_port}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def stop(self):
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture(scope="module")
def site():
    s = ShellSite()
    yield s
    s.stop()


def _open(env, site, device=PHONE, **query):
    site.events.clear()
    q = "&".join(f"{k}={v}" for k, v in query.items())
    return env.reset(f"{site.url}/page?{q}", device=device)


def _one_action(obs, step, lang="en"):
    return PlanOracle([step, Finish()], lang=lang).next_action(obs)


def _names(obs, role):
    return {e.name for e in obs.elements if e.role == role}


# -- unit: which interruptions a session gets ---------------------------------------------
def test_mobile_apps_get_phone_interruptions_and_web_apps_keep_theirs():
    assert kinds_for("shop") == KINDS
    for kind in KINDS_MOBILE:
        dismiss = {TEXT[kind][lang][2] for lang in ("en", "zh")}
        other = {TEXT[kind][lang][3] for lang in ("en", "zh")}
        assert dismiss <= DISMISS_NAMES and not (other & DISMISS_NAMES), kind
    # every dismiss name belongs to exactly one kind and language
    assert len(DISMISS_NAMES) == 2 * len(TEXT)
    s = Session(sid="x", app="shop", lang="en", seed=1, distraction_rate=1.0)
    picked = [pick_distraction(s) for _ in range(3)]
    assert [p["kind"] for p in picked[:2]] == s.distractions and picked[2] is None
    assert set(s.distractions) <= set(KINDS)


# -- carousel ------------------------------------------------------------------------
@pytest.mark.parametrize("device", [PHONE, MOUSE], ids=["touch", "mouse"])
def test_swipe_moves_the_carousel_one_slide(env, site, device):
    obs = _open(env, site, device)
    assert "Slide A" in _names(obs, "link") and "Slide B" not in _names(obs, "link")
    obs = env.step(_one_action(obs, Swipe(Target("Deals", role="region"), "left")))
    assert obs.last_action_error is None
    links = _names(obs, "link")
    assert "Slide B" in links and "Slide A" not in links
    assert env.page.evaluate("document.querySelector('[data-carousel]').dataset.index") == "1"
    obs = env.step(_one_action(obs, Swipe(Target("Deals", role="region"), "right")))
    obs = env.step(_one_action(obs, Swipe(Target("Deals", role="region"), "right")))
    assert "Slide C" in _names(obs, "link"), "a right swipe from the first slide wraps to the last"
    assert site.events == [], "a swipe over a slide's link must not follow it"


# -- long press ----------------------------------------------------------------------
@pytest.mark.parametrize("device", [PHONE, MOUSE], ids=["touch", "mouse"])
def test_long_press_opens_the_menu_and_a_short_tap_does_not(env, site, device):
    obs = _open(env, site, device)
    assert "Delete" not in _names(obs, "menuitem")
    obs = env.step(_one_action(obs, Tap(Target("Item one", role="link"), kind=ActionType.LONG_PRESS)))
    assert obs.last_action_error is None
    assert "Item one actions" in _names(obs, "menu")
    assert site.events == [], "the click after a long press is swallowed"
    obs = env.step(_one_action(obs, Tap(Target("Delete", role="menuitem"))))
    assert site.events == [("delete", "one")]
    obs = env.step(_one_action(obs, Tap(Target("Item two", role="link"))))
    assert site.events[-1] == ("tap", "two") and not _names(obs, "menu")


def test_menu_cancel_and_backdrop_close_it(env, site):
    obs = _open(env, site)
    obs = env.step(_one_action(obs, Tap(Target("Item two", role="link"), kind=ActionType.LONG_PRESS)))
    obs = env.step(_one_action(obs, Tap(Target("Cancel", role="menuitem"))))
    assert not _names(obs, "menu") and site.events == []


# -- pull to refresh -------------------------------------------------------------------
def test_pull_to_refresh_posts_only_from_the_top(env, site):
    obs = _open(env, site)
    pull = Swipe(Target("Feed", role="main"), "down")
    # Scrolled down, a downward drag scrolls back up instead of refreshing.
    obs = env.step(Action.scroll("down", 0.5, 0.5))
    assert env.page.evaluate("document.querySelector('.m-main').scrollTop") > 100
    obs = env.step(_one_action(obs, pull))
    assert site.events == []
    env.page.evaluate("document.querySelector('.m-main').scrollTop = 0")
    obs = env.step(_one_action(env.observe(), pull))
    assert obs.last_action_error is None
    assert site.events == [("ptr", "")]
    assert env.page.evaluate("performance.getEntriesByType('navigation')[0].type") == "reload"


@pytest.mark.parametrize("lang,text", [("en", "Release to refresh"), ("zh", "释放刷新")])
def test_pull_shows_release_to_refresh_before_letting_go(env, site, lang, text):
    _open(env, site, lang=lang)
    cdp = env.context.new_cdp_session(env.page)
    touch = lambda kind, pts: cdp.send(
        "Input.dispatchTouchEvent",
        {  # noqa: E731
            "type": kind,
            "touchPoints": [{"x": x, "y": y} for x, y in pts],
        },
    )
    touch("touchStart", [(200, 300)])
    for y in (320, 360, 400, 420):
        touch("touchMove", [(200, y)])
    assert env.page.inner_text(".m-ptr") == text
    touch("touchMove", [(200, 330)])  # back within 70 px: nothing happens on release
    touch("touchEnd", [])
    env.page.wait_for_timeout(200)
    assert site.events == [] and env.page.is_hidden(".m-ptr")


# -- bottom sheet ----------------------------------------------------------------------
def test_sheet_opens_and_closes_by_button_and_by_swiping_its_handle(env, site):
    obs = _open(env, site)
    assert "Options sheet" not in _names(obs, "dialog")
    obs = env.step(_one_action(obs, Tap(Target("Options", role="button", exact=True))))
    assert "Options sheet" in _names(obs, "dialog")
    obs = env.step(_one_action(obs, Tap(Target("Close", role="button", exact=True))))
    assert "Options sheet" not in _names(obs, "dialog")
    obs = env.step(_one_action(obs, Tap(Target("Options", role="button", exact=True))))
    obs = env.step(_one_action(obs, Swipe(Target("Options sheet", role="dialog"), "down")))
    assert obs.last_action_error is None
    assert "Options sheet" not in _names(obs, "dialog")
    # by its handle, a finger's length down
    obs = env.step(_one_action(obs, Tap(Target("Options", role="button", exact=True))))
    x, y = obs.find("Swipe down to close", "button")[0].centre()
    obs = env.step(Action(type=ActionType.SWIPE, x=x, y=y, x2=x, y2=y + 0.15, duration_ms=200))
    assert "Options sheet" not in _names(obs, "dialog")
    # a short drag is not a swipe: the sheet stays
    obs = env.step(_one_action(obs, Tap(Target("Options", role="button", exact=True))))
    x, y = obs.find("Swipe down to close", "button")[0].centre()
    obs = env.step(Action(type=ActionType.SWIPE, x=x, y=y, x2=x, y2=y + 0.03, duration_ms=200))
    assert "Options sheet" in _names(obs, "dialog") and site.events == []


# -- soft keyboard ---------------------------------------------------------------------
def test_keyboard_shows_on_focus_and_its_action_key_submits(env, site):
    obs = _open(env, site, lang="zh")
    assert "键盘" not in _names(obs, "group")
    obs = env.step(_one_action(obs, Tap(Target("Search goods", role="searchbox"))))
    kb = obs.find("键盘", "group")
    assert kb and kb[0].bbox[3] > 0.99 and kb[0].bbox[1] > 0.5, "it covers the bottom of the screen"
    obs = env.step(Action(type=ActionType.TYPE, text="鞋"))
    obs = env.step(_one_action(obs, Tap(Target("搜索", role="button", exact=True))))
    assert site.events == [("search", "鞋")]


def test_enter_submits_and_leaving_the_field_hides_the_keyboard(env, site):
    obs = _open(env, site)
    obs = env.step(_one_action(obs, Tap(Target("Search goods", role="searchbox"))))
    assert obs.find("Search", "button", exact=True), "the action key follows data-enterkey"
    obs = env.step(Action(type=ActionType.TYPE, text="mug"))
    env.page.evaluate("document.activeElement.blur()")
    assert "Keyboard" not in _names(env.observe(), "group")
    obs = env.step(_one_action(env.observe(), Tap(Target("Search goods", role="searchbox"))))
    assert "Keyboard" in _names(obs, "group")
    obs = env.step(Action.key("Enter"))
    assert site.events == [("search", "mug")]


# -- interruptions ---------------------------------------------------------------------
@pytest.mark.parametrize("kind,lang", [(k, "en" if i % 2 else "zh") for i, k in enumerate(KINDS_MOBILE)])
def test_oracle_dismisses_each_phone_interruption(env, site, kind, lang):
    obs = _open(env, site, kind=kind, lang=lang)
    title, _, dismiss, other = TEXT[kind][lang]
    assert any(e.name == title for e in obs.elements), obs.a11y_tree
    oracle = PlanOracle([Tap(Target("Item one", role="link")), Finish()], lang=lang)
    action = oracle.next_action(obs)
    assert oracle.distractions_cleared == 1 and oracle.last_target.name == dismiss
    obs = env.step(action)
    assert not any(e.name in DISMISS_NAMES or e.name == other for e in obs.elements)
    obs = env.step(oracle.next_action(obs))
    assert site.events == [("tap", "one")], "the app under the interruption works once it is gone"
