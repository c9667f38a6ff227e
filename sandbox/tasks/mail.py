"""Task templates for the mail app (Gmail-like in English, QQ 邮箱-like in Chinese).

The two languages share the state model but not the page layout, so a plan
may differ per language: the English inbox acts from row buttons, the
Chinese one from check boxes and the 标记为/移动到 menus.
"""

from __future__ import annotations

from ._mail_common import (
    MailTemplate,
    inbox_mails,
    mail_by_id,
    mail_params,
    open_mail,
    pick_topmost,
    sent_mails,
    to_emails,
)
from ._mail_questions import ContactPhone, FindFact, UnreadCount
from .base import Choose, Fill, Finish, Tap, Target

PERSONAL = ("lunch", "kickoff", "flight", "moved", "reimburse", "badge", "book", "photos", "report")


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
            p["email"].lower() in to_emails(m) and m["subject"] == p["subject"] and p["body"] in m["body"]
            for m in sent_mails(state)
        )


class Reply(MailTemplate):
    template_id = "mail.reply"
    TEXTS = {
        "en": ["I will attend.", "Sounds good, see you then!", "Thanks, I'll take a look today."],
        "zh": ["我会参加。", "好的，到时见！", "收到，今天就看。"],
    }

    def sample_params(self, data, rng, lang):
        m = rng.choice([m for m in inbox_mails(data) if m["kind"] in ("lunch", "kickoff", "book", "report")])
        return {**mail_params(m), "text": rng.choice(self.TEXTS[lang])}

    def instruction(self, p, lang):
        if lang == "zh":
            return f"回复{p['sender']}发来的“{p['subject']}”邮件，告诉对方：{p['text']}"
        return f'Reply to the email from {p["sender"]} about "{p["subject"]}" saying: {p["text"]}'

    def plan(self, p, lang):
        if lang == "zh":  # QQ 邮箱 has a quick-reply box under the message
            return [
                open_mail(p["subject"]),
                Fill(Target("快捷回复", "textbox"), p["text"]),
                Tap(Target("发送", "button", exact=True)),
                Finish(),
            ]
        return [
            open_mail(p["subject"]),
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
        and p["sender_email"].lower() in to_emails(m)
        and p["text"] in m["body"]
        for m in sent_mails(state)
    )


class Star(MailTemplate):
    template_id = "mail.star"

    def sample_params(self, data, rng, lang):
        return mail_params(rng.choice([m for m in inbox_mails(data) if not m["starred"]]))

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
        m = mail_by_id(state, p["mail_id"])
        return bool(m and m["starred"])


class Delete(MailTemplate):
    template_id = "mail.delete"

    def sample_params(self, data, rng, lang):
        return mail_params(rng.choice(inbox_mails(data)))

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
        return [open_mail(p["subject"]), Tap(Target("Delete", "button", exact=True)), Finish()]

    def success(self, p, state, answer, lang):
        m = mail_by_id(state, p["mail_id"])
        return m is None or m["folder"] == "trash"


class Archive(MailTemplate):
    template_id = "mail.archive"

    def sample_params(self, data, rng, lang):
        return mail_params(rng.choice(inbox_mails(data)))

    def instruction(self, p, lang):
        if lang == "zh":
            return f"把“{p['subject']}”这封邮件移动到“归档”文件夹。"
        return f'Archive the email "{p["subject"]}" from {p["sender"]}.'

    def plan(self, p, lang):
        if lang == "zh":
            return [open_mail(p["subject"]), Choose(Target("移动到", "combobox"), "归档"), Finish()]
        return [
            Tap(Target(f"Select: {p['subject']}", "checkbox", exact=True)),
            Tap(Target("Archive selected", "button", exact=True)),
            Finish(),
        ]

    def success(self, p, state, answer, lang):
        m = mail_by_id(state, p["mail_id"])
        return bool(m and m["folder"] == "archive")


class Label(MailTemplate):
    template_id = "mail.label"

    def sample_params(self, data, rng, lang):
        m = rng.choice([m for m in inbox_mails(data) if m["kind"] in PERSONAL])
        label = rng.choice([lb for lb in data["labels"] if lb not in m["labels"]])
        return {**mail_params(m), "label": label}

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
            open_mail(p["subject"]),
            Choose(Target("Label as", "combobox"), p["label"]),
            Tap(Target("Apply label", "button")),
            Finish(),
        ]

    def success(self, p, state, answer, lang):
        m = mail_by_id(state, p["mail_id"])
        return bool(m and p["label"] in m["labels"])


class MarkRead(MailTemplate):
    template_id = "mail.mark_read"

    def sample_params(self, data, rng, lang):
        return mail_params(rng.choice([m for m in inbox_mails(data) if not m["read"]]))

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
        m = mail_by_id(state, p["mail_id"])
        return bool(m and m["read"] and m["folder"] == "inbox")


class Forward(MailTemplate):
    template_id = "mail.forward"

    def sample_params(self, data, rng, lang):
        m = rng.choice([m for m in inbox_mails(data) if m["kind"] in PERSONAL])
        to = rng.choice([c for c in data["contacts"] if c["email"] != m["from"]["email"]])
        return {**mail_params(m), "to_name": to["name"], "to_email": to["email"]}

    def instruction(self, p, lang):
        if lang == "zh":
            return f"把“{p['subject']}”这封邮件转发给{p['to_name']}（{p['to_email']}）。"
        return f'Forward the email "{p["subject"]}" to {p["to_name"]} ({p["to_email"]}).'

    def plan(self, p, lang):
        fwd, to, send = ("转发", "收件人", "发送") if lang == "zh" else ("Forward", "To", "Send")
        return [
            open_mail(p["subject"]),
            Tap(Target(fwd, "link", exact=True)),
            Fill(Target(to, "textbox", exact=True), p["to_email"]),
            Tap(Target(send, "button", exact=True)),
            Finish(),
        ]

    def success(self, p, state, answer, lang):
        return any(
            m["forward_of"] == p["mail_id"] and p["to_email"].lower() in to_emails(m)
            for m in sent_mails(state)
        )


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
        for m in inbox_mails(data):  # newest first
            by_sender.setdefault(m["from"]["email"], []).append(m)
        choices = [ms for ms in by_sender.values() if len(ms) >= 2 and not ms[0]["starred"]]
        ms = rng.choice(choices or [ms for ms in by_sender.values() if not ms[0]["starred"]])
        return mail_params(ms[0])

    def instruction(self, p, lang):
        if lang == "zh":
            return f"找到{p['sender']}最近发来的一封邮件，把它设为星标邮件。"
        return f"Find the most recent email from {p['sender']} and star it."

    def plan(self, p, lang):
        if lang == "zh":
            return [
                Fill(Target("搜索邮件", "searchbox"), p["sender"], submit=True),
                Tap(Target(" - ", "link", pick=pick_topmost)),
                Tap(Target("设为星标", "button", exact=True)),
                Finish(),
            ]
        return [
            Fill(Target("Search mail", "searchbox"), p["sender"], submit=True),
            Tap(Target(p["sender"], "link", pick=pick_topmost)),
            Tap(Target("Star", "button", exact=True)),
            Finish(),
        ]

    def success(self, p, state, answer, lang):
        m = mail_by_id(state, p["mail_id"])
        return bool(m and m["starred"])


class ReplyThenArchive(MailTemplate):
    """Two goals in one task: answer a mail, then clear it out of the inbox."""

    template_id = "mail.reply_archive"
    TEXTS = {"en": ["Thanks, noted!", "Got it, thank you."], "zh": ["收到，谢谢！", "好的，已了解。"]}

    def sample_params(self, data, rng, lang):
        m = rng.choice([m for m in inbox_mails(data) if m["kind"] in PERSONAL])
        return {**mail_params(m), "text": rng.choice(self.TEXTS[lang])}

    def instruction(self, p, lang):
        if lang == "zh":
            return f"回复{p['sender']}的“{p['subject']}”邮件说“{p['text']}”，然后把这封邮件移到归档。"
        return f'Reply "{p["text"]}" to {p["sender"]}\'s email "{p["subject"]}", then archive that email.'

    def plan(self, p, lang):
        if lang == "zh":
            return [
                open_mail(p["subject"]),
                Fill(Target("快捷回复", "textbox"), p["text"]),
                Tap(Target("发送", "button", exact=True)),
                Tap(Target(f"选择邮件：{p['subject']}", "checkbox", exact=True)),
                Choose(Target("移动到", "combobox"), "归档"),
                Finish(),
            ]
        return [
            open_mail(p["subject"]),
            Tap(Target("Reply", "link", exact=True)),
            Fill(Target("Message body", "textbox", exact=True), p["text"]),
            Tap(Target("Send", "button", exact=True)),
            Tap(Target(f"Select: {p['subject']}", "checkbox", exact=True)),
            Tap(Target("Archive selected", "button", exact=True)),
            Finish(),
        ]

    def success(self, p, state, answer, lang):
        m = mail_by_id(state, p["mail_id"])
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
