"""The recorded theme and locale are the ones the page showed, not only the ones asked for.

The notes app's `/` is light and English whatever the browser asks; `/themed`
follows prefers-color-scheme; `/zh` says `<html lang="zh-CN">`; `/zh-nolang`
is Chinese text without a lang attribute.
"""

from __future__ import annotations

import pytest

from crawlers.crawl_driver import EnvCrawl
from crawlers.env_crawl import crawl_environment, device_for
from crawlers.env_device import observed_locale
from schemas.environment import environment_from_dict
from trajforge.store.raw import RawStore

from .apps import notes_server

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def app():
    with notes_server() as app:
        yield app


def _walks(app, tmp_path, path: str, episodes: int = 4):
    environment = environment_from_dict(
        {
            "name": "notes",
            "start_url": f"{app.url}{path}",
            "languages": ["en", "zh"],
            "explore": {"policy": "random_walk", "episodes": episodes, "max_steps": 1},
        }
    )
    store = RawStore(tmp_path / "raw")
    crawl_environment(environment, EnvCrawl(policy="random_walk", retries=0), store=store)
    walks = sorted(store.iter_trajectories(), key=lambda t: t.task.task_id)
    asked = [device_for(environment, t.task, 0) for t in walks]
    return walks, asked


def test_an_app_that_ignores_the_colour_scheme_and_locale_is_recorded_as_shown(app, tmp_path):
    walks, asked = _walks(app, tmp_path, "/")
    assert {d.theme for d in asked} == {"light", "dark"}  # both were asked for
    assert {d.locale for d in asked} == {"en-US", "zh-CN"}
    assert [t.device.theme for t in walks] == ["light"] * len(walks)
    assert [t.device.locale for t in walks] == ["en-US"] * len(walks)  # an English UI
    assert {t.task.language for t in walks} == {"en", "zh"}  # the tasks keep their own language


def test_an_app_that_follows_the_colour_scheme_keeps_the_drawn_theme(app, tmp_path):
    walks, asked = _walks(app, tmp_path, "/themed")
    assert {d.theme for d in asked} == {"light", "dark"}
    assert [t.device.theme for t in walks] == [d.theme for d in asked]


@pytest.mark.parametrize("path", ["/zh", "/zh-nolang"])
def test_a_chinese_ui_is_recorded_zh_cn(app, tmp_path, path):
    walks, _ = _walks(app, tmp_path, path, episodes=2)
    assert [t.device.locale for t in walks] == ["zh-CN", "zh-CN"]


def test_observed_locale_keeps_the_emulated_region_when_they_agree():
    assert observed_locale("en-US", "en") == "en-US"
    assert observed_locale("en-US", "en-GB") == "en-US"
    assert observed_locale("zh-CN", "en") == "en-US"
    assert observed_locale("en-US", "zh") == "zh-CN"
    assert observed_locale("en-US", "fr-FR") == "fr-FR"
    assert observed_locale("zh-CN", None) == "zh-CN"


def test_an_episode_pinned_to_a_profile_gets_it_whatever_the_seed_draws():
    """A demonstration of recorded points is played on its walk's screen
    (crawlers/task_validation_play.py); a name the file does not list is drawn over."""
    from schemas.records import Task

    environment = environment_from_dict(
        {
            "name": "notes",
            "start_url": "http://127.0.0.1:9/",
            "devices": ["desktop", "laptop"],
            "explore": {"episodes": 1},
        }
    )
    task = Task(task_id="t", instruction="x", app="notes", language="zh")
    drawn = {device_for(environment, task, seed).name for seed in range(12)}
    assert drawn == {"desktop", "laptop"}
    for name in drawn:
        pinned = [device_for(environment, task, seed, profile=name) for seed in range(12)]
        assert {d.name for d in pinned} == {name} and {d.locale for d in pinned} == {"zh-CN"}
    assert {device_for(environment, task, s, profile="phone").name for s in range(12)} == drawn
