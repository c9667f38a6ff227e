"""Mail tasks that ask a question: the answer is read off the screen (the unread
badge, a fact in a mail's body, a contact's phone number)."""

from __future__ import annotations

import re

from schemas.observation import Observation

from ._mail_common import MailTemplate, digits, inbox_mails, open_mail, squashed
from .base import Answer, Fill, Tap, Target


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
        want = sum(not m["read"] for m in inbox_mails(state))
        return digits(answer) == str(want)


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

        return [Fill(search, words[lang], submit=True), open_mail(p["subject"]), Answer(read)]

    def success(self, p, state, answer, lang):
        return squashed(answer) != "" and squashed(p["expected"]) in squashed(answer)


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
        return digits(answer) == digits(p["phone"]) != ""
