"""Launching Chromium through Playwright, and finding its process."""
from __future__ import annotations

import os

from playwright.sync_api import Browser, Playwright

# Quiet, deterministic Chromium: no background traffic, no updates, no QUIC
# (the allowlist sees every request over the ordinary network stack).
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]

DEFAULT_EXECUTABLE = "/usr/bin/chromium"


def launch_chromium(pw: Playwright, *, headless: bool = True,
                    executable_path: str | None = DEFAULT_EXECUTABLE,
                    args: list[str] | None = None) -> Browser:
    if executable_path and not os.path.exists(executable_path):
        executable_path = None  # fall back to Playwright's own build if installed
    return pw.chromium.launch(headless=headless, executable_path=executable_path,
                              args=list(CHROMIUM_ARGS if args is None else args))


def browser_pid(browser: Browser) -> int | None:
    """The pid of the browser process (the sync API does not expose it).

    Chromium reports it over the DevTools protocol, which works whether the
    browser is a child or grandchild of this process.
    """
    try:
        session = browser.new_browser_cdp_session()
        try:
            info = session.send("SystemInfo.getProcessInfo")
        finally:
            session.detach()
    except Exception:
        return None
    for p in info.get("processInfo", []):
        if p.get("type") == "browser":
            return int(p["id"])
    return None
