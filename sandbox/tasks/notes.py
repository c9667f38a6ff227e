"""Task templates for the notes app (Keep-like in English, 印象笔记 + 小红书收藏夹 in Chinese).

English pins from the note card; Chinese pins from the editor's toolbar.
Counting a tag reads the filtered card grid in English and the 标签 page's
counts in Chinese.
"""

from __future__ import annotations

import re

from schemas.observation import Observation

from .base import Answer, Choose, Fill, Finish, Tap, Target, TaskTemplate, When

APP = "notes"

UI = {  # control names per language
    "en": {
        "new": "New note",
        "title": "Title",
        "body": "Note",
        "tags": "Tags",
        "save": "Save",
        "clear": "Clear title",
        "add_tag": "Add tag",
        "add": "Add",
        "fav": "Add to favourites",
        "delete": "Delete note",
        "pin": "Pin",
        "favourites": "Favourites",
        "trash": "Trash",
        "search": "Search notes",
        "group_name": "Collection name",
        "create_group": "Create collection",
    },
    "zh": {
        "new": "新建笔记",
        "title": "标题",
        "body": "正文",
        "tags": "标签",
        "save": "保存",
        "clear": "清空标题",
        "add_tag": "添加标签",
        "add": "添加",
        "fav": "收藏",
        "delete": "删除",
        "pin": "置顶",
        "favourites": "收藏夹",
        "trash": "废纸篓",
        "search": "搜索笔记",
        "group_name": "分组名称",
        "create_group": "新建分组",
    },
}


def _live(state: dict) -> list[dict]:
    return [n for n in state["notes"] if not n["deleted"]]


def _note(state: dict, nid: str) -> dict | None:
    return next((n for n in state["notes"] if n["id"] == nid), None)


def _saved(state: dict, sid: str) -> dict | None:
    return next((i for i in state["saved"] if i["id"] == sid), None)


def _digits(text: str | None) -> str:
    return re.sub(r"\D", "", text or "")


def _button(name: str) -> Target:
    return Target(name, "button", exact=True)


def _textbox(name: str) -> Target:
    return Target(name, ("textbox", "searchbox"), exact=True)


def _open_note(title: str) -> Tap:
    """A note's link: the one whose name mentions the title earliest (Chinese list
    items also carry a snippet, a date and a 置顶 badge)."""
    return Tap(Target(title, "link", pick=lambda els: min(els, key=lambda e: e.name.find(title))))


def _has_text(label: str):
    """True when the text box named `label` shows a value (the tree prints it after ':')."""
    pattern = re.compile(rf'textbox "{re.escape(label)}"[^\n]*\]: \S')
    return lambda obs: bool(pattern.search(obs.a11y_tree))


def _note_params(n: dict) -> dict:
    return {"note_id": n["id"], "title": n["title"]}


class NotesTemplate(TaskTemplate):
    app = APP


NEW_NOTES = {
    "en": [
        ("Call the plumber", "Ask about the kitchen sink leak on Tuesday."),
        ("Gift for Sam", "Look for a board game under $40."),
        ("Reading goals", "Finish two books this month."),
        ("Garden", "Water the tomatoes every morning."),
    ],
    "zh": [
        ("给水管工打电话", "周二问一下厨房水槽漏水的事。"),
        ("给小明的礼物", "找一款200元以内的桌游。"),
        ("阅读目标", "这个月读完两本书。"),
        ("阳台花园", "每天早上给番茄浇水。"),
    ],
}
NEW_TAGS = {"en": ["important", "todo", "later"], "zh": ["重要", "待办", "稍后"]}


class Create(NotesTemplate):
    template_id = "notes.create"

    def sample_params(self, data, rng, lang):
        title, body = rng.choice(NEW_NOTES[lang])
        return {"title": title, "body": body}

    def instruction(self, p, lang):
        if lang == "zh":
            return f"新建一条笔记，标题是“{p['title']}”，内容写“{p['body']}”。"
        return f'Create a new note titled "{p["title"]}" that says "{p["body"]}".'

    def plan(self, p, lang):
        ui = UI[lang]
        return [
            Tap(Target(ui["new"], "link")),
            Fill(_textbox(ui["title"]), p["title"]),
            Fill(_textbox(ui["body"]), p["body"]),
            Tap(_button(ui["save"])),
            Finish(),
        ]

    def success(self, p, state, answer, lang):
        return any(n["title"] == p["title"] and p["body"] in n["body"] for n in _live(state))


class CreateTagged(NotesTemplate):
    template_id = "notes.create_tagged"

    def sample_params(self, data, rng, lang):
        title, body = rng.choice(NEW_NOTES[lang])
        return {"title": title, "body": body, "tag": rng.choice(NEW_TAGS[lang])}

    def instruction(self, p, lang):
        if lang == "zh":
            return f"新建笔记“{p['title']}”，内容是“{p['body']}”，并加上标签“{p['tag']}”。"
        return f'Add a note "{p["title"]}" saying "{p["body"]}" and tag it "{p["tag"]}".'

    def plan(self, p, lang):
        ui = UI[lang]
        return [
            Tap(Target(ui["new"], "link")),
            Fill(_textbox(ui["title"]), p["title"]),
            Fill(_textbox(ui["body"]), p["body"]),
            Fill(_textbox(ui["tags"]), p["tag"]),
            Tap(_button(ui["save"])),
            Finish(),
        ]

    def success(self, p, state, answer, lang):
        return any(
            n["title"] == p["title"] and p["body"] in n["body"] and p["tag"] in n["tags"]
            for n in _live(state)
        )


class Pin(NotesTemplate):
    template_id = "notes.pin"

    def sample_params(self, data, rng, lang):
        return _note_params(rng.choice([n for n in _live(data) if not n["pinned"]]))

    def instruction(self, p, lang):
        return f"把笔记“{p['title']}”置顶。" if lang == "zh" else f'Pin the note "{p["title"]}".'

    def plan(self, p, lang):
        if lang == "zh":
            return [_open_note(p["title"]), Tap(_button("置顶")), Finish()]
        return [Tap(_button(f"Pin note: {p['title']}")), Finish()]

    def success(self, p, state, answer, lang):
        n = _note(state, p["note_id"])
        return bool(n and n["pinned"] and not n["deleted"])


class Delete(NotesTemplate):
    template_id = "notes.delete"

    def sample_params(self, data, rng, lang):
        return _note_params(rng.choice(_live(data)))

    def instruction(self, p, lang):
        return f"删除笔记“{p['title']}”。" if lang == "zh" else f'Delete the note "{p["title"]}".'

    def plan(self, p, lang):
        return [_open_note(p["title"]), Tap(_button(UI[lang]["delete"])), Finish()]

    def success(self, p, state, answer, lang):
        n = _note(state, p["note_id"])
        return n is None or n["deleted"]


class Rename(NotesTemplate):
    template_id = "notes.rename"
    NEW = {
        "en": ["To sort out", "Ideas for June", "Misc", "Keep for later"],
        "zh": ["待整理", "六月计划", "杂记", "以后再看"],
    }

    def sample_params(self, data, rng, lang):
        n = rng.choice(_live(data))
        return {**_note_params(n), "new_title": rng.choice(self.NEW[lang])}

    def instruction(self, p, lang):
        if lang == "zh":
            return f"把笔记“{p['title']}”的标题改成“{p['new_title']}”。"
        return f'Rename the note "{p["title"]}" to "{p["new_title"]}".'

    def plan(self, p, lang):
        ui = UI[lang]
        return [
            _open_note(p["title"]),
            When(_has_text(ui["title"]), Tap(_button(ui["clear"]))),
            Fill(_textbox(ui["title"]), p["new_title"]),
            Tap(_button(ui["save"])),
            Finish(),
        ]

    def success(self, p, state, answer, lang):
        n = _note(state, p["note_id"])
        return bool(n and n["title"] == p["new_title"] and not n["deleted"])


class AddTag(NotesTemplate):
    template_id = "notes.add_tag"

    def sample_params(self, data, rng, lang):
        n = rng.choice(_live(data))
        return {**_note_params(n), "tag": rng.choice(NEW_TAGS[lang])}

    def instruction(self, p, lang):
        if lang == "zh":
            return f"给笔记“{p['title']}”添加标签“{p['tag']}”。"
        return f'Tag the note "{p["title"]}" with "{p["tag"]}".'

    def plan(self, p, lang):
        ui = UI[lang]
        return [
            _open_note(p["title"]),
            Fill(_textbox(ui["add_tag"]), p["tag"]),
            Tap(_button(ui["add"])),
            Finish(),
        ]

    def success(self, p, state, answer, lang):
        n = _note(state, p["note_id"])
        return bool(n and p["tag"] in n["tags"])


class Favourite(NotesTemplate):
    template_id = "notes.favourite"

    def sample_params(self, data, rng, lang):
        return _note_params(rng.choice([n for n in _live(data) if not n["favourite"]]))

    def instruction(self, p, lang):
        if lang == "zh":
            return f"收藏笔记“{p['title']}”。"
        return f'Add the note "{p["title"]}" to my favourites.'

    def plan(self, p, lang):
        return [_open_note(p["title"]), Tap(_button(UI[lang]["fav"])), Finish()]

    def success(self, p, state, answer, lang):
        n = _note(state, p["note_id"])
        return bool(n and n["favourite"])


class FindFact(NotesTemplate):
    """Search the notes and read a secret out of one: the answer comes from the screen."""

    template_id = "notes.find_fact"
    FACTS = {  # fact -> (note key, search words, question, answer pattern)
        "wifi": (
            "wifi",
            {"en": "Wi-Fi", "zh": "WiFi"},
            {
                "en": "What is my home Wi-Fi password? It is in one of my notes.",
                "zh": "家里的WiFi密码是多少？在笔记里找一下。",
            },
            {"en": r"Password: ([a-z0-9]+)", "zh": r"密码：([a-z0-9]+)"},
        ),
        "door": (
            "door",
            {"en": "door code", "zh": "门禁"},
            {
                "en": "What is the building door code? Check my notes.",
                "zh": "小区门禁密码是多少？查一下我的笔记。",
            },
            {"en": r"door code: (\d{4}#)", "zh": r"门禁密码：(\d{4}#)"},
        ),
    }

    def sample_params(self, data, rng, lang):
        fact = rng.choice(sorted(self.FACTS))
        n = next(n for n in data["notes"] if n["key"] == self.FACTS[fact][0])
        return {"fact": fact, **_note_params(n), "expected": data["facts"][fact]}

    def instruction(self, p, lang):
        return self.FACTS[p["fact"]][2][lang]

    def plan(self, p, lang):
        _, words, _, patterns = self.FACTS[p["fact"]]
        pattern = re.compile(patterns[lang])
        editor = f'textbox "{UI[lang]["body"]}"'

        def read(obs: Observation) -> str:
            # read the opened note's text, not the snippets of the list beside it
            tree = obs.a11y_tree
            m = pattern.search(tree, max(tree.find(editor), 0))
            return m.group(1) if m else ""

        return [
            Fill(Target(UI[lang]["search"], "searchbox"), words[lang], submit=True),
            _open_note(p["title"]),
            Answer(read),
        ]

    def success(self, p, state, answer, lang):
        return bool(answer) and p["expected"].lower() in answer.strip().lower()


def _count_cards(obs: Observation) -> str:
    return str(sum(1 for e in obs.elements if e.role == "article"))


def _tag_count(tag: str):
    """Read '<tag> N 条笔记' from the Chinese 标签 page."""
    pattern = re.compile(rf"^{re.escape(tag)}\s*(\d+)\s*条笔记")

    def read(obs: Observation) -> str:
        for e in obs.elements:
            m = pattern.match(e.name.strip())
            if e.role == "link" and m:
                return m.group(1)
        return ""

    return read


class CountTag(NotesTemplate):
    template_id = "notes.count_tag"

    def sample_params(self, data, rng, lang):
        tags = sorted({t for n in _live(data) for t in n["tags"]})
        return {"tag": rng.choice(tags)}

    def instruction(self, p, lang):
        if lang == "zh":
            return f"我有几条带“{p['tag']}”标签的笔记？"
        return f'How many of my notes are tagged "{p["tag"]}"?'

    def plan(self, p, lang):
        if lang == "zh":
            return [Tap(Target("标签", "link", exact=True)), Answer(_tag_count(p["tag"]))]
        return [Tap(Target(f"#{p['tag']}", "link", exact=True)), Answer(_count_cards)]

    def success(self, p, state, answer, lang):
        want = sum(p["tag"] in n["tags"] for n in _live(state))
        return _digits(answer) == str(want)


def _move_select(title: str, lang: str) -> Target:
    name = f"把“{title}”移到分组" if lang == "zh" else f"Move “{title}” to collection"
    return Target(name, "combobox", exact=True)


class MoveSaved(NotesTemplate):
    template_id = "notes.saved_move"

    def sample_params(self, data, rng, lang):
        item = rng.choice(data["saved"])
        group = rng.choice([g for g in data["groups"] if g != item["group"]])
        return {"item_id": item["id"], "item": item["title"], "group": group}

    def instruction(self, p, lang):
        if lang == "zh":
            return f"把收藏夹里的“{p['item']}”移到“{p['group']}”分组。"
        return f'Move the bookmark "{p["item"]}" to the "{p["group"]}" collection.'

    def plan(self, p, lang):
        return [
            Tap(Target(UI[lang]["favourites"], "link", exact=True)),
            Choose(_move_select(p["item"], lang), p["group"]),
            Finish(),
        ]

    def success(self, p, state, answer, lang):
        item = _saved(state, p["item_id"])
        return bool(item and item["group"] == p["group"])


class RemoveSaved(NotesTemplate):
    template_id = "notes.saved_remove"

    def sample_params(self, data, rng, lang):
        item = rng.choice(data["saved"])
        return {"item_id": item["id"], "item": item["title"]}

    def instruction(self, p, lang):
        if lang == "zh":
            return f"在收藏夹里取消收藏“{p['item']}”。"
        return f'Remove "{p["item"]}" from my bookmarks.'

    def plan(self, p, lang):
        name = f"取消收藏：{p['item']}" if lang == "zh" else f"Remove bookmark: {p['item']}"
        return [Tap(Target(UI[lang]["favourites"], "link", exact=True)), Tap(_button(name)), Finish()]

    def success(self, p, state, answer, lang):
        return _saved(state, p["item_id"]) is None


class NewGroup(NotesTemplate):
    template_id = "notes.new_group"
    NAMES = {"en": ["Weekend", "Ideas", "Gifts"], "zh": ["周末", "灵感", "礼物"]}

    def sample_params(self, data, rng, lang):
        item = rng.choice(data["saved"])
        return {"item_id": item["id"], "item": item["title"], "group": rng.choice(self.NAMES[lang])}

    def instruction(self, p, lang):
        if lang == "zh":
            return f"在收藏夹新建一个“{p['group']}”分组，然后把“{p['item']}”移进去。"
        return f'Create a bookmark collection called "{p["group"]}" and move "{p["item"]}" into it.'

    def plan(self, p, lang):
        ui = UI[lang]
        return [
            Tap(Target(ui["favourites"], "link", exact=True)),
            Fill(_textbox(ui["group_name"]), p["group"]),
            Tap(_button(ui["create_group"])),
            Choose(_move_select(p["item"], lang), p["group"]),
            Finish(),
        ]

    def success(self, p, state, answer, lang):
        item = _saved(state, p["item_id"])
        return p["group"] in state["groups"] and bool(item and item["group"] == p["group"])


class Restore(NotesTemplate):
    template_id = "notes.restore"

    def sample_params(self, data, rng, lang):
        return _note_params(rng.choice([n for n in data["notes"] if n["deleted"]]))

    def instruction(self, p, lang):
        if lang == "zh":
            return f"把废纸篓里的笔记“{p['title']}”恢复出来。"
        return f'Restore the note "{p["title"]}" from the trash.'

    def plan(self, p, lang):
        name = f"恢复{p['title']}" if lang == "zh" else f"Restore {p['title']}"
        return [Tap(Target(UI[lang]["trash"], "link", exact=True)), Tap(_button(name)), Finish()]

    def success(self, p, state, answer, lang):
        n = _note(state, p["note_id"])
        return bool(n and not n["deleted"])


class CreateAndPin(NotesTemplate):
    """Create a tagged note and pin it: the pin control appears only once it exists."""

    template_id = "notes.create_pin"

    def sample_params(self, data, rng, lang):
        title, body = rng.choice(NEW_NOTES[lang])
        return {"title": title, "body": body, "tag": rng.choice(NEW_TAGS[lang])}

    def instruction(self, p, lang):
        if lang == "zh":
            return f"新建笔记“{p['title']}”，内容写“{p['body']}”，标签设为“{p['tag']}”，保存后把它置顶。"
        return f'Write a note "{p["title"]}" saying "{p["body"]}", tag it "{p["tag"]}" and pin it to the top.'

    def plan(self, p, lang):
        ui = UI[lang]
        steps = [
            Tap(Target(ui["new"], "link")),
            Fill(_textbox(ui["title"]), p["title"]),
            Fill(_textbox(ui["body"]), p["body"]),
            Fill(_textbox(ui["tags"]), p["tag"]),
            Tap(_button(ui["save"])),
        ]
        if lang == "zh":
            return steps + [_open_note(p["title"]), Tap(_button("置顶")), Finish()]
        return steps + [Tap(_button(f"Pin note: {p['title']}")), Finish()]

    def success(self, p, state, answer, lang):
        return any(n["title"] == p["title"] and p["tag"] in n["tags"] and n["pinned"] for n in _live(state))


TEMPLATES = [
    Create(),
    CreateTagged(),
    Pin(),
    Delete(),
    Rename(),
    AddTag(),
    Favourite(),
    FindFact(),
    CountTag(),
    MoveSaved(),
    RemoveSaved(),
    NewGroup(),
    Restore(),
    CreateAndPin(),
]
