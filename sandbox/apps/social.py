"""Social: a Twitter/Reddit-like feed (en) and a 微博-style feed (zh).

Both languages share the routes and the state; each has its own templates
(templates/social/<lang>/). The seeded data: users, posts with topics
(#Hashtag in English, #话题# in Chinese), comments, trends (热搜), who the
user follows, likes and bookmarks (收藏). Synthetic personal data is planted
in some bios and posts and listed in `state["_planted_pii"]`.

The seeded content and shared formatting are in `_social_content`, the state
model (seeded data and the helpers tasks use) in `_social_state`; this module
holds the routes.
"""

from __future__ import annotations

from flask import Blueprint, abort, redirect, request, url_for

from . import AppSpec
from ._social_content import (
    NEW_POST_SOURCE,
    age_label,
    count_label,
    snippet,
    text_parts,
    topic_tag,
)
from ._social_state import (
    feed,
    initial_state,
    newest_first,
    post_by_id,
    search_posts,
    search_users,
    toggle_follow,
    topic_posts,
    user_by_handle,
    user_by_id,
)

# -- pages -------------------------------------------------------------------------
bp = Blueprint("social", __name__)
SORTS = ["top", "latest", "likes"]
PAGE_SIZE = 10


def _post_or_404(state: dict, pid: str) -> dict:
    p = post_by_id(state, pid)
    if p is None:
        abort(404, f"no post {pid!r}")
    return p


def _session():
    from ..server import current_session

    return current_session(bp.name)


def _render(template: str, **ctx):
    from ..server import render_page

    s = _session()
    lang, state = s.lang, s.state
    return render_page(
        template,
        user=lambda uid: user_by_id(state, uid),
        post=lambda pid: post_by_id(state, pid),
        snip=lambda text: snippet(text, lang),
        count=lambda n: count_label(n, lang),
        age=lambda m: age_label(m, lang),
        tag=lambda t: topic_tag(t, lang),
        parts=lambda text: text_parts(text, lang),
        me=user_by_id(state, state["me"]),
        trends=state["trends"],
        suggestions=[
            u for u in state["users"] if u["id"] not in state["following"] and u["id"] != state["me"]
        ][:3],
        here=request.full_path.rstrip("?"),
        notice=request.args.get("msg"),
        **ctx,
    )


def _back(default: str) -> str:
    nxt = request.form.get("next", "")
    if nxt.startswith("/social/") and "//" not in nxt:
        return nxt
    return default


def _text(field: str, limit: int = 280) -> str:
    text = " ".join(request.form.get(field, "").split())
    if len(text) > limit:
        abort(400, f"field {field!r} is longer than {limit} characters")
    return text


@bp.get("/")
def home():
    s = _session()
    tab = request.args.get("tab", "all")
    page = max(1, request.args.get("page", 1, type=int))
    posts = feed(s.state)
    if tab == "following":
        mine = set(s.state["following"]) | {s.state["me"]}
        posts = [p for p in posts if p["author"] in mine]
    shown = posts[: PAGE_SIZE * page]
    return _render("home.html", posts=shown, more=len(posts) > len(shown), page=page, tab=tab)


@bp.get("/post/<pid>")
def post_page(pid: str):
    s = _session()
    p = _post_or_404(s.state, pid)
    return _render("post.html", p=p)


@bp.get("/repost/<pid>")
def repost_page(pid: str):
    s = _session()
    p = _post_or_404(s.state, pid)
    return _render("repost.html", p=p)


@bp.get("/search")
def search_page():
    s = _session()
    q = request.args.get("q", "").strip()[:100]
    sort = request.args.get("sort", "top")
    if sort not in SORTS:
        sort = "top"
    with s.lock:
        if q:
            hist = s.state["search_history"]
            hist.append({"q": q, "sort": sort})
            del hist[:-20]
        posts = search_posts(s.state, q, sort)
        people = search_users(s.state, q)
    return _render("search.html", q=q, sort=sort, posts=posts, people=people)


@bp.get("/topic/<path:topic>")
def topic_page(topic: str):
    s = _session()
    trend = next((t for t in s.state["trends"] if t["topic"] == topic), None)
    posts = topic_posts(s.state, topic)
    if trend is None and not posts:
        abort(404, f"no topic {topic!r}")
    return _render("topic.html", topic=topic, trend=trend, posts=posts)


@bp.get("/trending")
def trending():
    return _render("trending.html")


@bp.get("/bookmarks")
def bookmarks():
    s = _session()
    posts = [post_by_id(s.state, pid) for pid in reversed(s.state["bookmarks"])]
    return _render("bookmarks.html", posts=[p for p in posts if p])


@bp.get("/u/<handle>")
def profile(handle: str):
    s = _session()
    u = user_by_handle(s.state, handle)
    if u is None:
        abort(404, f"no user {handle!r}")
    posts = newest_first([p for p in s.state["posts"] if p["author"] == u["id"]])
    return _render("profile.html", u=u, posts=posts)


# -- actions (POST, then redirect) -------------------------------------------------
def _new_post(state: dict, text: str, repost_of: str | None = None) -> dict:
    p = {
        "id": f"t{state['next_id']}",
        "author": state["me"],
        "text": text,
        "topic": None,
        "keyword": None,
        "age": 0,
        "likes": 0,
        "reposts": 0,
        "comments": [],
        "source": NEW_POST_SOURCE[state["lang"]],
        "repost_of": repost_of,
    }
    for t in state["trends"]:
        if topic_tag(t["topic"], state["lang"]) in text:
            p["topic"] = t["topic"]
            break
    state["next_id"] += 1
    state["posts"].append(p)
    return p


@bp.post("/post")
def create_post():
    s = _session()
    text = _text("text")
    if not text:
        return redirect(url_for("social.home", msg="empty"))
    with s.lock:
        _new_post(s.state, text)
    return redirect(url_for("social.home", msg="posted"))


def _toggle(listname: str, pid: str, counter: str | None = None):
    s = _session()
    with s.lock:
        p = _post_or_404(s.state, pid)
        items = s.state[listname]
        if pid in items:
            items.remove(pid)
            if counter:
                p[counter] = max(0, p[counter] - 1)
        else:
            items.append(pid)
            if counter:
                p[counter] += 1
    return redirect(_back(url_for("social.home")))


@bp.post("/like/<pid>")
def like(pid: str):
    return _toggle("liked", pid, "likes")


@bp.post("/bookmark/<pid>")
def bookmark(pid: str):
    return _toggle("bookmarks", pid)


@bp.post("/comment/<pid>")
def comment(pid: str):
    s = _session()
    text = _text("text")
    with s.lock:
        p = _post_or_404(s.state, pid)
        if text:
            p["comments"].append({"author": s.state["me"], "text": text})
    return redirect(url_for("social.post_page", pid=pid, msg="commented" if text else "empty"))


@bp.post("/repost/<pid>")
def repost(pid: str):
    s = _session()
    text = _text("text")
    with s.lock:
        p = _post_or_404(s.state, pid)
        p["reposts"] += 1
        _new_post(s.state, text, repost_of=pid)
    return redirect(url_for("social.home", msg="reposted"))


@bp.post("/follow/<uid>")
def follow(uid: str):
    s = _session()
    with s.lock:
        u = user_by_id(s.state, uid)
        if u is None or uid == s.state["me"]:
            abort(404, f"no user {uid!r} to follow")
        toggle_follow(s.state, u)
    return redirect(_back(url_for("social.profile", handle=u["handle"])))


SPEC = AppSpec(name="social", blueprint=bp, initial_state=initial_state, title={"en": "Chirp", "zh": "微言"})
