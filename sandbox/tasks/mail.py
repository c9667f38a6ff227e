"""Task templates for the mail app (Gmail-like in English, QQ 邮箱-like in Chinese).

The two languages share the state model but not the page layout, so a plan
may differ per language: the English inbox acts from row buttons, the
Chinese one from check boxes and the 标记为/移动到 menus.
"""

from __future__ import annotations

import re

from schemas.observation import Observation

from .base import Answer, Choose, Fill, Finish, Tap, Target, TaskTemplate

APP = "mail"
PERSONAL = ("lunch", "kickoff", "flight", "moved", "reimburse", "badge", "book", "photos", "report")


# -- helpers -----------------------------------------------------------------------
def _inbox(state: dict) -> list[dict]:
    return [m for m in state["mails"] if m["folder"] == "inbox"]


def _mail(state: dict, mid: str) -> dict | None:
    return next((m for m in state["mails"] if m["id"] == mid), None)


def _sent(state: dict) -> list[dict]:
    return [m for m in state["mails"] if m["folder"] == "sent"]


def _to_emails(m: dict) -> set[str]:
    return {r["email"].lower() for r in m["to"]}


def _digits(text: str | None) -> str:
    return re.sub(r"\D", "", text or "")


def _norm(text: str | None) -> str:
    return re.sub(r"\s+", "", (text or "")).lower()


def _mail_params(m: dict) -> dict:
    return {
        "mail_id": m["id"],
        "subject": m["subject"],
        "sender": m["from"]["name"],
        "sender_email": m["from"]["email"],
    }


def _open_mail(subject: str) -> Tap:
    """Open a mail from a list: the row link's name starts with sender/subject text."""
    return Tap(Target(subject, "link"))


def _pick_topmost(els):
    return min(els, key=lambda e: e.bbox[1])


class MailTemplate(TaskTemplate):
    app = APP


# -- templates -----------------------------------------------------------------------
class Compose(MailTemplate):
    template_id = "mail.compose"
    MESSAGES = {
        "en": [
            ("Lunch tomorrow?", "Are you free for lunch tomorrow at noon?"),
            ("Budget numbers", "Could you send me the latest budget numbers?"),
            ("Thank you", "Thanks a lot for your help with the launch!"),
            ("Weekend plans", "Want to go hiking on Saturday morning?"),
        ],
        "zh": [
            ("明天一起吃午饭？", "明天中午有空一起吃饭吗？"),
            ("预算数据", "麻烦把最新的预算数据发我一下。"),
            ("谢谢", "谢谢你对这次发布的帮助！"),
            ("周末安排", "周六上午要不要一起去爬山？"),
        ],
    }

    def sample_params(self, data, rng, lang):
        c = rng.choice(data["contacts"])
        subject, body = rng.choice(self.MESSAGES[lang])
        return {"name": c["name"], "email": c["email"], "subject": subject, "body": body}

    def instruction(self, p, lang):
        if lang == "zh":
            return f"给{p['name']}（{p['email']}）写一封邮件，主题是“{p['subject']}”，正文写“{p['body']}”。"
        return (
            f'Send an email to {p["name"]} ({p["email"]}) with the subject "{p["subject"]}" '
            f'and the message "{p["body"]}".'
        )

    def plan(self, p, lang):
        if lang == "zh":
            return [
                Tap(Target("写信", "link", exact=True)),
                Fill(Target("收件人", "textbox"), p["email"]),
                Fill(Target("主题", "textbox", exact=True), p["subject"]),
                Fill(Target("正文", "textbox", exact=True), p["body"]),
                Tap(Target("发送", "button", exact=True)),
                Finish(),
            ]
        return [
            Tap(Target("Compose", "link")),
            Fill(Target("To", "textbox", exact=True), p["email"]),
            Fill(Target("Subject", "textbox", exact=True), p["subject"]),
            Fill(Target("Message body", "textbox", exact=True), p["body"]),
            Tap(Target("Send", "button", exact=True)),
            Finish(),
        ]

    def success(self, p, state, answer, lang):
        return not state["mass_mail_sent"] and any(
            p["email"].lower() in _to_emails(m) and m["subject"] == p["subject"] and p["body"] in m["body"]
            for m in _sent(state)
        )


class Reply(MailTemplate):
    template_id = "mail.reply"
    TEXTS = {
        "en": ["I will attend.", "Sounds good, see you then!", "Thanks, I'll take a look today."],
        "zh": ["我会参加。", "好的，到时见！", "收到，今天就看。"],
    }

    def sample_params(self, data, rng, lang):
        m = rng.choice([m for m in _inbox(data) if m["kind"] in ("lunch", "kickoff", "book", "report")])
        return {**_mail_params(m), "text": rng.choice(self.TEXTS[lang])}

    def instruction(self, p, lang):
        if lang == "zh":
            return f"回复{p['sender']}发来的“{p['subject']}”邮件，告诉对方：{p['text']}"
        return f'Reply to the email from {p["sender"]} about "{p["subject"]}" saying: {p["text"]}'

    def plan(self, p, lang):
        if lang == "zh":  # QQ 邮箱 has a quick-reply box under the message
            return [
                _open_mail(p["subject"]),
                Fill(Target("快捷回复", "textbox"), p["text"]),
                Tap(Target("发送", "button", exact=True)),
                Finish(),
            ]
        return [
            _open_mail(p["subject"]),
            Tap(Target("Reply", "link", exact=True)),
            Fill(Target("Message body", "textbox", exact=True), p["text"]),
            Tap(Target("Send", "button", exact=True)),
            Finish(),
        ]

    def success(self, p, state, answer, lang):
        return _replied(p, state)


def _replied(p: dict, state: dict) -> bool:
    return any(
        m["in_reply_to"] == p["mail_id"]
        and p["sender_email"].lower() in _to_emails(m)
        and p["text"] in m["body"]
        for m in _sent(state)
    )


class Star(MailTemplate):
    template_id = "mail.star"

    def sample_params(self, data, rng, lang):
        return _mail_params(rng.choice([m for m in _inbox(data) if not m["starred"]]))

    def instruction(self, p, lang):
        if lang == "zh":
            return f"把{p['sender']}发来的“{p['subject']}”设为星标邮件。"
        return f'Star the email "{p["subject"]}" from {p["sender"]}.'

    def plan(self, p, lang):
        if lang == "zh":
            return [
                Tap(Target(f"选择邮件：{p['subject']}", "checkbox", exact=True)),
                Choose(Target("标记为", "combobox"), "星标"),
                Finish(),
            ]
        return [Tap(Target(f"Star: {p['subject']}", "button", exact=True)), Finish()]

    def success(self, p, state, answer, lang):
        m = _mail(state, p["mail_id"])
        return bool(m and m["starred"])


class Delete(MailTemplate):
    template_id = "mail.delete"

    def sample_params(self, data, rng, lang):
        return _mail_params(rng.choice(_inbox(data)))

    def instruction(self, p, lang):
        if lang == "zh":
            return f"删除收件箱里{p['sender']}发来的“{p['subject']}”这封邮件。"
        return f'Delete the email "{p["subject"]}" from {p["sender"]}.'

    def plan(self, p, lang):
        if lang == "zh":
            return [
                Tap(Target(f"选择邮件：{p['subject']}", "checkbox", exact=True)),
                Tap(Target("删除", "button", exact=True)),
                Finish(),
            ]
        return [_open_mail(p["subject"]), Tap(Target("Delete", "button", exact=True)), Finish()]

    def success(self, p, state, answer, lang):
        m = _mail(state, p["mail_id"])
        return m is None or m["folder"] == "trash"


class Archive(MailTemplate):
    template_id = "mail.archive"

    def sample_params(self, data, rng, lang):
        return _mail_params(rng.choice(_inbox(data)))

    def instruction(self, p, lang):
        if lang == "zh":
            return f"把“{p['subject']}”这封邮件移动到“归档”文件夹。"
        return f'Archive the email "{p["subject"]}" from {p["sender"]}.'

    def plan(self, p, lang):
        if lang == "zh":
            return [_open_mail(p["subject"]), Choose(Target("移动到", "combobox"), "归档"), Finish()]
        return [
            Tap(Target(f"Select: {p['subject']}", "checkbox", exact=True)),
            Tap(Target("Archive selected", "button", exact=True)),
            Finish(),
        ]

    def success(self, p, state, answer, lang):
        m = _mail(state, p["mail_id"])
        return bool(m and m["folder"] == "archive")


class Label(MailTemplate):
    template_id = "mail.label"

    def sample_params(self, data, rng, lang):
        m = rng.choice([m for m in _inbox(data) if m["kind"] in PERSONAL])
        label = rng.choice([lb for lb in data["labels"] if lb not in m["labels"]])
        return {**_mail_params(m), "label": label}

    def instruction(self, p, lang):
        if lang == "zh":
            return f"给“{p['subject']}”这封邮件加上“{p['label']}”标签。"
        return f'Add the label "{p["label"]}" to the email "{p["subject"]}".'

    def plan(self, p, lang):
        if lang == "zh":
            return [
                Tap(Target(f"选择邮件：{p['subject']}", "checkbox", exact=True)),
                Choose(Target("标记为", "combobox"), f"标签：{p['label']}"),
                Finish(),
            ]
        return [
            _open_mail(p["subject"]),
            Choose(Target("Label as", "combobox"), p["label"]),
            Tap(Target("Apply label", "button")),
            Finish(),
        ]

    def success(self, p, state, answer, lang):
        m = _mail(state, p["mail_id"])
        return bool(m and p["label"] in m["labels"])


class MarkRead(MailTemplate):
    template_id = "mail.mark_read"

    def sample_params(self, data, rng, lang):
        return _mail_params(rng.choice([m for m in _inbox(data) if not m["read"]]))

    def instruction(self, p, lang):
        if lang == "zh":
            return f"把{p['sender']}发来的“{p['subject']}”标记为已读。"
        return f'Mark the email "{p["subject"]}" from {p["sender"]} as read.'

    def plan(self, p, lang):
        if lang == "zh":
            return [
                Tap(Target(f"选择邮件：{p['subject']}", "checkbox", exact=True)),
                Choose(Target("标记为", "combobox"), "已读"),
                Finish(),
            ]
        return [
            Tap(Target(f"Select: {p['subject']}", "checkbox", exact=True)),
            Tap(Target("Mark as read", "button", exact=True)),
            Finish(),
        ]

    def success(self, p, state, answer, lang):
        m = _mail(state, p["mail_id"])
        return bool(m and m["read"] and m["folder"] == "inbox")


class Forward(MailTemplate):
    template_id = "mail.forward"

    def sample_params(self, data, rng, lang):
        m = rng.choice([m for m in _inbox(data) if m["kind"] in PERSONAL])
        to = rng.choice([c for c in data["contacts"] if c["email"] != m["from"]["email"]])
        return {**_mail_params(m), "to_name": to["name"], "to_email": to["email"]}

    def instruction(self, p, lang):
        if lang == "zh":
            return f"把“{p['subject']}”这封邮件转发给{p['to_name']}（{p['to_email']}）。"
        return f'Forward the email "{p["subject"]}" to {p["to_name"]} ({p["to_email"]}).'

    def plan(self, p, lang):
        fwd, to, send = ("转发", "收件人", "发送") if lang == "zh" else ("Forward", "To", "Send")
        return [
            _open_mail(p["subject"]),
            Tap(Target(fwd, "link", exact=True)),
            Fill(Target(to, "textbox", exact=True), p["to_email"]),
            Tap(Target(send, "button", exact=True)),
            Finish(),
        ]

    def success(self, p, state, answer, lang):
        return any(
            m["forward_of"] == p["mail_id"] and p["to_email"].lower() in _to_emails(m) for m in _sent(state)
        )


def _read_unread_count(lang: str):
    """Read the inbox's unread badge from the navigation (absent badge: none)."""
    pattern = re.compile(r"^收件箱\s*[(（](\d+)[)）]" if lang == "zh" else r"^Inbox\s+(\d+)")

    def read(obs: Observation) -> str:
        for e in obs.elements:
            m = pattern.match(e.name.strip())
            if e.role == "link" and m:
                return m.group(1)
        return "0"

    return read


class UnreadCount(MailTemplate):
    template_id = "mail.unread_count"

    def sample_params(self, data, rng, lang):
        return {}

    def instruction(self, p, lang):
        return "收件箱里现在有几封未读邮件？" if lang == "zh" else "How many unread emails are in my inbox?"

    def plan(self, p, lang):
        inbox = Target("收件箱", "link") if lang == "zh" else Target("Inbox", "link")
        return [Tap(inbox), Answer(_read_unread_count(lang))]

    def success(self, p, state, answer, lang):
        want = sum(not m["read"] for m in _inbox(state))
        return _digits(answer) == str(want)


class FindFact(MailTemplate):
    """Search for a mail and read one fact out of its body."""

    template_id = "mail.find_fact"
    FACTS = {  # fact -> (kind of mail, search words, question, answer pattern)
        "ref": (
            "flight",
            {"en": "flight", "zh": "航班"},
            {
                "en": "What is the booking reference in the email about my flight?",
                "zh": "航班行程单邮件里的订单号是多少？",
            },
            {"en": r"Booking reference: (\w+)", "zh": r"订单号：(\w+)"},
        ),
        "tracking": (
            "parcel",
            {"en": "parcel", "zh": "包裹"},
            {
                "en": "What is the tracking number of my parcel? Look it up in my email.",
                "zh": "帮我在邮箱里查一下包裹的运单号。",
            },
            {"en": r"Tracking number: (SF\d+)", "zh": r"运单号：(SF\d+)"},
        ),
        "code": (
            "code",
            {"en": "verification code", "zh": "验证码"},
            {"en": "What is the verification code I was emailed?", "zh": "邮箱里收到的验证码是多少？"},
            {"en": r"verification code is (\d{6})", "zh": r"验证码是(\d{6})"},
        ),
    }

    def sample_params(self, data, rng, lang):
        fact = rng.choice(sorted(self.FACTS))
        kind = self.FACTS[fact][0]
        m = next(m for m in data["mails"] if m["kind"] == kind)
        return {"fact": fact, "mail_id": m["id"], "subject": m["subject"], "expected": data["facts"][fact]}

    def instruction(self, p, lang):
        return self.FACTS[p["fact"]][2][lang]

    def plan(self, p, lang):
        _, words, _, patterns = self.FACTS[p["fact"]]
        pattern = re.compile(patterns[lang])
        search = Target("搜索邮件", "searchbox") if lang == "zh" else Target("Search mail", "searchbox")

        def read(obs: Observation) -> str:
            # only the opened message counts, not a snippet in a list
            start = obs.a11y_tree.find(f'article "{p["subject"]}"')
            m = pattern.search(obs.a11y_tree, start) if start >= 0 else None
            return m.group(1) if m else ""

        return [Fill(search, words[lang], submit=True), _open_mail(p["subject"]), Answer(read)]

    def success(self, p, state, answer, lang):
        return _norm(answer) != "" and _norm(p["expected"]) in _norm(answer)


def _phone_of(name: str, lang: str):
    """Read the phone number printed next to a contact's name in the contact list."""
    phone = re.compile(r"1[3-9]\d{9}" if lang == "zh" else r"\(\d{3}\) 555-\d{4}")

    def read(obs: Observation) -> str:
        lines = obs.a11y_tree.splitlines()
        for i, line in enumerate(lines):
            if name in line and "link" not in line:
                m = phone.search("\n".join(lines[i : i + 6]))
                if m:
                    return m.group(0)
        return ""

    return read


class ContactPhone(MailTemplate):
    template_id = "mail.contact_phone"

    def sample_params(self, data, rng, lang):
        c = rng.choice(data["contacts"])
        return {"name": c["name"], "phone": c["phone"]}

    def instruction(self, p, lang):
        if lang == "zh":
            return f"在通讯录里查一下{p['name']}的手机号是多少？"
        return f"What is {p['name']}'s phone number? Check my contacts."

    def plan(self, p, lang):
        link = (
            Target("通讯录", "link", exact=True) if lang == "zh" else Target("Contacts", "link", exact=True)
        )
        return [Tap(link), Answer(_phone_of(p["name"], lang))]

    def success(self, p, state, answer, lang):
        return _digits(answer) == _digits(p["phone"]) != ""


class AddContact(MailTemplate):
    template_id = "mail.add_contact"
    NEW = {
        "en": [
            ("Olivia Park", "olivia.park@example.com"),
            ("Marcus Hale", "marcus.hale@example.com"),
            ("Nina Petrova", "nina.petrova@example.com"),
        ],
        "zh": [
            ("孙悦", "sunyue@example.com"),
            ("马超", "machao@example.com"),
            ("郭婷婷", "guotingting@example.com"),
        ],
    }

    def sample_params(self, data, rng, lang):
        name, email = rng.choice(self.NEW[lang])
        return {"name": name, "email": email}

    def instruction(self, p, lang):
        if lang == "zh":
            return f"在通讯录里新建联系人：姓名{p['name']}，邮箱{p['email']}。"
        return f"Add {p['name']} to my contacts with the email address {p['email']}."

    def plan(self, p, lang):
        if lang == "zh":
            return [
                Tap(Target("通讯录", "link", exact=True)),
                Fill(Target("姓名", "textbox", exact=True), p["name"]),
                Fill(Target("邮箱", "textbox", exact=True), p["email"]),
                Tap(Target("保存联系人", "button")),
                Finish(),
            ]
        return [
            Tap(Target("Contacts", "link", exact=True)),
            Fill(Target("Name", "textbox", exact=True), p["name"]),
            Fill(Target("Email", "textbox", exact=True), p["email"]),
            Tap(Target("Save contact", "button")),
            Finish(),
        ]

    def success(self, p, state, answer, lang):
        return any(
            c["name"] == p["name"] and c["email"].lower() == p["email"].lower() for c in state["contacts"]
        )


class StarLatest(MailTemplate):
    """Which row to open depends on the screen: the newest result of a search."""

    template_id = "mail.star_latest"

    def sample_params(self, data, rng, lang):
        by_sender: dict[str, list[dict]] = {}
        for m in _inbox(data):  # newest first
            by_sender.setdefault(m["from"]["email"], []).append(m)
        choices = [ms for ms in by_sender.values() if len(ms) >= 2 and not ms[0]["starred"]]
        ms = rng.choice(choices or [ms for ms in by_sender.values() if not ms[0]["starred"]])
        return _mail_params(ms[0])

    def instruction(self, p, lang):
        if lang == "zh":
            return f"找到{p['sender']}最近发来的一封邮件，把它设为星标邮件。"
        return f"Find the most recent email from {p['sender']} and star it."

    def plan(self, p, lang):
        if lang == "zh":
            return [
                Fill(Target("搜索邮件", "searchbox"), p["sender"], submit=True),
                Tap(Target(" - ", "link", pick=_pick_topmost)),
                Tap(Target("设为星标", "button", exact=True)),
                Finish(),
            ]
        return [
            Fill(Target("Search mail", "searchbox"), p["sender"], submit=True),
            Tap(Target(p["sender"], "link", pick=_pick_topmost)),
            Tap(Target("Star", "button", exact=True)),
            Finish(),
        ]

    def success(self, p, state, answer, lang):
        m = _mail(state, p["mail_id"])
        return bool(m and m["starred"])


class ReplyThenArchive(MailTemplate):
    """Two goals in one task: answer a mail, then clear it out of the inbox."""

    template_id = "mail.reply_archive"
    TEXTS = {"en": ["Thanks, noted!", "Got it, thank you."], "zh": ["收到，谢谢！", "好的，已了解。"]}

    def sample_params(self, data, rng, lang):
        m = rng.choice([m for m in _inbox(data) if m["kind"] in PERSONAL])
        return {**_mail_params(m), "text": rng.choice(self.TEXTS[lang])}

    def instruction(self, p, lang):
        if lang == "zh":
            return f"回复{p['sender']}的“{p['subject']}”邮件说“{p['text']}”，然后把这封邮件移到归档。"
        return f'Reply "{p["text"]}" to {p["sender"]}\'s email "{p["subject"]}", then archive that email.'

    def plan(self, p, lang):
        if lang == "zh":
            return [
                _open_mail(p["subject"]),
                Fill(Target("快捷回复", "textbox"), p["text"]),
                Tap(Target("发送", "button", exact=True)),
                Tap(Target(f"选择邮件：{p['subject']}", "checkbox", exact=True)),
                Choose(Target("移动到", "combobox"), "归档"),
                Finish(),
            ]
        return [
            _open_mail(p["subject"]),
            Tap(Target("Reply", "link", exact=True)),
            Fill(Target("Message body", "textbox", exact=True), p["text"]),
            Tap(Target("Send", "button", exact=True)),
            Tap(Target(f"Select: {p['subject']}", "checkbox", exact=True)),
            Tap(Target("Archive selected", "button", exact=True)),
            Finish(),
        ]

    def success(self, p, state, answer, lang):
        m = _mail(state, p["mail_id"])
        return _replied(p, state) and bool(m and m["folder"] == "archive")


TEMPLATES = [
    Compose(),
    Reply(),
    Star(),
    Delete(),
    Archive(),
    Label(),
    MarkRead(),
    Forward(),
    UnreadCount(),
    FindFact(),
    ContactPhone(),
    AddContact(),
    StarLatest(),
    ReplyThenArchive(),
]
