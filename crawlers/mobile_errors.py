"""How a mobile session fails: the errors that mean the session (not just one
action) is gone, and `SessionLost`, which the runner answers with `restart()`.
"""

from __future__ import annotations

import http.client

import urllib3

from .web_env import BrowserCrashed


class SessionLost(BrowserCrashed):
    """The Appium session (or its server) is gone; call `restart()` and retry."""


# Errors from a driver that mean the session (not just the action) is gone.
LOST_MARKERS = (
    "invalid session id",
    "session deleted",
    "session is either terminated",
    "chrome not reachable",
    "disconnected:",
    "tab crashed",
    "target crashed",
    "could not proxy command",
    "econnrefused",
    "no such window",
    "session not created",
    "instrumentation process is not running",
    "socket hang up",
)
TRANSPORT_ERRORS = (urllib3.exceptions.HTTPError, ConnectionError, TimeoutError, http.client.HTTPException)


def lost_marker(e: Exception) -> bool:
    text = str(e).lower()
    return any(m in text for m in LOST_MARKERS)


def is_unloaded(e: Exception) -> bool:
    text = str(e).lower()
    return "unload" in text or "execution context" in text or "navigat" in text


def short_error(e: BaseException) -> str:
    """The first line of a driver error without its stack trace."""
    text = getattr(e, "msg", None) or str(e)
    text = text.strip().removeprefix("Message:").strip()
    return text.splitlines()[0] if text else type(e).__name__
