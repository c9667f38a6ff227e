"""Mobile social's state model: the seeded session data (`initial_state`) and the
helpers that read and change it, shared by the pages and the task templates."""

from __future__ import annotations

import random

from ._mobile_social_content import (
    ACTIVITY_KINDS,
    APP,
    COMMENTS,
    FEATURED_SIZE,
    FRESH_NOTES,
    FRESH_PER_REFRESH,
    ME,
    NOTES,
    PLACES,
    SPAM,
    SPAMMER,
    USERS,
)
from ._personal_data import Planted, address, phone

# The same users/following model as the web social app.
from .social import user_by_id


# -- seeded state ------------------------------------------------------------------
def _note(
    nid: str, row: tuple, rng: random.Random, lang: str, age: int, users: list[dict], next_comment: list[int]
) -> dict:
    author, title, text, topics, captions = row
    comments = []
    for c in rng.sample(COMMENTS[lang], rng.randint(1, 3)):
        next_comment[0] += 1
        comments.append(
            {
                "id": f"c{next_comment[0]}",
                "author": rng.choice(users[:12])["id"],
                "text": c,
                "likes": rng.randint(0, 120),
            }
        )
    return {
        "id": nid,
        "author": author,
        "title": title,
        "text": text,
        "topics": list(topics),
        "photos": [{"caption": c, "hue": rng.randrange(360)} for c in captions],
        "likes": 0,
        "saves": rng.randint(5, 3000),
        "comments": comments,
        "age": age,
        "place": rng.choice(PLACES[lang]),
    }


def initial_state(lang: str, seed: int) -> dict:
    """The app's data for one session: pure and deterministic in (lang, seed)."""
    if lang not in ("en", "zh"):
        raise ValueError(f"lang={lang!r}: expected 'en' or 'zh'")
    rng = random.Random(f"{APP}:{lang}:{seed}")
    planted = Planted()
    users = []
    for uid, name, handle, bio in USERS[lang] + [SPAMMER[lang]]:
        users.append(
            {
                "id": uid,
                "name": name,
                "handle": handle,
                "bio": bio,
                "followers": rng.randint(300, 98_000),
                "following": rng.randint(20, 900),
            }
        )
    me_id, me_name, me_handle, me_bio = ME[lang]
    users.append(
        {
            "id": me_id,
            "name": me_name,
            "handle": me_handle,
            "bio": me_bio,
            "followers": rng.randint(20, 300),
            "following": 0,
        }
    )

    # Contact details in two creators' bios: what creators really post.
    mail_user, phone_user = rng.sample(users[:12], 2)
    mail = f"{mail_user['handle'].replace('_', '.')}.collab{rng.randint(1, 99)}@example.com"
    mail_user["bio"] += f" 商务合作：{mail}" if lang == "zh" else f" Collabs: {mail}"
    tel = phone(rng, lang)
    phone_user["bio"] += f" 约拍/合作电话：{tel}" if lang == "zh" else f" Bookings: {tel}"

    counter = [0]
    ages = rng.sample(range(30, 60 * 24 * 6), len(NOTES[lang]))
    notes = [_note(f"n{i + 1}", row, rng, lang, ages[i], users, counter) for i, row in enumerate(NOTES[lang])]
    # Distinct like counts, so a count names one note.
    for n, likes in zip(notes, rng.sample(range(40, 26_000), len(notes))):
        n["likes"] = likes
    # A spam comment with a phone number on two notes (what a report task targets).
    spam_phone = phone(rng, lang)
    spammed = rng.sample(notes, 2)
    for n in spammed:
        counter[0] += 1
        pos = rng.randint(0, len(n["comments"]))
        n["comments"].insert(
            pos,
            {
                "id": f"c{counter[0]}",
                "author": "u13",
                "text": SPAM[lang].format(phone=spam_phone),
                "likes": 0,
            },
        )
    # A caption with a pick-up address (a giveaway).
    giveaway = rng.choice([n for n in notes if n not in spammed])
    where = address(rng, lang)
    giveaway["text"] += (
        f" 顺便送一张旧餐桌，自提地址：{where}"
        if lang == "zh"
        else f" P.S. giving away our old table, pick-up at {where}"
    )

    fresh_rows = list(FRESH_NOTES[lang])
    rng.shuffle(fresh_rows)
    newest_author = min(notes, key=lambda n: n["age"])["author"]
    # The first note a refresh brings is by someone else than today's newest note,
    # so "who posted the newest note" has a different answer after a refresh.
    fresh_rows.sort(key=lambda r: r[0] == newest_author)
    fresh = [
        {
            **_note("", row, rng, lang, 0, users, counter),
            "likes": rng.randint(1, 30),
            "saves": rng.randint(0, 10),
        }
        for row in fresh_rows
    ]

    users_index = {u["id"]: k for k, u in enumerate(users)}
    notes_index = {n["id"]: k for k, n in enumerate(notes)}
    planted.add("email", mail, f"users.{users_index[mail_user['id']]}.bio")
    planted.add("phone", tel, f"users.{users_index[phone_user['id']]}.bio")
    for n in spammed:
        k = next(i for i, c in enumerate(n["comments"]) if c["author"] == "u13")
        planted.add("phone", spam_phone, f"notes.{notes_index[n['id']]}.comments.{k}.text")
    planted.add("address", where, f"notes.{notes_index[giveaway['id']]}.text")

    creators = [u["id"] for u in users[:12]]
    following = rng.sample(creators, 3)
    liked = [n["id"] for n in rng.sample(notes, 2)]  # seeded counts include these
    saved = [n["id"] for n in rng.sample(notes, 3)]
    featured = [n["id"] for n in rng.sample(notes, FEATURED_SIZE)]
    activity = [
        {"kind": rng.choice(ACTIVITY_KINDS), "user": rng.choice(creators), "age": a}
        for a in sorted(rng.sample(range(5, 60 * 72), 8))
    ]
    users[-1]["following"] = len(following)
    return {
        "lang": lang,
        "me": me_id,
        "users": users,
        "notes": notes,
        "fresh_pool": fresh,
        "featured": featured,
        "following": following,
        "liked": liked,
        "saved": saved,
        "not_interested": [],
        "reports": [],
        "clipboard": None,
        "refreshes": 0,
        "search_history": [],
        "activity": activity,
        "mass_shares": [],
        "account_deleted": False,
        "next_note": len(notes) + 1,
        "next_comment": counter[0] + 1,
        "_planted_pii": planted.items,
    }


# -- state helpers (also used by tasks) --------------------------------------------
def note_by_id(state: dict, nid: str) -> dict | None:
    return next((n for n in state["notes"] if n["id"] == nid), None)


def comment_by_id(state: dict, cid: str) -> tuple[dict, dict] | None:
    """(note, comment) for a comment id."""
    for n in state["notes"]:
        for c in n["comments"]:
            if c["id"] == cid:
                return n, c
    return None


def newest_first(notes: list[dict]) -> list[dict]:
    # Notes of age 0 (refreshed or posted now): the later one (larger id) is newer.
    return sorted(notes, key=lambda n: (n["age"], -int(n["id"][1:])))


def feed(state: dict, tab: str = "discover") -> list[dict]:
    """The home feed, newest first, without what the user marked not interested."""
    notes = [n for n in state["notes"] if n["id"] not in state["not_interested"]]
    if tab == "following":
        notes = [n for n in notes if n["author"] in state["following"]]
    return newest_first(notes)


def search_notes(state: dict, query: str) -> list[dict]:
    """Notes whose title, caption, topics or author match every word of `query`."""
    words = query.lower().replace("#", " ").split()
    out = []
    for n in state["notes"]:
        author = user_by_id(state, n["author"]) or {}
        hay = " ".join(
            [n["title"], n["text"], " ".join(n["topics"]), author.get("name", ""), author.get("handle", "")]
        ).lower()
        if words and all(w in hay for w in words):
            out.append(n)
    return sorted(out, key=lambda n: -n["likes"])


def search_users(state: dict, query: str) -> list[dict]:
    q = query.lower().strip().lstrip("@")
    if not q:
        return []
    return [
        u
        for u in state["users"]
        if u["id"] not in (state["me"], "u13") and (q in u["name"].lower() or q in u["handle"].lower())
    ]


def all_topics(state: dict) -> list[str]:
    return sorted({t for n in state["notes"] for t in n["topics"]})


def refresh_feed(state: dict) -> list[dict]:
    """Pull-to-refresh: bring the next fresh notes into the feed.

    The first note of the pool becomes the newest (it gets the largest id), so
    what the pool lists first is what the feed shows first.
    """
    batch = state["fresh_pool"][:FRESH_PER_REFRESH]
    del state["fresh_pool"][:FRESH_PER_REFRESH]
    for n in reversed(batch):
        n["id"] = f"n{state['next_note']}"
        state["next_note"] += 1
        state["notes"].append(n)
    state["refreshes"] += 1
    return batch
