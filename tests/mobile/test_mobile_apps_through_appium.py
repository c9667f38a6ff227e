"""The mobile sandbox apps, crawled through the real Appium server on phones.

The apps' own test files sweep every template in Playwright's phone emulation;
this is the path the demo and production take: Appium 3, appium-chromium-driver,
W3C touch actions, page source normalised to the accessibility form. Per app,
one template that needs a swipe and one that needs a long press, on the large
Chinese Android profile with two concurrent sessions, interruptions included.
"""

from __future__ import annotations

from collections import Counter

from crawlers.capabilities import chromium_device
from crawlers.device_pool import DevicePool
from sandbox.apps import MOBILE_APPS
from sandbox.crawl import SandboxCrawl, crawl
from sandbox.tasks import TEMPLATES
from sandbox.tasks.base import Swipe, Tap
from schemas.actions import ActionType
from trajforge.store.raw import RawStore


def _needs(template, lang: str, kind: str) -> bool:
    task = template.make_task(lang, 0)
    for step in template.plan(task.params, lang):
        if kind == "swipe" and isinstance(step, Swipe):
            return True
        if kind == "long_press" and isinstance(step, Tap) and step.kind == ActionType.LONG_PRESS:
            return True
    return False


def _gesture_tasks():
    tasks = []
    for i, app in enumerate(MOBILE_APPS):
        mine = [TEMPLATES[t] for t in sorted(TEMPLATES) if TEMPLATES[t].app == app]
        for j, kind in enumerate(("swipe", "long_press")):
            lang = ("en", "zh")[(i + j) % 2]
            template = next(t for t in mine if _needs(t, lang, kind))
            tasks.append(template.make_task(lang, 3))
    return tasks


def test_gesture_tasks_of_every_mobile_app_succeed_through_appium(appium_server, sandbox_server, tmp_path):
    tasks = _gesture_tasks()
    assert len(tasks) == 2 * len(MOBILE_APPS) >= 6
    store = RawStore(tmp_path / "raw")
    with DevicePool(
        [chromium_device("cn_android_large")],
        server=appium_server,
        server_url=appium_server.url,
        sessions_per_device=2,
        screenshot_scale="css",
    ) as pool:
        stats = crawl(
            tasks,
            SandboxCrawl(server_url=sandbox_server.url, distraction_rate=0.5),
            store=store,
            collection="mobile/gestures",
            pool=pool,
        )
        used = pool.stats()["slots_used"]
    trajs = list(store.iter_trajectories(["mobile/gestures"]))
    assert stats.trajectories == len(tasks) == len(trajs)
    failed = [(t.task.task_id, t.outcome, t.error) for t in trajs if t.outcome != "success"]
    assert not failed and all(t.verified_by == "state" for t in trajs)
    assert {t.platform for t in trajs} == {"mobile_web"}
    assert {t.device.name for t in trajs} == {"cn_android_large"} and used == 2
    assert Counter(t.task.language for t in trajs) == {"en": len(MOBILE_APPS), "zh": len(MOBILE_APPS)}
    actions = Counter(s.action.type for s in store.iter_steps(["mobile/gestures"]))
    assert actions[ActionType.SWIPE] >= len(MOBILE_APPS)
    assert actions[ActionType.LONG_PRESS] >= len(MOBILE_APPS)
    # The accessibility tree came from the page source: the same line grammar as web.
    step = next(iter(store.iter_steps(["mobile/gestures"])))
    assert step.a11y_tree.lstrip().startswith("- ") and step.elements
    assert step.width == 480 and step.height == 1040
