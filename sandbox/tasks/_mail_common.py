"""What the mail task templates share: reading the app's state and the screen, and
their base class."""

from __future__ import annotations

import re

from .base import Tap, Target, TaskTemplate

APP = "mail"


def inbox_mails(state: dict) -> list[dict]:
    return [m for m in state["mails"] if m["folder"] == "inbox"]


def mail_by_id(state: dict, mid: str) -> dict | None:
    return next((m for m in state["mails"] if m["id"] == mid), None)


def sent_mails(state: dict) -> list[dict]:
    return [m for m in state["mails"] if m["folder"] == "sent"]


def to_emails(m: dict) -> set[str]:
    return {r["email"].lower() for r in m["to"]}


def digits(text: str | None) -> str:
    return re.sub(r"\D", "", text or "")


def squashed(text: str | None) -> str:
    return re.sub(r"\s+", "", (text or "")).lower()


def mail_params(m: dict) -> dict:
    return {
        "mail_id": m["id"],
        "subject": m["subject"],
        "sender": m["from"]["name"],
        "sender_email": m["from"]["email"],
    }


def open_mail(subject: str) -> Tap:
    """Open a mail from a list: the row link's name starts with sender/subject text."""
    return Tap(Target(subject, "link"))


def pick_topmost(els):
    return min(els, key=lambda e: e.bbox[1])


class MailTemplate(TaskTemplate):
    app = APP
