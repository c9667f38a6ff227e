"""Chromiums that several sessions' contexts share (`contexts_per_browser`).

A Chromium costs ~100 MB before any page; sessions that each own one pay it N
times. Here a process-wide registry launches Chromium itself (DevTools on a free
port) and leases it to up to N environments; each connects over CDP from its own
thread's Playwright driver (sync objects belong to one thread) and plays in its
own BrowserContext, so storage, cookies and permissions stay apart. A browser
that dies fails every lease on it (each env sees `disconnected`); their
`restart()` releases it and leases a live one. The last release stops it.

A lease prefers a Chromium the calling thread started (its envs share that thread's
driver too). A thread that called `pin_thread()` (the server's session groups,
trajforge/envs/sessions.py) keeps to Chromiums of its own: N envs on one thread, one
driver and one Chromium, never a browser half another thread's.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass

from .browser import CHROMIUM_ARGS, DEFAULT_EXECUTABLE, process_running

ENV_VAR = "TRAJFORGE_CONTEXTS_PER_BROWSER"


def default_contexts_per_browser() -> int:
    """The default N: $TRAJFORGE_CONTEXTS_PER_BROWSER (`trajforge serve
    --contexts-per-browser` sets it), else 1 (a Chromium per env)."""
    raw = os.environ.get(ENV_VAR, "1")
    try:
        n = int(raw)
    except ValueError:
        raise ValueError(f"${ENV_VAR}={raw!r}: expected a whole number >= 1") from None
    if n < 1:
        raise ValueError(f"${ENV_VAR}={raw!r}: expected a whole number >= 1")
    return n


_thread = threading.local()  # .token: the calling thread's; .pinned: pin_thread() was called


def _token() -> object:
    token = getattr(_thread, "token", None)
    if token is None:
        token = _thread.token = object()
    return token


def pin_thread() -> None:
    """The calling thread's leases go to Chromiums it started, and no other thread's to
    those (a ThreadPoolExecutor initializer of the server's session groups)."""
    _thread.pinned = True


_DEVTOOLS = re.compile(r"DevTools listening on (ws://\S+)")


@dataclass
class SharedChromium:
    proc: subprocess.Popen
    endpoint: str  # ws://127.0.0.1:PORT/devtools/browser/ID
    profile: str
    leases: int = 0
    owner: object | None = None  # the token of the thread that started it
    exclusive: bool = False  # started by a pinned thread: only that thread leases it

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None and process_running(self.proc.pid)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)


def _start(executable: str, headless: bool, timeout_s: float = 30.0) -> SharedChromium:
    if not os.path.exists(executable):
        raise FileNotFoundError(f"contexts_per_browser needs a Chromium binary: {executable} not found")
    profile = tempfile.mkdtemp(prefix="tf-shared-chromium-")
    args = [executable, *CHROMIUM_ARGS, "--remote-debugging-port=0", f"--user-data-dir={profile}"]
    if headless:
        args += ["--headless=new", "--hide-scrollbars", "--mute-audio"]
    args.append("about:blank")
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    endpoint, seen = None, []
    timer = threading.Timer(timeout_s, proc.kill)
    timer.start()
    try:
        for line in proc.stderr:  # Chromium prints its endpoint on stderr
            seen.append(line)
            m = _DEVTOOLS.search(line)
            if m:
                endpoint = m.group(1)
                break
    finally:
        timer.cancel()
    if endpoint is None:
        proc.kill()
        proc.wait()
        shutil.rmtree(profile, ignore_errors=True)
        raise RuntimeError(f"Chromium ({executable}) did not open DevTools: {''.join(seen[-5:]).strip()}")
    # Keep draining stderr, or a chatty Chromium blocks on a full pipe.
    threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
    return SharedChromium(proc, endpoint, profile)


class BrowserRegistry:
    """Leases of shared Chromiums: at most `per_browser` live leases on each."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._browsers: list[SharedChromium] = []

    def lease(
        self, per_browser: int, *, executable: str = DEFAULT_EXECUTABLE, headless: bool = True
    ) -> SharedChromium:
        if per_browser < 1:
            raise ValueError(f"contexts_per_browser={per_browser} must be >= 1")
        token, pinned = _token(), getattr(_thread, "pinned", False)
        with self._lock:
            room = [b for b in self._browsers if b.alive() and b.leases < per_browser]
            # This thread's own first; another's only when neither side is pinned.
            mine = [b for b in room if b.owner is token]
            others = [] if pinned else [b for b in room if not b.exclusive and b.owner is not token]
            for b in mine + others:
                b.leases += 1
                return b
            b = _start(executable, headless)
            b.leases, b.owner, b.exclusive = 1, token, pinned
            self._browsers.append(b)
            return b

    def release(self, b: SharedChromium) -> None:
        with self._lock:
            b.leases -= 1
            if b.leases <= 0:
                if b in self._browsers:
                    self._browsers.remove(b)
                b.stop()

    def live(self) -> list[SharedChromium]:
        with self._lock:
            return [b for b in self._browsers if b.alive()]


REGISTRY = BrowserRegistry()
