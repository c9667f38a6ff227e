"""Mobile crawl throughput through a real Appium server, against a bare Appium loop.

    .venv/bin/python benchmarks/mobile_throughput.py [--tasks 12] [--bare-steps 40]

Three measurements in one run, on the same server, sandbox and phone profile
(pixel_8, Chromium with mobile emulation through appium-chromium-driver):

1. baseline: a bare Appium loop, one session, W3C touch tap + screenshot, the
   least any recorder must do per step;
2. trajforge with 1 session: `crawl` of mobile sandbox tasks (oracle policy;
   each step is act + settle + screenshot + page source + normalise + store);
3. the same tasks with 2 concurrent sessions (a DevicePool of 2).

Prints steps per second for each and the ratios against the baseline; the
machine is noisy, so only ratios measured in the same run are compared.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from crawlers.appium_server import AppiumServer  # noqa: E402
from crawlers.capabilities import build_capabilities, chromium_device  # noqa: E402
from crawlers.device_pool import DevicePool  # noqa: E402
from sandbox.crawl import SandboxCrawl, crawl  # noqa: E402
from sandbox.server import SandboxServer, start_url  # noqa: E402
from sandbox.tasks import build_catalog  # noqa: E402
from trajforge.store.raw import RawStore  # noqa: E402

PROFILE = "pixel_8"


def bare_loop(server_url: str, sandbox_url: str, steps: int) -> float:
    """Steps/s of tap + screenshot in one plain Appium session."""
    from appium import webdriver
    from appium.options.common.base import AppiumOptions
    from selenium.webdriver.common.actions import interaction
    from selenium.webdriver.common.actions.action_builder import ActionBuilder
    from selenium.webdriver.common.actions.pointer_input import PointerInput

    spec = chromium_device(PROFILE)
    opts = AppiumOptions()
    opts.load_capabilities(build_capabilities(spec, chromedriver_port=_free_port()))
    driver = webdriver.Remote(server_url, options=opts)
    try:
        driver.get(start_url(sandbox_url, sid="bench-bare", app="mobile_shop", lang="en", seed=0))
        w, _h = spec.profile.viewport_width, spec.profile.viewport_height
        finger = PointerInput(interaction.POINTER_TOUCH, "finger")
        t0 = time.perf_counter()
        for _ in range(steps):
            ab = ActionBuilder(driver, mouse=finger)
            # The status bar: a tap that changes nothing, so every step costs the same.
            ab.pointer_action.move_to_location(w // 2, 8).pointer_down().pointer_up()
            ab.perform()
            driver.get_screenshot_as_png()
        return steps / (time.perf_counter() - t0)
    finally:
        driver.quit()


def crawl_rate(server: AppiumServer, sandbox_url: str, tasks, sessions: int) -> tuple[float, dict]:
    with tempfile.TemporaryDirectory() as tmp:
        store = RawStore(Path(tmp) / "raw")
        with DevicePool(
            [chromium_device(PROFILE)], server=server, server_url=server.url, sessions_per_device=sessions
        ) as pool:
            stats = crawl(
                tasks,
                SandboxCrawl(server_url=sandbox_url, policy="oracle", distraction_rate=0.0),
                store=store,
                collection="bench",
                pool=pool,
            )
        return stats.steps / stats.seconds, stats.as_dict()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=12, help="mobile tasks per crawl")
    ap.add_argument("--bare-steps", type=int, default=40)
    args = ap.parse_args()
    print(json.dumps(measure(args.tasks, args.bare_steps), indent=2))


def measure(n_tasks: int, bare_steps: int) -> dict:
    """The figures (what `main` prints)."""
    tasks = build_catalog(per_template=1, apps=["mobile_shop", "mobile_social", "delivery"])
    tasks = tasks[:: max(1, len(tasks) // n_tasks)][:n_tasks]
    with SandboxServer() as sandbox, AppiumServer() as server:
        bare = bare_loop(server.url, sandbox.url, bare_steps)
        one, one_stats = crawl_rate(server, sandbox.url, tasks, 1)
        two, two_stats = crawl_rate(server, sandbox.url, tasks, 2)
    return {
        "tasks": len(tasks),
        "bare_tap_screenshot_steps_per_s": round(bare, 2),
        "trajforge_1_session_steps_per_s": round(one, 2),
        "trajforge_2_sessions_steps_per_s": round(two, 2),
        "ratio_1_session_vs_bare": round(one / bare, 3),
        "ratio_2_sessions_vs_bare": round(two / bare, 3),
        "speedup_2_vs_1": round(two / one, 3),
        "success_1": one_stats["success"],
        "success_2": two_stats["success"],
        "steps": one_stats["steps"],
    }


# run_all's sizes (the documented run is --tasks 10 --bare-steps 40)
SIZES = {
    "smoke": {"tasks": 1, "bare_steps": 3},
    "quick": {"tasks": 4, "bare_steps": 15},
    "full": {"tasks": 8, "bare_steps": 30},
}


def run(mode: str):
    """run_all's entry: the figures as table rows."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from common import Row, machine_short, pick

    s = pick(mode, SIZES)
    r = measure(s["tasks"], s["bare_steps"])
    mach = machine_short()
    note = f"{r['tasks']} tasks, {r['steps']} steps, {r['success_1']}/{r['tasks']} verified successful"
    return [
        Row(
            "mobile_throughput",
            "mobile crawl (Appium, pixel_8): recorded steps/s, 1 session",
            r["trajforge_1_session_steps_per_s"],
            r["bare_tap_screenshot_steps_per_s"],
            "steps/s",
            "bare Appium tap + screenshot",
            note=note,
            machine=mach,
        ),
        Row(
            "mobile_throughput",
            "mobile crawl: steps/s with 2 sessions",
            r["trajforge_2_sessions_steps_per_s"],
            r["trajforge_1_session_steps_per_s"],
            "steps/s",
            "the same crawl on 1 session",
            note=f"{r['success_2']}/{r['tasks']} successful",
            machine=mach,
        ),
    ]


if __name__ == "__main__":
    main()
