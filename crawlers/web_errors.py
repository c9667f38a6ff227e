"""The errors a WebEnv raises or reports, shared with the mobile env."""

from __future__ import annotations

__all__ = ["ActionError", "BrowserCrashed", "PageUnresponsive", "short_error", "CLOSED_MARKERS"]


class ActionError(Exception):
    """An action could not be carried out; reported as `last_action_error`."""


class BrowserCrashed(RuntimeError):
    """The browser process is gone (or unusable); call `restart()` and retry."""


class PageUnresponsive(BrowserCrashed):
    """The page stopped answering within the step timeout (e.g. a JS busy loop)."""


# Playwright's words for a page or browser that has gone away.
CLOSED_MARKERS = (
    "has been closed",
    "Target closed",
    "Connection closed",
    "Browser closed",
    "browser has disconnected",
    "Target crashed",
)


def short_error(e: Exception) -> str:
    """The first line of a Playwright error (they append long call logs)."""
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
