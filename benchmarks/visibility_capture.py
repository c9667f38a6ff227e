"""The visibility record's cost: WebEnv.observe with and without hit-testing every element.

    .venv/bin/python benchmarks/visibility_capture.py [--mode quick]

Real sandbox screens (shop, mail, social, notes, settings; EN and ZH; one with a
pop-up) at 1280x800 in one Chromium. Each screen is observed with
`measure_visibility` on and off, interleaved, best of the rounds: the baseline is
the observation as it was before issue 18 (image wait and clickables scan,
screenshot, aria snapshot). Also the measuring evaluate alone, timed inside the
page (performance.now: the DOM walk and the hit tests, without the round trip),
and the elements measured per observation.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Row, machine_short, pick  # noqa: E402

SIZES = {
    "smoke": {"screens": 2, "rounds": 2},
    "quick": {"screens": 6, "rounds": 4},
    "full": {"screens": 10, "rounds": 6},
}

SCREENS = [
    ("shop", 0.0),
    ("mail", 0.0),
    ("social", 1.0),
    ("notes", 0.0),
    ("settings", 0.0),
    ("shop", 1.0),
    ("delivery", 0.0),
    ("social", 0.0),
    ("mail", 1.0),
    ("notes", 1.0),
]

_IN_PAGE_MS = """(a) => { const t = performance.now(); (%s)(a); return performance.now() - t; }"""


def measure(n_screens: int, rounds: int) -> dict:
    from crawlers.visibility import MEASURE_JS, boxed_nodes, measure_args
    from crawlers.web_env import WebEnv
    from sandbox.server import SandboxServer, start_url
    from schemas.a11y import parse_snapshot
    from schemas.records import DeviceProfile

    device = DeviceProfile(viewport_width=1280, viewport_height=800)
    best = {"with": [], "without": []}
    in_page, elements = [], []
    with SandboxServer() as srv, WebEnv.launch(headless=True) as env:
        for i, (app, rate) in enumerate(SCREENS[:n_screens]):
            lang = "zh" if i % 2 else "en"
            obs = env.reset(
                start_url(srv.url, sid=f"vis-{i}", app=app, lang=lang, seed=i, distraction_rate=rate), device
            )
            elements.append(len(obs.elements))
            times = {"with": [], "without": []}
            for _ in range(rounds):  # interleaved: load drifts hit both
                for key, on in (("with", True), ("without", False)):
                    env.measure_visibility = on
                    t = time.perf_counter()
                    env.observe()
                    times[key].append((time.perf_counter() - t) * 1000)
            for key in best:
                best[key].append(min(times[key]))
            env.measure_visibility = True
            args = measure_args(boxed_nodes(parse_snapshot(obs.a11y_tree)))
            in_page.append(min(env.page.evaluate(_IN_PAGE_MS % MEASURE_JS, args) for _ in range(rounds)))
    n = len(elements)
    return {
        "screens": n,
        "elements_per_observation": sum(elements) / n,
        "observe_ms_with": sum(best["with"]) / n,
        "observe_ms_without": sum(best["without"]) / n,
        "added_ms": (sum(best["with"]) - sum(best["without"])) / n,
        "in_page_ms": sum(in_page) / n,
    }


def rows_from(m: dict) -> list[Row]:
    mach = machine_short()
    note = (
        f"{m['elements_per_observation']:.0f} elements/observation; +{m['added_ms']:.1f} ms "
        f"per observation, {m['in_page_ms']:.1f} ms of it in the page"
    )
    return [
        Row(
            "visibility_capture",
            "observe with the visibility record, ms/observation",
            m["observe_ms_with"],
            m["observe_ms_without"],
            "ms/observation",
            "observe without it (before issue 18)",
            target="<= 1.25",
            note=note,
            machine=mach,
        )
    ]


def run(mode: str) -> list[Row]:
    s = pick(mode, SIZES)
    return rows_from(measure(s["screens"], s["rounds"]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", default="quick", choices=list(SIZES))
    s = SIZES[ap.parse_args().mode]
    m = measure(s["screens"], s["rounds"])
    print(json.dumps(m, indent=2))
    print(
        f"observe: {m['observe_ms_with']:.1f} ms with visibility / "
        f"{m['observe_ms_without']:.1f} ms without = "
        f"{m['observe_ms_with'] / m['observe_ms_without']:.2f}x"
    )


if __name__ == "__main__":
    main()
