"""The Gym API on a phone through a real Appium server (a Chromium phone, W3C touch actions):
the same GuiEnv, on leases of a DevicePool; its device-pixel screenshots come back in the
observation's fixed frame (the profile's CSS viewport), where the action dicts' pixels are."""

from __future__ import annotations

import pytest

import trajforge.envs as tf_envs
from crawlers.capabilities import chromium_device
from crawlers.device_pool import DevicePool
from schemas.environment import environment_from_dict
from tests.thirdparty.apps import counter_server

pytestmark = pytest.mark.slow


def test_a_mobile_web_environment_through_appium_as_a_gym_env(appium_server):
    with counter_server() as url:
        environment = environment_from_dict(
            {
                "name": "counter-phone",
                "platform": "mobile_web",
                "start_url": f"{url}/",
                "devices": ["pixel_8"],
                "max_steps": 4,
                "wait_for": "button",
                "tasks": [{"task_id": "add", "instruction": "Press Add twice"}],
                "verifier": {
                    "kind": "js",
                    "expression": "({done: document.body.dataset.n === '2', success: "
                    "document.body.dataset.n === '2', reason: 'pressed ' + (document.body.dataset.n || 0)})",
                },
            }
        )
        with DevicePool([chromium_device("pixel_8")], server=appium_server) as pool:
            env = tf_envs.make(environment, pool=pool)
            try:
                obs, info = env.reset(seed=0)
                width, height = env.unwrapped.screen_size
                assert obs["screenshot"].shape == (height, width, 3)
                assert (info["device"]["name"], info["device"]["viewport_width"]) == ("pixel_8", width)
                assert info["platform"] == "mobile_web"
                add = next(e for e in info["elements"] if e["name"] == "Add" and e["bbox"])
                x0, y0, x1, y1 = add["bbox"]
                tap = {"type": "tap", "x": (x0 + x1) / 2, "y": (y0 + y1) / 2}
                _, reward, terminated, _, info = env.step(tap)
                assert (reward, terminated, info["verdict"]["reason"]) == (0.0, False, "pressed 1")
                _, reward, terminated, truncated, info = env.step(tap)
                assert (reward, terminated, truncated) == (1.0, True, False)
                assert (info["outcome"], info["verified_by"]) == ("success", "js")
            finally:
                env.close()
