"""An environment file played on a phone through a real Appium server (Chromium phone,
W3C touch actions): its js verifier, setup and wait_for run in the Appium session."""

from __future__ import annotations

import pytest

from crawlers.capabilities import chromium_device
from crawlers.crawl_driver import EnvCrawl
from crawlers.device_pool import DevicePool
from crawlers.env_crawl import crawl_environment
from schemas.environment import environment_from_dict
from tests.thirdparty.apps import counter_server
from trajforge.store.raw import RawStore

pytestmark = pytest.mark.slow


def test_a_mobile_web_environment_through_appium(appium_server, tmp_path):
    with counter_server() as url:
        env = environment_from_dict(
            {
                "name": "counter-phone",
                "platform": "mobile_web",
                "start_url": f"{url}/",
                "devices": ["pixel_8"],
                "max_steps": 4,
                "setup": "document.body.dataset.session = '{session}'",
                "wait_for": "button",
                "tasks": [
                    {
                        "task_id": "add",
                        "instruction": "Press Add twice",
                        "params": {"script": [{"tap": {"role": "button", "name": "Add"}}] * 2},
                    },
                    {
                        "task_id": "add-once",
                        "instruction": "Press Add twice",
                        "params": {"script": [{"tap": {"role": "button", "name": "Add"}}]},
                    },
                ],
                "verifier": {
                    "kind": "js",
                    "expression": "({done: document.body.dataset.n === '2', success: "
                    "document.body.dataset.n === '2', reason: 'session ' + "
                    "document.body.dataset.session})",
                },
            }
        )
        store = RawStore(tmp_path / "raw")
        with DevicePool([chromium_device("pixel_8")], server=appium_server) as pool:
            stats = crawl_environment(env, EnvCrawl(policy="oracle", retries=0), store=store, pool=pool)
    trajs = {t.task.task_id: t for t in store.iter_trajectories()}
    assert stats.trajectories == 2
    add, once = trajs["add"], trajs["add-once"]
    assert (add.outcome, add.verified_by, add.platform, add.num_steps) == ("success", "js", "mobile_web", 2)
    assert add.verifier_reason == f"session {add.trajectory_id}"  # setup ran with {session}
    assert add.device.name == "pixel_8" and add.device.viewport_width == 412
    # One press, then the script's done: the final verdict is a failure, not unknown.
    assert (once.outcome, once.verified_by, once.reward) == ("failure", "js", 0.0)


def test_a_predicates_verifier_on_a_phone_reads_its_tree_and_a_js_probe(appium_server, tmp_path):
    """The phone's page source (HTML through Appium) and a js probe in its session."""
    press = {"tap": {"role": "button", "name": "Add"}}
    with counter_server() as url:
        env = environment_from_dict(
            {
                "name": "counter-phone-predicates",
                "platform": "mobile_web",
                "start_url": f"{url}/?from=phone",
                "devices": ["pixel_8"],
                "max_steps": 4,
                "probes": {"presses": {"js": "+(document.body.dataset.n || 0)"}},
                "tasks": [
                    {"task_id": "twice", "instruction": "Press Add twice", "params": {"script": [press] * 2}},
                    {"task_id": "once", "instruction": "Press Add twice", "params": {"script": [press]}},
                ],
                "verifier": {
                    "kind": "predicates",
                    "predicates": [
                        {"probe": "presses", "greater_than": 1},
                        {"element": {"role": "button", "name": "Add"}},
                        {"url": {"path": "/", "query": {"from": "phone"}}},
                    ],
                },
            }
        )
        store = RawStore(tmp_path / "raw")
        with DevicePool([chromium_device("pixel_8")], server=appium_server) as pool:
            crawl_environment(env, EnvCrawl(policy="oracle", retries=0), store=store, pool=pool)
    trajs = {t.task.task_id: t for t in store.iter_trajectories()}
    twice, once = trajs["twice"], trajs["once"]
    assert (twice.outcome, twice.verified_by, twice.num_steps) == ("success", "predicates", 2), twice.error
    assert twice.verifier_reason == "all 3 predicates hold"
    assert (once.outcome, once.verified_by, once.reward) == ("failure", "predicates", 0.0), once.error
    assert once.verifier_reason == "predicate 0 (probe presses greater than 1.0) fails: value 1"


def test_a_native_app_refuses_what_needs_a_page():
    from schemas.environment import EnvironmentFileError

    with pytest.raises(EnvironmentFileError, match="no page for JavaScript"):
        environment_from_dict(
            {
                "name": "notes",
                "platform": "android",
                "app": {"package": "com.example.notes"},
                "tasks": [{"task_id": "a", "instruction": "x"}],
                "verifier": {"kind": "js", "expression": "true"},
            }
        )


class _RecordingDriver:
    """Stands in for a UiAutomator2 session's driver: records the calls the runtime makes
    (no phone or emulator can run here; this checks the calls, not a device)."""

    def __init__(self):
        self.calls = []

    def execute_script(self, script, args):
        self.calls.append((script, args))

    def find_elements(self, by, value):
        self.calls.append((by, value))
        return [object()]


class _NativeEnv:
    kind = "android"
    platform = "android"

    def __init__(self):
        self.driver = _RecordingDriver()
        self.reset_to = None

    def reset(self, url, device=None, **start):
        from schemas.observation import Observation

        self.reset_to = url
        return Observation(
            screenshot=b"", image_format="png", width=10, height=10, url=url, a11y_tree="", elements=[]
        )

    def observe(self):
        return self.reset(self.reset_to)


def test_a_native_start_is_the_app_its_deep_link_and_an_element_wait():
    from crawlers.env_runtime import EnvironmentRuntime
    from crawlers.randomise import MOBILE_PROFILES
    from schemas.records import Task

    env_file = environment_from_dict(
        {
            "name": "notes",
            "platform": "android",
            "app": {"package": "com.example.notes", "activity": ".Main"},
            "setup": "notes://open?seed={seed}&s={session}",
            "wait_for": "New note",
            "tasks": [{"task_id": "a", "instruction": "x"}],
            "verifier": {"kind": "http", "url": "http://127.0.0.1:9/state"},
        }
    )
    env = _NativeEnv()
    task = Task(task_id="a", instruction="x", language="en", app="notes")
    EnvironmentRuntime(env_file).start(env, task, session="s1", seed=7, device=MOBILE_PROFILES["pixel_8"])
    assert env.reset_to == "com.example.notes/.Main"
    assert env.driver.calls == [
        ("mobile: deepLink", {"url": "notes://open?seed=7&s=s1", "package": "com.example.notes"}),
        ("accessibility id", "New note"),
    ]
