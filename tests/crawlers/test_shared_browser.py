"""Contexts sharing a Chromium (`contexts_per_browser`): one browser process, apart
storage, cookies and permissions, and a crash of the shared browser fails all of its
envs, whose restart leases a live one. Real Chromium, real pages on loopback."""

from __future__ import annotations

import os
import signal
import time

import pytest

from crawlers.browser import process_running
from crawlers.shared_browser import ENV_VAR, REGISTRY, default_contexts_per_browser
from crawlers.web_env import BrowserCrashed, WebEnv
from schemas.records import DeviceProfile

DESKTOP = DeviceProfile(name="desktop", viewport_width=800, viewport_height=600)


@pytest.fixture(scope="module")
def pair():
    a = WebEnv.launch(contexts_per_browser=2)
    b = WebEnv.launch(contexts_per_browser=2)
    try:
        yield a, b
    finally:
        a.close()
        b.close()


def test_two_envs_share_one_chromium_and_a_third_gets_another(pair):
    a, b = pair
    assert a.browser_pid == b.browser_pid and process_running(a.browser_pid)
    with WebEnv.launch(contexts_per_browser=2) as c:
        assert c.browser_pid != a.browser_pid  # the first browser holds its 2
        pid_c = c.browser_pid
    assert not process_running(pid_c)  # the last lease stopped it


def test_storage_cookies_and_permissions_stay_apart(pair, pages_url):
    a, b = pair
    url = f"{pages_url}/actions.html"
    a.reset(url, DESKTOP)
    b.reset(url, DESKTOP)
    a.page.evaluate("localStorage.setItem('k', 'from-a'); document.cookie = 'c=from-a; path=/'")
    a.context.grant_permissions(["geolocation"], origin=pages_url)
    assert a.page.evaluate("localStorage.getItem('k')") == "from-a"
    assert "c=from-a" in a.page.evaluate("document.cookie")
    b.reset(url, DESKTOP)  # reloaded after a wrote: nothing of a's shows
    assert b.page.evaluate("localStorage.getItem('k')") is None
    assert b.page.evaluate("document.cookie") == ""
    perm = "navigator.permissions.query({name: 'geolocation'}).then(p => p.state)"
    assert a.page.evaluate(perm) == "granted"
    assert b.page.evaluate(perm) == "prompt"
    a.reset(url, DESKTOP)  # a's next episode is a fresh context: its storage is gone
    assert a.page.evaluate("localStorage.getItem('k')") is None


def test_a_crashed_shared_browser_fails_all_its_envs_and_restart_recovers(pages_url):
    url = f"{pages_url}/actions.html"
    a = WebEnv.launch(contexts_per_browser=2)
    b = WebEnv.launch(contexts_per_browser=2)
    try:
        a.reset(url, DESKTOP)
        b.reset(url, DESKTOP)
        dead = a.browser_pid
        os.kill(dead, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while (a.is_alive() or b.is_alive()) and time.monotonic() < deadline:
            time.sleep(0.05)
        for env in (a, b):
            assert not env.is_alive()
            with pytest.raises(BrowserCrashed):
                env.reset(url, DESKTOP)
        a.restart()
        b.restart()
        assert a.browser_pid == b.browser_pid != dead
        assert (
            a.reset(url, DESKTOP).last_action_error is None
            and b.reset(url, DESKTOP).last_action_error is None
        )
        assert all(br.alive() for br in REGISTRY.live())
    finally:
        a.close()
        b.close()
    assert not process_running(a.browser_pid)


def test_the_default_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv(ENV_VAR, "4")
    assert default_contexts_per_browser() == 4
    monkeypatch.setenv(ENV_VAR, "zero")
    with pytest.raises(ValueError, match=ENV_VAR):
        default_contexts_per_browser()
    with pytest.raises(ValueError, match="contexts_per_browser=0"):
        WebEnv.launch(contexts_per_browser=0)


def _drivers() -> set[int]:
    """This process's Playwright drivers (node children)."""
    import psutil

    return {p.pid for p in psutil.Process().children() if "node" in p.name()}


def test_a_pinned_thread_keeps_its_envs_on_one_driver_and_its_own_chromium(pages_url):
    """The server's thread groups (trajforge/envs/sessions.py): envs launched on a pinned
    thread share its driver and a Chromium no other thread's env joins; apart as ever;
    a killed driver is replaced for all of them; the last close stops both."""
    from concurrent.futures import ThreadPoolExecutor

    from crawlers.shared_browser import pin_thread

    url = f"{pages_url}/actions.html"
    before = _drivers()
    group = ThreadPoolExecutor(max_workers=1, initializer=pin_thread)
    try:
        a, b = group.submit(lambda: [WebEnv.launch(contexts_per_browser=3) for _ in range(2)]).result()
        drivers = _drivers() - before
        assert len(drivers) == 1  # the group's one driver for its two envs
        outsider = WebEnv.launch(contexts_per_browser=3)  # this thread: not into the pinned one's
        try:
            assert a.browser_pid == b.browser_pid != outsider.browser_pid

            def isolated():
                a.reset(url, DESKTOP)
                b.reset(url, DESKTOP)
                a.page.evaluate("localStorage.setItem('k', 'from-a'); document.cookie = 'c=from-a; path=/'")
                b.reset(url, DESKTOP)
                return b.page.evaluate("[localStorage.getItem('k'), document.cookie]")

            assert group.submit(isolated).result() == [None, ""]
            os.kill(drivers.pop(), signal.SIGKILL)

            def recovered():
                for env in (a, b):
                    env.restart()  # the first replaces the driver, the second moves to it
                return [env.reset(url, DESKTOP).last_action_error for env in (a, b)]

            assert group.submit(recovered).result() == [None, None]
            assert a.browser_pid == b.browser_pid
        finally:
            group.submit(lambda: [a.close(), b.close()]).result()
            outsider.close()
    finally:
        group.shutdown(wait=True)
    deadline = time.monotonic() + 10
    while _drivers() - before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _drivers() - before == set()
    assert not process_running(a.browser_pid)
