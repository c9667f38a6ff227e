"""An environment file says how its episodes start over (`reset`): a fresh context (the
default, optionally seeded with a storage state), the kept page with the app's own reset
script, or a new browser. Real Chromium on the tiny app of conftest.py."""

from __future__ import annotations

import json
import time

import pytest

import trajforge.envs as tf_envs
from crawlers.browser import process_running
from schemas.environment import EnvironmentFileError, load_environment
from tests.envs.serving import tiny_env_file

pytestmark = pytest.mark.slow


def _with_reset(path, block: str):
    path.write_text(path.read_text(encoding="utf-8") + block, encoding="utf-8")
    return path


def _local(env, expression: str):
    return env.unwrapped.browser.page.evaluate(expression)


def test_page_mode_keeps_the_page_runs_the_apps_reset_and_starts_over(tiny_url, tmp_path):
    script = "localStorage.setItem('resets', String(+(localStorage.getItem('resets') || 0) + 1))"
    path = _with_reset(tiny_env_file(tmp_path, tiny_url), f'reset:\n  mode: page\n  script: "{script}"\n')
    env = tf_envs.make(path)
    try:
        _, info = env.reset(seed=0)
        context, page = env.unwrapped.browser.context, env.unwrapped.browser.page
        add = next(e for e in info["elements"] if e["name"] == "Add")["bbox"]
        env.step({"type": "tap", "x": (add[0] + add[2]) / 2, "y": (add[1] + add[3]) / 2})
        assert _local(env, "document.body.dataset.n") == "1"
        # The theme asked for (info records the one the page showed: this page has no dark style).
        timings, themes = [], {env.unwrapped.browser.device.theme}
        for seed in (1, 2, 3, 4):
            t = time.perf_counter()
            env.reset(seed=seed)
            timings.append(time.perf_counter() - t)
            # The same context and page; the start page loaded again (the counter is back at 0).
            assert env.unwrapped.browser.context is context and env.unwrapped.browser.page is page
            assert _local(env, "document.body.dataset.n || '0'") == "0"
            # A theme drawn for the episode is set in the kept page.
            theme = env.unwrapped.browser.device.theme
            themes.add(theme)
            assert _local(env, "matchMedia('(prefers-color-scheme: dark)').matches") == (theme == "dark")
        assert themes == {"light", "dark"}  # the seeds drew both: the page was kept across a theme change
        # The app's reset ran before each start page after the first (localStorage outlives it).
        assert _local(env, "localStorage.getItem('resets')") == "4"
        print(f"page-mode resets: {[round(t * 1000) for t in timings]} ms")
    finally:
        env.close()


def test_context_mode_starts_each_episode_from_the_storage_state(tiny_url, tmp_path):
    state = tmp_path / "state.json"
    state.write_text(
        json.dumps(
            {
                "cookies": [],
                "origins": [{"origin": tiny_url, "localStorage": [{"name": "user", "value": "ada"}]}],
            }
        ),
        encoding="utf-8",
    )
    path = _with_reset(tiny_env_file(tmp_path, tiny_url), "reset:\n  storage_state: state.json\n")
    assert load_environment(path).reset.storage_state == str(state.resolve())
    env = tf_envs.make(path)
    try:
        env.reset(seed=0)
        first = env.unwrapped.browser.context
        assert _local(env, "localStorage.getItem('user')") == "ada"
        _local(env, "localStorage.setItem('user', 'changed')")
        env.reset(seed=1)
        # A fresh context, seeded again: what the last episode wrote is gone.
        assert env.unwrapped.browser.context is not first
        assert _local(env, "localStorage.getItem('user')") == "ada"
    finally:
        env.close()


def test_relaunch_mode_plays_each_episode_in_a_new_browser(tiny_url, tmp_path):
    path = _with_reset(tiny_env_file(tmp_path, tiny_url), "reset: {mode: relaunch}\n")
    env = tf_envs.make(path)
    try:
        env.reset(seed=0)
        first = env.unwrapped.browser.browser_pid
        env.reset(seed=1)
        assert env.unwrapped.browser.browser_pid != first
        deadline = time.monotonic() + 10
        while process_running(first) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not process_running(first)  # the old browser is gone, not leaked
    finally:
        env.close()


@pytest.mark.parametrize(
    "block, field, words",
    [
        ("reset: {mode: context, script: 'x()'}\n", "reset", "mode 'page'"),
        ("reset: {mode: page, storage_state: s.json}\n", "reset", "fresh context"),
        ("reset: {storage_state: missing.json}\n", "reset.storage_state", "no such file"),
        ("reset: {mode: reload}\n", "reset.mode", "context"),
    ],
)
def test_a_bad_reset_block_names_its_field(tmp_path, block, field, words):
    path = _with_reset(tiny_env_file(tmp_path, "http://127.0.0.1:9"), block)
    with pytest.raises(EnvironmentFileError) as err:
        load_environment(path)
    assert err.value.field == field and words in str(err.value)


def test_a_native_app_refuses_a_reset_block(tmp_path):
    path = tmp_path / "app.yaml"
    path.write_text(
        "name: app\nplatform: android\napp: {package: org.example}\nexplore: {episodes: 1}\n"
        "reset: {mode: page}\n",
        encoding="utf-8",
    )
    with pytest.raises(EnvironmentFileError, match="relaunched by Appium"):
        load_environment(path)


def test_a_seed_draws_the_same_screen_in_every_env_that_explores(tiny_url, tmp_path):
    """An exploration task's id names its env's run; the theme must follow the seed alone
    (it had followed the run id too: two envs drew different themes for one seed)."""
    path = tiny_env_file(tmp_path, tiny_url)
    drawn = []
    for _ in range(2):
        env = tf_envs.make(path)
        try:
            themes = []
            for seed in (0, 1, 3):
                env.reset(seed=seed)
                themes.append(env.unwrapped.browser.device.theme)
            drawn.append(themes)
        finally:
            env.close()
    assert drawn[0] == drawn[1] and set(drawn[0]) == {"light", "dark"}, drawn
