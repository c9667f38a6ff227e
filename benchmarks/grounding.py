"""Grounding synthesis throughput against the crawl's own step rate, in one run.

    .venv/bin/python benchmarks/grounding.py [smoke|quick|full]

1. crawl: the oracle on a few sandbox templates, EN and ZH (one headless Chromium,
   the sandbox on loopback): steps/s, every element's visibility measured at capture;
2. synthesise: write_grounding_set over that store (targets, expressions, dedup,
   balance, images resized to qwen2.5-vl's frame, shards, manifest): samples/s.

Rows: grounding samples/s against the crawl's steps/s (how many crawlers one
synthesis process keeps up with is the ratio divided by samples per step), and
samples per unique screen (the demo's bar is 15).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Row, machine_short, pick  # noqa: E402

from sandbox.crawl import SandboxCrawl, crawl  # noqa: E402
from sandbox.server import SandboxServer  # noqa: E402
from sandbox.tasks import TEMPLATES  # noqa: E402
from synthesis.grounding_writer import write_grounding_set  # noqa: E402
from trajforge.store.raw import RawStore  # noqa: E402

SIZES = {"smoke": {"templates": 2}, "quick": {"templates": 6}, "full": {"templates": 12}}


def measure(n_templates: int) -> dict:
    root = Path(tempfile.mkdtemp(prefix="bench-grounding-"))
    store = RawStore(root / "raw")
    ids = sorted(TEMPLATES)[:n_templates]
    tasks = [
        TEMPLATES[t].make_task(lang, 1)
        for t in ids
        for lang in ("en", "zh")
        if lang in TEMPLATES[t].languages
    ]
    with SandboxServer() as server:
        t0 = time.perf_counter()
        crawl(tasks, SandboxCrawl(server_url=server.url), store=store, collection="web")
        crawl_s = time.perf_counter() - t0
    steps = sum(1 for _ in store.iter_steps())
    r = write_grounding_set(store, root / "grounding")
    s = r["summary"]
    return {
        "steps": steps,
        "crawl_s": crawl_s,
        "steps_per_s": steps / crawl_s,
        "samples": s["samples"],
        "synth_s": r["seconds"],
        "samples_per_s": r["samples_per_s"],
        "per_screen": s["samples_per_unique_screen"],
        "unique_screens": s["unique_screens"],
        "languages": s["languages"],
        "dropped_share": s["dropped_share"],
        "sizes": s["balance"]["sizes_after"],
    }


def run(mode: str) -> list[Row]:
    m = measure(pick(mode, SIZES)["templates"])
    where = (
        f"{m['steps']} steps crawled in {m['crawl_s']:.1f} s, {m['samples']} samples "
        f"written in {m['synth_s']:.1f} s; {machine_short()}"
    )
    return [
        Row(
            "grounding",
            "Grounding synthesis: samples/s vs the crawl's steps/s",
            m["samples_per_s"],
            m["steps_per_s"],
            "per s",
            "oracle crawl of the same tasks, steps/s",
            note=where,
            extra=m,
        ),
        Row(
            "grounding",
            f"Grounding samples per unique screen ({m['unique_screens']} screens, "
            f"languages {m['languages']})",
            m["per_screen"],
            15.0,
            "samples",
            "the demo's bar: 15 per unique screen",
            target=">= 1.0",
            note=f"sizes {m['sizes']}",
        ),
    ]


if __name__ == "__main__":
    for r in run(sys.argv[1] if len(sys.argv) > 1 else "quick"):
        print(f"{r.name}: {r.figure:.2f} vs {r.baseline:.2f} {r.unit} (ratio {r.ratio:.1f}) {r.note}")
