"""`wait_for` on a real page: expressions (arrows inside), functions, CSS selectors, timeouts.

The notes app (apps.notes_server) adds `<li class="item">ready</li>` to its
list `?delay=` ms after loading; each condition must hold only once it is there.
"""

from __future__ import annotations

import pytest

from crawlers.crawl_driver import EnvCrawl
from crawlers.env_crawl import crawl_environment
from crawlers.env_wait import condition_kind, wait_for_condition
from crawlers.randomise import fixed
from crawlers.web_env import WebEnv
from schemas.environment import environment_from_dict
from trajforge.store.raw import RawStore

from .apps import notes_server

pytestmark = pytest.mark.slow

ITEMS = "document.querySelectorAll('li.item').length"


@pytest.fixture(scope="module")
def server():
    with notes_server() as app:
        yield app.url


@pytest.fixture(scope="module")
def env():
    with WebEnv.launch(headless=True) as e:
        yield e


@pytest.mark.parametrize(
    "condition",
    [
        # An expression that merely contains an arrow function: an expression.
        "[...document.querySelectorAll('li.item')].some(e => e.textContent.includes('ready'))",
        "document.querySelectorAll('li.item').length > 0 && ['ready'].every(w => document.body.innerText.includes(w))",
        # Whole functions: called.
        "() => document.querySelectorAll('li.item').length > 0",
        "function () { return document.querySelectorAll('li.item').length > 0; }",
        "async () => { await new Promise(r => setTimeout(r, 10)); return !!document.querySelector('li.item'); }",
        # A promise: awaited.
        "new Promise(r => setTimeout(() => r(!!document.querySelector('li.item')), 10))",
        "return !!document.querySelector('li.item');",
        # A trailing comment or semicolon does not break the wrapping.
        "!!document.querySelector('li.item') // the list is filled",
        "!!document.querySelector('li.item');",
        # CSS selectors, with the characters JavaScript also uses.
        "ul > li.item",
        "li[class='item']",
        "css:#items li",
        "js:!!document.querySelector('#items li')",
    ],
)
def test_each_form_waits_until_it_holds(server, env, condition):
    env.reset(f"{server}/?delay=1200", fixed("desktop", "en"))
    assert env.page.evaluate(ITEMS) == 0  # not there yet: the wait must wait
    wait_for_condition(env.page, condition, 5)
    assert env.page.evaluate(ITEMS) == 1


def test_what_is_css_and_what_is_javascript(server, env):
    env.reset(f"{server}/?delay=0", fixed("desktop", "en"))
    kinds = {
        c: condition_kind(env.page, c, float("inf"))[0]
        for c in (
            "h1",
            "ul > li",
            "[data-ready]",
            "a:not(.x)",
            "[...document.querySelectorAll('a')].some(e => e.href)",
            "window.appReady",
            "performance.getEntriesByType('navigation')[0].type === 'reload'",
            "x => x",
            "(async () => true)()",
        )
    }
    assert kinds == {
        "h1": "css",
        "ul > li": "css",
        "[data-ready]": "css",
        "a:not(.x)": "css",
        "[...document.querySelectorAll('a')].some(e => e.href)": "js",
        "window.appReady": "js",
        "performance.getEntriesByType('navigation')[0].type === 'reload'": "js",
        "x => x": "js",
        "(async () => true)()": "js",
    }


def test_a_condition_that_never_holds_says_what_it_last_threw(server, env):
    env.reset(f"{server}/?delay=0", fixed("desktop", "en"))
    with pytest.raises(
        TimeoutError, match=r"did not hold within 0.6 s \(last error: .*nosuch is not defined"
    ):
        wait_for_condition(env.page, "nosuch.ready === true", 0.6)
    with pytest.raises(TimeoutError, match=r"did not hold within 0.6 s$"):
        wait_for_condition(env.page, "[...document.querySelectorAll('li')].some(e => e.id === 'x')", 0.6)
    with pytest.raises(TimeoutError, match=r"selector 'ul > li.missing' was not visible within 0.6 s"):
        wait_for_condition(env.page, "ul > li.missing", 0.6)
    # `app.ready` is a valid selector: it reads as one, and the error says how to mean JavaScript.
    with pytest.raises(TimeoutError, match=r"selector 'app.ready' .* write js: before it"):
        wait_for_condition(env.page, "app.ready", 0.6)


def _crawl(server, tmp_path, wait_for: str, **over):
    raw = {
        "name": "notes",
        "start_url": f"{server}/?delay=800",
        "wait_for": wait_for,
        "tasks": [{"task_id": "look", "instruction": "Look at the list", "params": {"script": []}}],
        "verifier": {"kind": "js", "expression": f"({{done: true, success: {ITEMS} === 1}})"},
        **over,
    }
    store = RawStore(tmp_path / "raw")
    crawl_environment(environment_from_dict(raw), EnvCrawl(policy="oracle", retries=0), store=store)
    [traj] = store.iter_trajectories()
    return traj, list(store.iter_steps())


def test_an_environment_file_with_an_arrow_in_its_wait_for_crawls(server, tmp_path):
    traj, steps = _crawl(
        server,
        tmp_path,
        "[...document.querySelectorAll('li.item')].some(e => e.textContent.includes('ready'))",
    )
    assert (traj.outcome, traj.verified_by, traj.error) == ("success", "js", None)
    assert "ready" in steps[0].a11y_tree  # the first observation came after the wait


def test_a_wait_for_that_times_out_is_an_error_naming_it(server, tmp_path):
    traj, steps = _crawl(server, tmp_path, "nosuch.ready === true", wait_timeout_s=1)
    assert traj.outcome == "error" and steps == []
    assert traj.error.startswith(
        "WaitForTimeout: environment 'notes', task 'look', wait_for 'nosuch.ready === true'"
    )
    assert "did not hold within 1 s (last error: ReferenceError: nosuch is not defined)" in traj.error
