"""Crawling third-party apps through environment files: the recorder against a bare loop.

    .venv/bin/python benchmarks/env_crawl.py [--mode quick]

In one run, for TiddlyWiki (npm) and Datasette (PyPI), each started on
loopback as the tests start them, through their files in examples/environments/:

1. trajforge: `crawl_environment` with the oracle on the task file, then a
   random walk of a few exploration episodes (1 browser, the allowlist proxy,
   verifier after every step): episodes, verified-success rate, the walk's
   no-op rate, P50/P95 step latency, reset time, steps/s;
2. baseline: a bare Playwright loop over the very steps 1 recorded: per
   trajectory a fresh context and the start page, per step a click at the
   recorded point (typing the recorded text, pressing the recorded key), the
   wait a minimal script makes (two frames, a navigation the input started, to
   domcontentloaded: common.BarePage) and a PNG screenshot, nothing else. A
   baseline whose screenshot costs more than 3x a settled page's (measured in the
   same run) says "baseline broken" instead of a ratio (common.check_baseline).

The row is 1's steps/s over 2's (the price of recording: settle, aria snapshot
with boxes, clickables scan, verifier, blobs and Parquet).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import BarePage, Row, check_baseline, fmt_num, fmt_ratio, machine_short, pick  # noqa: E402

from crawlers.crawl_driver import EnvCrawl  # noqa: E402
from crawlers.env_crawl import crawl_environment  # noqa: E402
from schemas.environment import load_environment  # noqa: E402
from schemas.keys import to_playwright  # noqa: E402
from tests.thirdparty.apps import ENVIRONMENTS, datasette, tiddlywiki  # noqa: E402
from trajforge.store.raw import RawStore  # noqa: E402

SIZES = {
    "smoke": {"walks": 1, "walk_steps": 4},
    "quick": {"walks": 3, "walk_steps": 8},
    "full": {"walks": 6, "walk_steps": 10},
}
APPS = {"tiddlywiki": (tiddlywiki, "TIDDLYWIKI_URL"), "datasette": (datasette, "DATASETTE_URL")}


def bare_loop(store: RawStore, collections: list[str], start_url: str) -> dict:
    """Replay the recorded steps with click / type / key + screenshot only; per step
    what a minimal script waits for before its screenshot (common.BarePage: two
    frames, a navigation the input started), per trajectory (outside the clock) one
    screenshot of the settled page, for the baseline's own check."""
    from playwright.sync_api import sync_playwright

    from crawlers.browser import launch_chromium

    trajs = list(store.iter_trajectories(collections))
    steps_by: dict = {}
    for s in store.iter_steps(collections):
        steps_by.setdefault(s.trajectory_id, []).append(s)
    n = lost = 0
    phase = {"act": 0.0, "wait": 0.0, "screenshot": 0.0}
    settled: list[float] = []
    with sync_playwright() as pw:
        browser = launch_chromium(pw)
        try:
            t0 = time.perf_counter()
            untimed = 0.0
            for traj in trajs:
                d = traj.device
                ctx = browser.new_context(
                    viewport={"width": d.viewport_width, "height": d.viewport_height},
                    device_scale_factor=d.pixel_ratio,
                    locale=d.locale,
                    color_scheme=d.theme,
                )
                page = ctx.new_page()
                bare = BarePage(page)
                bare.goto(traj.task.start_url or start_url)
                for s in sorted(steps_by.get(traj.trajectory_id, []), key=lambda s: s.index):
                    a = s.action
                    t = time.perf_counter()
                    try:
                        if a.x is not None and a.type.value in ("tap", "select"):
                            page.mouse.click(a.x * d.viewport_width, a.y * d.viewport_height)
                        elif a.type.value == "type" and a.text:
                            page.keyboard.insert_text(a.text)
                        elif a.type.value == "key" and a.text:
                            page.keyboard.press(to_playwright(a.text))
                        elif a.type.value == "scroll":
                            page.mouse.wheel(0, 480 if a.direction == "down" else -480)
                    except Exception:  # noqa: BLE001 - the baseline does not recover, it moves on
                        pass
                    t1 = time.perf_counter()
                    bare.after_input()
                    t2 = time.perf_counter()
                    bare.screenshot(type="png", scale="css")
                    phase["act"] += t1 - t
                    phase["wait"] += t2 - t1
                    phase["screenshot"] += time.perf_counter() - t2
                    n += 1
                t = time.perf_counter()
                settled.append(bare.settled_shot_s(type="png", scale="css"))
                untimed += time.perf_counter() - t
                lost += bare.lost
                ctx.close()
            seconds = time.perf_counter() - t0 - untimed
        finally:
            browser.close()
    return {
        "steps": n,
        "seconds": seconds,
        "steps_per_s": n / seconds if seconds else 0.0,
        "phase_ms_per_step": {k: round(v * 1000 / max(1, n), 1) for k, v in phase.items()},
        "settled_shot_ms": round(statistics.median(settled) * 1000, 1) if settled else None,
        "lost_captures": lost,
    }


def measure(walks: int, walk_steps: int) -> dict:
    out = {}
    with tempfile.TemporaryDirectory(prefix="env_crawl-") as tmp:
        root = Path(tmp)
        for name, (start, var) in APPS.items():
            (root / name).mkdir()
            with start(root / name) as url:
                os.environ[var] = url
                environment = load_environment(ENVIRONMENTS / f"{name}.yaml")
                store = RawStore(root / name / "raw")
                t0 = time.perf_counter()
                tasks = crawl_environment(
                    environment, EnvCrawl(policy="oracle", retries=0), store=store, collection="tasks"
                )
                walk = crawl_environment(
                    environment,
                    EnvCrawl(policy="random_walk", episodes=walks, max_steps=walk_steps, retries=0),
                    store=store,
                    collection="walk",
                )
                seconds = time.perf_counter() - t0
                steps = tasks.steps + walk.steps
                bare = bare_loop(store, ["tasks", "walk"], environment.start_url)
                out[name] = {
                    "tasks": tasks.summary(),
                    "walk": walk.summary(),
                    "steps": steps,
                    "seconds": round(seconds, 2),
                    "steps_per_s": steps / seconds,
                    "bare": bare,
                }
    return out


def rows_from(m: dict) -> list[Row]:
    mach = machine_short()
    rows = []
    for name, r in m.items():
        t, w, b = r["tasks"], r["walk"], r["bare"]["phase_ms_per_step"]
        note = (
            f"{t['episodes']} task episodes, verified success {t['verified_success_rate']}; "
            f"{w['episodes']} walks, no-op rate {w['noop_rate']}; step P50/P95 "
            f"{t['step_ms_p50']}/{t['step_ms_p95']} ms (tasks), "
            f"{w['step_ms_p50']}/{w['step_ms_p95']} ms (walk); reset P50 "
            f"{t['reset_ms_p50']} ms; bare act {b['act']} + navigation wait {b['wait']} + "
            f"screenshot {b['screenshot']} ms (a settled page's {r['bare']['settled_shot_ms']}), "
            f"{r['bare']['lost_captures']} lost captures"
        )
        rows.append(
            check_baseline(
                Row(
                    "env_crawl",
                    f"{name} (environment file): recorded steps/s, 1 browser",
                    r["steps_per_s"],
                    r["bare"]["steps_per_s"],
                    "steps/s",
                    "bare Playwright click + PNG screenshot over the same steps",
                    note=note,
                    machine=mach,
                    extra={"tasks": t, "walk": w, "bare": r["bare"]},
                ),
                cost=b["screenshot"],
                reference=r["bare"]["settled_shot_ms"] or 0.0,
                what="the bare loop's screenshot, ms/step,",
            )
        )
    return rows


def run(mode: str) -> list[Row]:
    sizes = pick(mode, SIZES)
    return rows_from(measure(sizes["walks"], sizes["walk_steps"]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", default="quick", choices=list(SIZES))
    args = ap.parse_args()
    m = measure(**SIZES[args.mode])
    print(json.dumps(m, indent=2))
    for r in rows_from(m):
        print(f"{r.name}: {fmt_num(r.figure)} vs {fmt_num(r.baseline)} {r.unit} = {fmt_ratio(r.ratio)}")
        print(f"  {r.note}")


if __name__ == "__main__":
    main()
