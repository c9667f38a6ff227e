"""Launching Chromium through Playwright; its processes, and a watchdog over them."""

from __future__ import annotations

import os
import signal
import threading

from playwright.sync_api import Browser, Playwright, sync_playwright

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
    # Chromium asks Google's autofill service about every form it parses: the proxy
    # refused those lookups and counted them as the page's blocked requests. An
    # about:blank server URL stops them (a switch, so Playwright's --disable-features
    # list, which a second --disable-features would replace, stays as it is).
    "--autofill-server-url=about:blank",
]

DEFAULT_EXECUTABLE = "/usr/bin/chromium"


def launch_chromium(
    pw: Playwright,
    *,
    headless: bool = True,
    executable_path: str | None = DEFAULT_EXECUTABLE,
    args: list[str] | None = None,
) -> Browser:
    if executable_path and not os.path.exists(executable_path):
        executable_path = None  # fall back to Playwright's own build if installed
    return pw.chromium.launch(
        headless=headless, executable_path=executable_path, args=list(CHROMIUM_ARGS if args is None else args)
    )


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


# The sync API allows one Playwright driver per thread (a second
# `sync_playwright().start()` in the same thread fails), so envs launched in one
# thread share a reference-counted driver.
_local = threading.local()


def acquire_playwright() -> Playwright:
    holder = getattr(_local, "holder", None)
    if holder is None:
        holder = _local.holder = {"pw": sync_playwright().start(), "refs": 0, "retired": []}
    holder["refs"] += 1
    return holder["pw"]


def _held(holder: dict | None, pw: Playwright) -> bool:
    """`pw` is the thread's driver, or one it replaced (an env not yet moved off it)."""
    return holder is not None and (holder["pw"] is pw or any(old is pw for old in holder["retired"]))


def release_playwright(pw: Playwright) -> None:
    holder = getattr(_local, "holder", None)
    if not _held(holder, pw):
        return
    holder["refs"] -= 1
    if holder["refs"] <= 0:
        _local.holder = None
        try:
            holder["pw"].stop()
        except Exception:
            pass  # the driver is already gone


def replace_playwright(pw: Playwright) -> Playwright:
    """A fresh driver after `pw` died; every env of this thread must move to it (the
    first env to ask replaces it, the others get the replacement; the count carries)."""
    holder = getattr(_local, "holder", None)
    if holder is not None and holder["pw"] is pw:
        refs, retired = holder["refs"], [*holder["retired"], pw]
        _local.holder = None
        try:
            pw.stop()
        except Exception:
            pass
        new = acquire_playwright()
        _local.holder["refs"], _local.holder["retired"] = refs, retired
        return new
    if _held(holder, pw):
        return holder["pw"]
    return pw


def descendant_pids(root: int) -> list[int]:
    """All processes below `root` (Chromium's zygote and renderers), from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue  # the process ended while we looked
        children.setdefault(ppid, []).append(int(entry))
    out, stack = [], [root]
    while stack:
        for child in children.get(stack.pop(), []):
            out.append(child)
            stack.append(child)
    return out


def kill_renderers(browser_pid: int) -> int:
    """SIGKILL the browser's renderer processes; returns how many were killed.

    The way out of a page whose renderer no longer answers: Playwright's input
    calls have no timeout, and a crashed renderer makes them fail at once.
    """
    killed = 0
    for pid in descendant_pids(browser_pid):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"--type=renderer" not in f.read():
                    continue
            os.kill(pid, signal.SIGKILL)
            killed += 1
        except OSError:
            continue
    return killed


def process_running(pid: int) -> bool:
    """Whether `pid` is a live process (a killed child lingers as a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (FileNotFoundError, IndexError):
        return False
    except OSError:
        try:
            os.kill(pid, 0)
            return True
        except OSError:
            return False


class Watchdog:
    """Frees a thread blocked in a Playwright call that has no timeout.

    After `seconds` the browser's renderers are killed, which fails the blocked
    call at once ("Target crashed"); if the call is still blocked
    `browser_after_s` later, the browser itself is killed. `on_fire(message)`
    is told which happened, from the timer thread, before the kill.
    """

    def __init__(self, browser_pid: int, seconds: float, on_fire, browser_after_s: float = 5.0):
        self._timers = [
            threading.Timer(seconds, self._kill_page, (browser_pid, seconds, on_fire)),
            threading.Timer(seconds + browser_after_s, self._kill_browser, (browser_pid, on_fire)),
        ]
        for t in self._timers:
            t.daemon = True

    @staticmethod
    def _kill_page(pid: int, seconds: float, on_fire) -> None:
        on_fire(f"the page did not respond within {seconds:.1f}s; its renderer was killed")
        kill_renderers(pid)

    @staticmethod
    def _kill_browser(pid: int, on_fire) -> None:
        on_fire("the browser did not respond; it was killed")
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass

    def __enter__(self) -> Watchdog:
        for t in self._timers:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        for t in self._timers:
            t.cancel()
