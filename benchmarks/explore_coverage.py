"""Exploration coverage: the frontier walk against the random walk, at the same episode budget.

    .venv/bin/python benchmarks/explore_coverage.py [--mode quick] [--seed 0]

In one run, for the sandbox's shop (its server in this process) and Datasette
(PyPI, started on loopback as the tests start it, through
examples/environments/datasette.yaml), each policy crawls the same number of
exploration episodes of the same length with the same seed into its own
collection (one headless Chromium each, the allowlist proxy); then one screen
graph (crawlers/screen_graph.py: screens by the environment's screen digest,
volatile text and layout masked) is built from each collection's recorded
steps by the same code. Figures: distinct screens, and distinct (screen,
element) pairs tried; each row is frontier over random_walk.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Row, fmt_num, fmt_ratio, machine_short, pick  # noqa: E402

from crawlers.crawl_driver import EnvCrawl  # noqa: E402
from crawlers.env_crawl import crawl_environment  # noqa: E402
from crawlers.screen_graph import ScreenGraph, absorb_store  # noqa: E402
from schemas.environment import load_environment  # noqa: E402
from trajforge.store.raw import RawStore  # noqa: E402

SIZES = {
    "smoke": {"episodes": 2, "max_steps": 5},
    "quick": {"episodes": 8, "max_steps": 10},
    "full": {"episodes": 16, "max_steps": 12},
}
POLICIES = ("random_walk", "frontier")


@contextmanager
def app_environment(name: str, folder: Path):
    """(the environment, served) for 'sandbox' (its shop) or 'datasette'."""
    if name == "sandbox":
        from sandbox.environment import sandbox_app_environment
        from sandbox.server import SandboxServer

        with SandboxServer() as server:
            yield sandbox_app_environment(server.url, "shop")
        return
    import os

    from tests.thirdparty.apps import ENVIRONMENTS, datasette

    with datasette(folder) as url:
        os.environ["DATASETTE_URL"] = url
        yield load_environment(ENVIRONMENTS / "datasette.yaml")


def coverage(store: RawStore, collection: str, volatile: list[str]) -> dict:
    graph = ScreenGraph(volatile)
    absorb_store(graph, store, collection)
    return graph.summary()


def measure_app(name: str, episodes: int, max_steps: int, seed: int) -> dict:
    with tempfile.TemporaryDirectory(prefix=f"explore-{name}-") as tmp:
        store = RawStore(Path(tmp) / "raw")
        out = {"app": name, "episodes": episodes, "max_steps": max_steps, "seed": seed}
        with app_environment(name, Path(tmp)) as environment:
            for policy in POLICIES:
                t0 = time.perf_counter()
                how = EnvCrawl(policy=policy, seed=seed, episodes=episodes, max_steps=max_steps, retries=1)
                stats = crawl_environment(environment, how, store=store, collection=policy)
                explore_episodes = stats.trajectories
                out[policy] = {
                    **coverage(store, policy, environment.volatile),
                    "recorded": explore_episodes,
                    "errors": stats.error,
                    "seconds": round(time.perf_counter() - t0, 1),
                }
        return out


def rows_from(results: list[dict]) -> list[Row]:
    rows = []
    for m in results:
        rw, fr = m["random_walk"], m["frontier"]
        note = (
            f"{m['episodes']} episodes x {m['max_steps']} steps, seed {m['seed']}; "
            f"random_walk {rw['seconds']} s, frontier {fr['seconds']} s"
        )
        for what, unit in (("screens", "screens"), ("pairs", "(screen, element) pairs")):
            rows.append(
                Row(
                    "explore_coverage",
                    f"{m['app']}: distinct {unit}, frontier vs random_walk",
                    fr[what],
                    rw[what],
                    unit,
                    "random_walk, same episodes, steps and seed",
                    target=">= 1.0",
                    note=note,
                    machine=machine_short(),
                    extra=m,
                )
            )
    return rows


def measure(episodes: int, max_steps: int, seed: int = 0, apps=("sandbox", "datasette")) -> list[dict]:
    return [measure_app(a, episodes, max_steps, seed) for a in apps]


def run(mode: str) -> list[Row]:
    return rows_from(measure(**pick(mode, SIZES)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", default="quick", choices=list(SIZES))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--apps", default="sandbox,datasette")
    args = ap.parse_args()
    results = measure(**SIZES[args.mode], seed=args.seed, apps=tuple(args.apps.split(",")))
    print(json.dumps(results, indent=2))
    for r in rows_from(results):
        print(f"{r.name}: {fmt_num(r.figure)} vs {fmt_num(r.baseline)} {r.unit} = {fmt_ratio(r.ratio)}")
        print(f"  {r.note}")


if __name__ == "__main__":
    main()
