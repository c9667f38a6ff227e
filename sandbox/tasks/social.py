"""Task templates for social (Chirp in English, 微言 in Chinese).

A post's buttons carry its author and the start of its text in their names
("Like post by Maya Chen: Just finished my first half marathon, 4,096 likes",
"赞跑步的小林的微博：今天终于跑完了人生第一个半马，4096人赞过"), so a plan
can point at one post without coordinates, and "the most liked post" is
picked by reading the counts in those names.
"""

from __future__ import annotations

import re

from schemas.observation import Observation
from schemas.records import Element

from ..apps._social_content import count_label, snippet
from ..apps._social_state import feed, post_by_id, search_posts, topic_posts, user_by_id
from .base import Answer, Choose, Fill, Finish, Tap, Target, TaskTemplate

SEARCH_BOX = {"en": "Search Chirp", "zh": "搜索微言"}
COMPOSE_BOX = {"en": "What's happening?", "zh": "有什么新鲜事想分享给大家？"}
POST_BUTTON = {"en": "Post", "zh": "发送"}
REPLY_BOX = {"en": "Post your reply", "zh": "发布你的评论"}
REPLY_BUTTON = {"en": "Reply", "zh": "评论"}
REPOST_BOX = {"en": "Add a comment", "zh": "说说分享心得"}
REPOST_BUTTON = {"en": "Repost", "zh": "转发"}
TRENDING_LINK = {"en": "Explore", "zh": "热搜"}
SORT_SELECT = {"en": "Sort by", "zh": "排序方式"}
LATEST_OPTION = {"en": "Latest", "zh": "实时"}
LIKE_PREFIX = {"en": "Like post by", "zh": "赞"}
BOOKMARK_PREFIX = {"en": "Bookmark post by", "zh": "收藏"}
LIKES_RE = {"en": re.compile(r"([\d,]+) likes$"), "zh": re.compile(r"(\d+)人赞过$")}

NEW_POSTS = {
    "en": [
        "Trying the new coffee place on Elm Street today. The cortado is excellent.",
        "Anyone up for a bike ride along the river this weekend? #CityCycling",
        "Finally finished my first puzzle of 1000 pieces!",
        "Reading on the balcony with a cup of tea, perfect Sunday #BookClub",
    ],
    "zh": [
        "今天天气真好，下班去江边走走",
        "#周末烘焙# 第一次做戚风蛋糕，居然没塌！",
        "终于拼完了人生第一幅一千片的拼图",
        "周末在阳台晒太阳看书，太舒服了 #读书打卡#",
    ],
}
REPLIES = {
    "en": ["Congratulations, well done!", "This looks amazing!", "Thanks for sharing this."],
    "zh": ["太棒了，恭喜！", "看起来好厉害", "感谢分享，学到了"],
}
REPOST_COMMENTS = {
    "en": ["Worth a read.", "So true!", "Everyone should see this."],
    "zh": ["说得太对了", "转给需要的朋友", "支持一下"],
}


# -- names of a post's controls ------------------------------------------------------
def like_name(name: str, snip: str, lang: str) -> str:
    # The trailing separator stops a short snippet from matching a longer one.
    return f"赞{name}的微博：{snip}，" if lang == "zh" else f"Like post by {name}: {snip},"


def bookmark_name(name: str, snip: str, lang: str) -> str:
    return f"收藏{name}的微博：{snip}" if lang == "zh" else f"Bookmark post by {name}: {snip}"


def reply_name(name: str, snip: str, lang: str) -> str:
    return f"评论{name}的微博：{snip}" if lang == "zh" else f"Reply to post by {name}: {snip}"


def repost_name(name: str, snip: str, lang: str) -> str:
    return f"转发{name}的微博：{snip}" if lang == "zh" else f"Repost post by {name}: {snip}"


def follow_name(name: str, lang: str) -> str:
    return f"关注{name}" if lang == "zh" else f"Follow {name}"


def likes_in(name: str, lang: str) -> int | None:
    m = LIKES_RE[lang].search(name)
    return int(m.group(1).replace(",", "")) if m else None


def most_liked(lang: str):
    """Pick, among not-yet-liked like buttons, the one with the highest count."""

    def pick(cands: list[Element]) -> Element | None:
        ok = [e for e in cands if e.name.startswith(LIKE_PREFIX[lang]) and likes_in(e.name, lang) is not None]
        return max(ok, key=lambda e: likes_in(e.name, lang)) if ok else None

    return pick


def first_starting(prefix: str):
    def pick(cands: list[Element]) -> Element | None:
        return next((e for e in cands if e.name.startswith(prefix)), None)

    return pick


def person_link(p: dict, lang: str) -> Target:
    """A result in the people section of the search page."""
    name = f"{p['name']}的主页" if lang == "zh" else f"{p['name']} @{p['handle']}"
    return Target(name, "link", exact=True)


def search_step(query: str, lang: str) -> Fill:
    return Fill(Target(SEARCH_BOX[lang], "searchbox"), query, submit=True)


def _post_params(state: dict, post: dict, lang: str) -> dict:
    author = user_by_id(state, post["author"])
    return {"pid": post["id"], "author": author["name"], "snippet": snippet(post["text"], lang)}


def _quote(p: dict, lang: str) -> str:
    return f"“{p['snippet']}…”" if lang == "zh" else f'"{p["snippet"]}..."'


def _topic_choices(state: dict) -> list[str]:
    return sorted(
        {p["topic"] for p in state["posts"] if p["topic"] and len(topic_posts(state, p["topic"])) >= 2}
    )


def _my_posts(state: dict) -> list[dict]:
    return [p for p in state["posts"] if p["author"] == state["me"]]


class SocialTemplate(TaskTemplate):
    app = "social"


# -- templates -----------------------------------------------------------------------
class CreatePost(SocialTemplate):
    template_id = "social.create_post"

    def sample_params(self, data, rng, lang):
        return {"text": rng.choice(NEW_POSTS[lang])}

    def instruction(self, p, lang):
        if lang == "zh":
            return f"发一条微博，内容是：{p['text']}"
        return f"Post the following: {p['text']}"

    def plan(self, p, lang):
        return [
            Fill(Target(COMPOSE_BOX[lang], "textbox"), p["text"]),
            Tap(Target(POST_BUTTON[lang], "button", exact=True)),
            Finish(),
        ]

    def success(self, p, state, answer, lang):
        return any(q["text"] == p["text"] and q["repost_of"] is None for q in _my_posts(state))


class LikePost(SocialTemplate):
    template_id = "social.like_post"

    def sample_params(self, data, rng, lang):
        post = rng.choice([q for q in feed(data)[:8] if q["id"] not in data["liked"]])
        return _post_params(data, post, lang)

    def instruction(self, p, lang):
        if lang == "zh":
            return f"给{p['author']}那条{_quote(p, lang)}的微博点赞"
        return f"Like {p['author']}'s post that starts with {_quote(p, lang)}"

    def plan(self, p, lang):
        return [Tap(Target(like_name(p["author"], p["snippet"], lang), "button")), Finish()]

    def success(self, p, state, answer, lang):
        return p["pid"] in state["liked"]


class CommentPost(SocialTemplate):
    template_id = "social.comment_post"

    def sample_params(self, data, rng, lang):
        post = rng.choice(feed(data)[:8])
        return {**_post_params(data, post, lang), "text": rng.choice(REPLIES[lang])}

    def instruction(self, p, lang):
        if lang == "zh":
            return f"评论{p['author']}的微博{_quote(p, lang)}，内容为“{p['text']}”"
        return f'Reply "{p["text"]}" to {p["author"]}\'s post that starts with {_quote(p, lang)}'

    def plan(self, p, lang):
        return [
            Tap(Target(reply_name(p["author"], p["snippet"], lang), "link")),
            Fill(Target(REPLY_BOX[lang], "textbox"), p["text"]),
            Tap(Target(REPLY_BUTTON[lang], "button", exact=True)),
            Finish(),
        ]

    def success(self, p, state, answer, lang):
        post = post_by_id(state, p["pid"])
        return post is not None and any(
            c["author"] == state["me"] and c["text"] == p["text"] for c in post["comments"]
        )


class FollowUser(SocialTemplate):
    template_id = "social.follow_user"

    def sample_params(self, data, rng, lang):
        u = rng.choice(
            [u for u in data["users"] if u["id"] != data["me"] and u["id"] not in data["following"]]
        )
        return {"uid": u["id"], "name": u["name"], "handle": u["handle"]}

    def instruction(self, p, lang):
        if lang == "zh":
            return f"搜索用户“{p['name']}”，进入他的主页并关注"
        return f"Search for {p['name']} (@{p['handle']}), open their profile and follow them."

    def plan(self, p, lang):
        return [
            search_step(p["name"], lang),
            Tap(person_link(p, lang)),
            Tap(Target(follow_name(p["name"], lang), "button", exact=True)),
            Finish(),
        ]

    def success(self, p, state, answer, lang):
        return p["uid"] in state["following"]


class BookmarkPost(SocialTemplate):
    template_id = "social.bookmark_post"

    def sample_params(self, data, rng, lang):
        post = rng.choice([q for q in data["posts"] if q["keyword"] and q["id"] not in data["bookmarks"]])
        return {**_post_params(data, post, lang), "keyword": post["keyword"]}

    def instruction(self, p, lang):
        if lang == "zh":
            return f"搜索“{p['keyword']}”，收藏{p['author']}发的那条相关微博"
        return f'Search for "{p["keyword"]}" and bookmark {p["author"]}\'s post about it.'

    def plan(self, p, lang):
        return [
            search_step(p["keyword"], lang),
            Tap(Target(bookmark_name(p["author"], p["snippet"], lang), "button")),
            Finish(),
        ]

    def success(self, p, state, answer, lang):
        return p["pid"] in state["bookmarks"]


class TopicLikeTop(SocialTemplate):
    template_id = "social.topic_like_top"

    def sample_params(self, data, rng, lang):
        options = []
        for topic in _topic_choices(data):
            top = max(topic_posts(data, topic), key=lambda q: q["likes"])
            if top["id"] not in data["liked"]:
                options.append((topic, top))
        topic, top = rng.choice(options)
        return {"topic": topic, "pid": top["id"]}

    def instruction(self, p, lang):
        if lang == "zh":
            return f"在热搜榜中打开话题#{p['topic']}#，给其中点赞数最多的那条微博点赞"
        return f"Open the trending topic #{p['topic']} and like its most-liked post."

    def plan(self, p, lang):
        trend = Target(f"：{p['topic']}" if lang == "zh" else f": #{p['topic']}", "link")
        return [
            Tap(Target(TRENDING_LINK[lang], "link", exact=True)),
            Tap(trend),
            Tap(Target(LIKE_PREFIX[lang], "button", pick=most_liked(lang))),
            Finish(),
        ]

    def success(self, p, state, answer, lang):
        return p["pid"] in state["liked"]


class RepostPost(SocialTemplate):
    template_id = "social.repost"

    def sample_params(self, data, rng, lang):
        post = rng.choice(feed(data)[:8])
        return {**_post_params(data, post, lang), "text": rng.choice(REPOST_COMMENTS[lang])}

    def instruction(self, p, lang):
        if lang == "zh":
            return f"转发{p['author']}的微博{_quote(p, lang)}，并写上“{p['text']}”"
        return (
            f'Repost {p["author"]}\'s post that starts with {_quote(p, lang)} with the comment "{p["text"]}"'
        )

    def plan(self, p, lang):
        return [
            Tap(Target(repost_name(p["author"], p["snippet"], lang), "link")),
            Fill(Target(REPOST_BOX[lang], "textbox"), p["text"]),
            Tap(Target(REPOST_BUTTON[lang], "button", exact=True)),
            Finish(),
        ]

    def success(self, p, state, answer, lang):
        return any(q["repost_of"] == p["pid"] and q["text"] == p["text"] for q in _my_posts(state))


class SortLatestBookmark(SocialTemplate):
    """Sort search results with the <select> and bookmark the newest post."""

    template_id = "social.sort_latest_bookmark"

    def sample_params(self, data, rng, lang):
        options = []
        for topic in _topic_choices(data):
            query = f"#{topic}" if lang == "en" else topic
            newest = search_posts(data, query, "latest")[0]
            if newest["id"] not in data["bookmarks"]:
                options.append((query, newest))
        query, newest = rng.choice(options)
        return {"query": query, "pid": newest["id"]}

    def instruction(self, p, lang):
        if lang == "zh":
            return f"搜索“{p['query']}”，把排序方式改为“实时”，然后收藏最新的一条微博"
        return f"Search for {p['query']}, sort the results by Latest, and bookmark the newest post."

    def plan(self, p, lang):
        return [
            search_step(p["query"], lang),
            Choose(Target(SORT_SELECT[lang], "combobox"), LATEST_OPTION[lang]),
            Tap(Target(BOOKMARK_PREFIX[lang], "button", pick=first_starting(BOOKMARK_PREFIX[lang]))),
            Finish(),
        ]

    def success(self, p, state, answer, lang):
        sorted_search = any(h["q"] == p["query"] and h["sort"] == "latest" for h in state["search_history"])
        return sorted_search and p["pid"] in state["bookmarks"]


# -- information tasks ---------------------------------------------------------------
def read_followers(lang: str):
    pattern = re.compile(r"^粉丝 (\S+)$" if lang == "zh" else r"^([\d,.]+万?) Followers$")

    def read(obs: Observation) -> str:
        for e in obs.elements:
            m = pattern.match(e.name)
            if e.role == "link" and m:
                return m.group(1)
        return ""

    return read


def read_top_trend(lang: str):
    pattern = re.compile(r"^热搜第1名：(.+)$" if lang == "zh" else r"^Trending 1: (#\S+)$")

    def read(obs: Observation) -> str:
        for e in obs.elements:
            m = pattern.match(e.name)
            if m:
                return m.group(1)
        return ""

    return read


class AnswerFollowers(SocialTemplate):
    template_id = "social.answer_followers"

    def sample_params(self, data, rng, lang):
        u = rng.choice([u for u in data["users"] if u["id"] != data["me"]])
        return {"uid": u["id"], "name": u["name"], "handle": u["handle"]}

    def instruction(self, p, lang):
        if lang == "zh":
            return f"“{p['name']}”有多少粉丝？"
        return f"How many followers does {p['name']} (@{p['handle']}) have?"

    def plan(self, p, lang):
        return [search_step(p["name"], lang), Tap(person_link(p, lang)), Answer(read_followers(lang))]

    def success(self, p, state, answer, lang):
        u = user_by_id(state, p["uid"])
        if u is None or not answer:
            return False
        n = u["followers"]
        digits = answer.replace(",", "")
        return count_label(n, lang) in answer or re.search(rf"(?<!\d){n}(?!\d)", digits) is not None


class AnswerTopTrend(SocialTemplate):
    template_id = "social.answer_top_trend"

    def sample_params(self, data, rng, lang):
        return {"top": data["trends"][0]["topic"]}

    def instruction(self, p, lang):
        if lang == "zh":
            return "现在热搜榜第一名是什么话题？"
        return "What is the number one trending topic right now?"

    def plan(self, p, lang):
        return [Tap(Target(TRENDING_LINK[lang], "link", exact=True)), Answer(read_top_trend(lang))]

    def success(self, p, state, answer, lang):
        top = state["trends"][0]["topic"]
        return bool(answer) and top.lower() in answer.lower()


TEMPLATES = [
    CreatePost(),
    LikePost(),
    CommentPost(),
    FollowUser(),
    BookmarkPost(),
    TopicLikeTop(),
    RepostPost(),
    SortLatestBookmark(),
    AnswerFollowers(),
    AnswerTopTrend(),
]
