"""Task templates of the mobile social app (Pixly / 小橙书), touch-first.

Plans point at controls by the names the pages give them (built by the same
helpers in sandbox/apps/mobile_social.py): a feed card is a link named
"<title>, by <author>, <n> likes" / "<title>，<author>，<n>赞", a photo of a
carousel is an img "Photo 2 of 4: ..." / "图片 2/4：..." (only the shown slide
is in the tree, so reaching the Nth photo takes N-1 swipes), a comment is a
button "Comment by <name>: <text>" / "<name>的评论：<text>".

Gestures the plans need: Swipe (featured carousel, photo carousel, pull to
refresh on the feed), LONG_PRESS (a feed card's menu, a comment's menu), the
soft keyboard's action key ("Search"/"搜索", "Send"/"发送") and bottom sheets
(topics when posting, report reasons).
"""

from __future__ import annotations

import re

from schemas.actions import ActionType
from schemas.observation import Observation
from schemas.records import Element

from ..apps.mobile_social import (
    FEATURED_SIZE,
    REPORT_REASONS,
    all_topics,
    count_label,
    feed,
    newest_first,
    note_by_id,
    search_notes,
    user_by_id,
)
from .base import Answer, Fill, Finish, Swipe, Tap, Target, TaskTemplate

# Fixed names of the pages' controls, per language.
NAMES = {
    "en": {
        "search_tab": "Search",
        "search_box": "Search Pixly",
        "search_key": "Search",
        "send_key": "Send",
        "comment_box": "Add a comment",
        "new_post": "New post",
        "title_box": "Title",
        "caption_box": "Caption",
        "add_topic": "Add topic",
        "publish": "Share",
        "featured": "Featured posts",
        "photos": "Photos",
        "feed": "Feed",
        "not_interested": "Not interested",
        "report": "Report",
        "like": "Like,",
        "save": "Save,",
    },
    "zh": {
        "search_tab": "搜索",
        "search_box": "搜索笔记和用户",
        "search_key": "搜索",
        "send_key": "发送",
        "comment_box": "说点什么",
        "new_post": "发笔记",
        "title_box": "标题",
        "caption_box": "正文",
        "add_topic": "添加话题",
        "publish": "发布",
        "featured": "精选笔记",
        "photos": "笔记图片",
        "feed": "笔记流",
        "not_interested": "不感兴趣",
        "report": "举报",
        "like": "点赞 ",
        "save": "收藏 ",
    },
}
ORDINALS = {"en": {2: "2nd", 3: "3rd", 4: "4th", 5: "5th"}, "zh": {2: "2", 3: "3", 4: "4", 5: "5"}}
# Feed tasks pick among the first notes, so the card is a few scrolls away at most.
FEED_TOP = 4

NEW_NOTES = {
    "en": [
        ("Sunday farmers market", "Peaches are finally in season.", "FoodDiary"),
        ("Morning light on the bay", "Up at six for this and it was worth it.", "PhotoOfTheDay"),
        ("First loaf of the year", "Still learning, but the crumb is getting there.", "Sourdough"),
        ("Weekend in the mountains", "Two days, no signal, lots of trails.", "Hiking"),
        ("Chapter one done", "Our book club starts a new novel tonight.", "BookClub"),
    ],
    "zh": [
        ("周末逛早市", "水蜜桃终于上市了，甜到心里", "快手菜"),
        ("海边的清晨", "六点起床拍到的，值了", "摄影技巧"),
        ("新年第一个欧包", "还在练习，组织越来越好了", "烘焙"),
        ("山里的周末", "两天没有信号，走了好多山路", "徒步"),
        ("三月读书打卡", "读书会今晚开始读新书", "读书笔记"),
    ],
}
# How people ask for the newest post after a refresh.
REFRESH_WORDINGS = {
    "en": [
        "Pull down to refresh the feed. Who posted the newest post?",
        "Refresh my home feed (pull it down) and tell me who the latest post is from.",
        "Pull to refresh, then tell me whose post is at the top now.",
    ],
    "zh": [
        "下拉刷新一下首页，最新的那篇笔记是谁发的？",
        "帮我下拉刷新首页，看看最新一篇笔记的作者是谁",
        "刷新一下首页（往下拉），现在排在最前面的笔记是谁发的？",
    ],
}
COMMENT_TEXTS = {
    "en": ["Saving this for later!", "This is so helpful, thank you", "Wow, great shot"],
    "zh": ["太有用了，收藏了", "拍得真好看", "已经照着做了，谢谢分享"],
}


# -- targets --------------------------------------------------------------------------
def starting(prefix: str):
    """Pick the first candidate whose name starts with `prefix`."""

    def pick(cands: list[Element]) -> Element | None:
        return next((e for e in cands if e.name.startswith(prefix)), None)

    return pick


def card(title: str, lang: str) -> Target:
    """A note's card in a feed, search results or a profile grid (not a featured slide)."""
    sep = "，" if lang == "zh" else ", by "
    return Target(title + sep, "link", pick=starting(title + sep))


def named(key: str, lang: str, role: str) -> Target:
    return Target(NAMES[lang][key], role, exact=True)


def tab(key: str, lang: str) -> Target:
    return named(key, lang, "link")


def like_button(lang: str) -> Target:
    return Target(NAMES[lang]["like"], "button", pick=starting(NAMES[lang]["like"]))


def save_button(lang: str) -> Target:
    return Target(NAMES[lang]["save"], "button", pick=starting(NAMES[lang]["save"]))


def menu_item(key: str, lang: str) -> list:
    """Tap an item of a long-press menu (a list, so plans can splice it in)."""
    return [Tap(named(key, lang, "menuitem"))]


def search_steps(query: str, lang: str) -> list:
    """Open Search, type the query and press the keyboard's Search/搜索 key."""
    return [
        Tap(tab("search_tab", lang)),
        Fill(named("search_box", lang, "searchbox"), query),
        Tap(named("search_key", lang, "button")),
    ]


def _note_params(data: dict, note: dict) -> dict:
    return {"nid": note["id"], "title": note["title"], "author": user_by_id(data, note["author"])["name"]}


def _feed_top(data: dict) -> list[dict]:
    return feed(data)[:FEED_TOP]


def _q(title: str, lang: str) -> str:
    return f"《{title}》" if lang == "zh" else f'"{title}"'


# -- reading answers from the live screen ------------------------------------------------
PHOTO_RE = {"en": re.compile(r"^Photo (\d+) of \d+: (.+)$"), "zh": re.compile(r"^图片 (\d+)/\d+：(.+)$")}
CARD_RE = {"en": re.compile(r"^.+, by (.+), [\d,]+ likes$"), "zh": re.compile(r"^.+，(.+)，[\d.万]+赞$")}
LIKE_RE = {
    "en": re.compile(r"^(?:Like|Unlike), ([\d,]+) likes$"),
    "zh": re.compile(r"^(?:点赞|已点赞) ([\d.万]+)$"),
}


def read_photo(lang: str):
    """The caption of the photo the carousel shows now."""

    def read(obs: Observation) -> str:
        for e in obs.elements:
            m = PHOTO_RE[lang].match(e.name)
            if e.role == "img" and m:
                return m.group(2)
        return ""

    return read


def read_first_card_author(lang: str):
    """The author of the first card of the feed (the newest note)."""

    def read(obs: Observation) -> str:
        for e in obs.elements:
            m = CARD_RE[lang].match(e.name)
            if e.role == "link" and m:
                return m.group(1)
        return ""

    return read


def read_likes(lang: str):
    def read(obs: Observation) -> str:
        for e in obs.elements:
            m = LIKE_RE[lang].match(e.name)
            if e.role == "button" and m:
                return m.group(1)
        return ""

    return read


class MobileSocialTemplate(TaskTemplate):
    app = "mobile_social"


# -- action tasks ------------------------------------------------------------------------
class PostNote(MobileSocialTemplate):
    """Post through the compose page, with a topic from the topic bottom sheet."""

    template_id = "mobile_social.post_note"

    def sample_params(self, data, rng, lang):
        title, text, topic = rng.choice(NEW_NOTES[lang])
        return {"title": title, "text": text, "topic": topic}

    def instruction(self, p, lang):
        if lang == "zh":
            return f"发一篇笔记，标题“{p['title']}”，正文“{p['text']}”，带上话题#{p['topic']}"
        return (
            f'Share a new post titled "{p["title"]}" with the caption "{p["text"]}" and tag it #{p["topic"]}.'
        )

    def plan(self, p, lang):
        return [
            Tap(tab("new_post", lang)),
            Tap(named("add_topic", lang, "button")),
            Tap(Target(f"#{p['topic']}", "button", exact=True)),
            Fill(named("title_box", lang, "textbox"), p["title"]),
            Fill(named("caption_box", lang, "textbox"), p["text"]),
            Tap(named("publish", lang, "button")),
            Finish(),
        ]

    def success(self, p, state, answer, lang):
        return any(
            n["author"] == state["me"]
            and n["title"] == p["title"]
            and n["text"] == p["text"]
            and p["topic"] in n["topics"]
            for n in state["notes"]
        )


class CommentNote(MobileSocialTemplate):
    """Comment through the soft keyboard's Send/发送 key."""

    template_id = "mobile_social.comment_note"

    def sample_params(self, data, rng, lang):
        note = rng.choice(_feed_top(data))
        return {**_note_params(data, note), "text": rng.choice(COMMENT_TEXTS[lang])}

    def instruction(self, p, lang):
        if lang == "zh":
            return f"在{p['author']}的笔记{_q(p['title'], lang)}下评论：{p['text']}"
        return f'Comment "{p["text"]}" on {p["author"]}\'s post {_q(p["title"], lang)}.'

    def plan(self, p, lang):
        return [
            Tap(card(p["title"], lang)),
            Fill(named("comment_box", lang, "textbox"), p["text"]),
            Tap(named("send_key", lang, "button")),
            Finish(),
        ]

    def success(self, p, state, answer, lang):
        note = note_by_id(state, p["nid"])
        return note is not None and any(
            c["author"] == state["me"] and c["text"] == p["text"] for c in note["comments"]
        )


class FeaturedSave(MobileSocialTemplate):
    """Swipe the featured carousel to its Nth card, open it, save (收藏) it."""

    template_id = "mobile_social.featured_save"

    def sample_params(self, data, rng, lang):
        options = [k for k in range(2, FEATURED_SIZE + 1) if data["featured"][k - 1] not in data["saved"]]
        k = rng.choice(options)
        return {**_note_params(data, note_by_id(data, data["featured"][k - 1])), "k": k}

    def instruction(self, p, lang):
        if lang == "zh":
            return f"在首页顶部的精选轮播里滑到第{ORDINALS[lang][p['k']]}张，打开那篇笔记并收藏"
        return (
            f"On the home feed, swipe the featured carousel to its {ORDINALS[lang][p['k']]} "
            f"card, open that post and save it."
        )

    def plan(self, p, lang):
        slide = f"精选 {p['k']}/" if lang == "zh" else f"Featured {p['k']} of"
        return [
            *[Swipe(named("featured", lang, "region"), "left")] * (p["k"] - 1),
            Tap(Target(slide, "link", pick=starting(slide))),
            Tap(save_button(lang)),
            Finish(),
        ]

    def success(self, p, state, answer, lang):
        return p["nid"] in state["saved"]


class NotInterested(MobileSocialTemplate):
    """Long-press a feed card and pick Not interested / 不感兴趣."""

    template_id = "mobile_social.not_interested"

    def sample_params(self, data, rng, lang):
        return _note_params(data, rng.choice(_feed_top(data)))

    def instruction(self, p, lang):
        if lang == "zh":
            return f"首页里{p['author']}的笔记{_q(p['title'], lang)}我不想看，长按它选择“不感兴趣”"
        return f"I don't want posts like {p['author']}'s {_q(p['title'], lang)}: long-press it in the feed and mark it Not interested."

    def plan(self, p, lang):
        return [
            Tap(card(p["title"], lang), kind=ActionType.LONG_PRESS),
            *menu_item("not_interested", lang),
            Finish(),
        ]

    def success(self, p, state, answer, lang):
        return p["nid"] in state["not_interested"]


class ReportSpamComment(MobileSocialTemplate):
    """Find a note by search, long-press its spam comment, report it as spam (a sheet)."""

    template_id = "mobile_social.report_spam_comment"

    def sample_params(self, data, rng, lang):
        spammed = [(n, c) for n in data["notes"] for c in n["comments"] if c["author"] == "u13"]
        note, comment = rng.choice(spammed)
        return {**_note_params(data, note), "cid": comment["id"], "spammer": user_by_id(data, "u13")["name"]}

    def instruction(self, p, lang):
        if lang == "zh":
            return (
                f"{p['author']}的笔记{_q(p['title'], lang)}下面有条“{p['spammer']}”发的刷单广告评论，"
                f"帮我把它举报为垃圾广告"
            )
        return (
            f"There's a spam comment from {p['spammer']} under {p['author']}'s post "
            f"{_q(p['title'], lang)}. Report it as spam."
        )

    def plan(self, p, lang):
        comment = f"{p['spammer']}的评论：" if lang == "zh" else f"Comment by {p['spammer']}:"
        reason = REPORT_REASONS["spam"][1 if lang == "zh" else 0]
        return [
            *search_steps(p["title"], lang),
            Tap(card(p["title"], lang)),
            Tap(Target(comment, "button", pick=starting(comment)), kind=ActionType.LONG_PRESS),
            *menu_item("report", lang),
            Tap(Target(reason, "button", exact=True)),
            Finish(),
        ]

    def success(self, p, state, answer, lang):
        return {"kind": "comment", "id": p["cid"], "reason": "spam"} in state["reports"]


class FollowAuthor(MobileSocialTemplate):
    template_id = "mobile_social.follow_author"

    def sample_params(self, data, rng, lang):
        notes = [n for n in _feed_top(data) if n["author"] not in data["following"]]
        if not notes:  # every top author followed: take one further down
            notes = [n for n in feed(data) if n["author"] not in data["following"]][:1]
        note = rng.choice(notes)
        return {**_note_params(data, note), "uid": note["author"]}

    def instruction(self, p, lang):
        if lang == "zh":
            return f"关注笔记{_q(p['title'], lang)}的作者"
        return f"Follow whoever posted {_q(p['title'], lang)}."

    def plan(self, p, lang):
        follow = f"关注{p['author']}" if lang == "zh" else f"Follow {p['author']}"
        return [Tap(card(p["title"], lang)), Tap(Target(follow, "button", exact=True)), Finish()]

    def success(self, p, state, answer, lang):
        return p["uid"] in state["following"]


class SearchLike(MobileSocialTemplate):
    """Search a topic with the keyboard's Search key, open a result, like it."""

    template_id = "mobile_social.search_like"

    def sample_params(self, data, rng, lang):
        topic = rng.choice(
            [t for t in all_topics(data) if any(n["id"] not in data["liked"] for n in search_notes(data, t))]
        )
        note = rng.choice([n for n in search_notes(data, topic) if n["id"] not in data["liked"]])
        return {**_note_params(data, note), "query": topic}

    def instruction(self, p, lang):
        if lang == "zh":
            return f"搜索“{p['query']}”，给{p['author']}的笔记{_q(p['title'], lang)}点个赞"
        return f"Search for {p['query']} and like {p['author']}'s post {_q(p['title'], lang)}."

    def plan(self, p, lang):
        return [
            *search_steps(p["query"], lang),
            Tap(card(p["title"], lang)),
            Tap(like_button(lang)),
            Finish(),
        ]

    def success(self, p, state, answer, lang):
        return p["nid"] in state["liked"]


# -- information tasks -------------------------------------------------------------------
class PhotoAnswer(MobileSocialTemplate):
    """Swipe a note's photo carousel to the Nth photo and say what it shows."""

    template_id = "mobile_social.photo_answer"

    def sample_params(self, data, rng, lang):
        note = rng.choice(_feed_top(data))
        k = rng.randint(2, len(note["photos"]))
        return {**_note_params(data, note), "k": k}

    def instruction(self, p, lang):
        if lang == "zh":
            return f"{p['author']}的笔记{_q(p['title'], lang)}里，第{p['k']}张图片拍的是什么？"
        return f"In {p['author']}'s post {_q(p['title'], lang)}, what does photo {p['k']} show?"

    def plan(self, p, lang):
        return [
            Tap(card(p["title"], lang)),
            *[Swipe(named("photos", lang, "region"), "left")] * (p["k"] - 1),
            Answer(read_photo(lang)),
        ]

    def success(self, p, state, answer, lang):
        note = note_by_id(state, p["nid"])
        want = note["photos"][p["k"] - 1]["caption"]
        return bool(answer) and want.lower() in answer.lower()


class RefreshNewestAuthor(MobileSocialTemplate):
    """Pull the feed down to refresh; the refresh brings the newest note."""

    template_id = "mobile_social.refresh_newest_author"

    def sample_params(self, data, rng, lang):
        # The pool's first note is the newest once the feed is refreshed (initial_state
        # makes its author differ from the newest note before the refresh).
        return {
            "author": user_by_id(data, data["fresh_pool"][0]["author"])["name"],
            "title": data["fresh_pool"][0]["title"],
            "wording": rng.randrange(3),
        }

    def instruction(self, p, lang):
        return REFRESH_WORDINGS[lang][p["wording"]]

    def plan(self, p, lang):
        return [Swipe(named("feed", lang, "main"), "down"), Answer(read_first_card_author(lang))]

    def success(self, p, state, answer, lang):
        if state["refreshes"] < 1 or not answer:
            return False
        # Whatever is newest now (a second refresh brings newer notes still).
        newest = newest_first([n for n in state["notes"] if n["author"] != state["me"]])[0]
        return user_by_id(state, newest["author"])["name"].lower() in answer.lower()


class AnswerLikes(MobileSocialTemplate):
    template_id = "mobile_social.answer_likes"

    def sample_params(self, data, rng, lang):
        return _note_params(data, rng.choice(_feed_top(data)))

    def instruction(self, p, lang):
        if lang == "zh":
            return f"{p['author']}的笔记{_q(p['title'], lang)}有多少个赞？"
        return f"How many likes does {p['author']}'s post {_q(p['title'], lang)} have?"

    def plan(self, p, lang):
        return [Tap(card(p["title"], lang)), Answer(read_likes(lang))]

    def success(self, p, state, answer, lang):
        note = note_by_id(state, p["nid"])
        if note is None or not answer:
            return False
        n = note["likes"]
        if re.search(rf"(?<![\d.]){n}(?![\d.])", answer.replace(",", "")):
            return True
        # 小橙书 shows 10000 and up as "1.2万".
        return lang == "zh" and re.search(rf"(?<![\d.]){re.escape(count_label(n, lang))}", answer) is not None


TEMPLATES = [
    PostNote(),
    CommentNote(),
    FeaturedSave(),
    NotInterested(),
    ReportSpamComment(),
    FollowAuthor(),
    SearchLike(),
    PhotoAnswer(),
    RefreshNewestAuthor(),
    AnswerLikes(),
]
