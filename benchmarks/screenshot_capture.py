"""Screenshot capture: PNG against JPEG, WebP and the DevTools protocol; storage per step.

    .venv/bin/python benchmarks/screenshot_capture.py [--mode quick]

Real sandbox pages (shop, mail, social, notes, settings; EN and ZH) at the
desktop profile (1280x800, pixel ratio 1), one Chromium, in the same run:

- the baseline: `page.screenshot(type="png", scale="css")`, what WebEnv does
  by default;
- Playwright JPEG (quality 80, WebEnv's `jpeg_quality`);
- the DevTools protocol's `Page.captureScreenshot` directly on a CDP session:
  PNG, PNG with `optimizeForSpeed` (a faster zlib level in Chromium), JPEG 80
  and WebP 80;

captures per second (best of the rounds, interleaved), kilobytes per
screenshot (what each step costs in the blob store), and what the stored
format costs downstream: `filters.phash.phash_bytes` images/s and how far the
lossy formats move the pHash (mean Hamming distance to the PNG's).
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Row, machine_short, pick  # noqa: E402

SIZES = {
    "smoke": {"pages": 2, "rounds": 1},
    "quick": {"pages": 6, "rounds": 2},
    "full": {"pages": 10, "rounds": 3},
}

PAGES = [
    ("shop", "/"),
    ("mail", "/"),
    ("social", "/"),
    ("shop", "/product/p1"),
    ("notes", "/"),
    ("settings", "/"),
    ("shop", "/cart"),
    ("mail", "/m/m1"),
]


def _methods(page, cdp) -> dict:
    def cdp_shot(params: dict):
        return lambda: base64.b64decode(cdp.send("Page.captureScreenshot", params)["data"])

    return {
        "pw_png": lambda: page.screenshot(type="png", scale="css"),
        "pw_jpeg": lambda: page.screenshot(type="jpeg", quality=80, scale="css"),
        "cdp_png": cdp_shot({"format": "png"}),
        "cdp_png_fast": cdp_shot({"format": "png", "optimizeForSpeed": True}),
        "cdp_jpeg": cdp_shot({"format": "jpeg", "quality": 80}),
        "cdp_webp": cdp_shot({"format": "webp", "quality": 80}),
    }


EXT = {
    "pw_png": "png",
    "pw_jpeg": "jpeg",
    "cdp_png": "png",
    "cdp_png_fast": "png",
    "cdp_jpeg": "jpeg",
    "cdp_webp": "webp",
}


def measure(n_pages: int, rounds: int) -> dict:
    from playwright.sync_api import sync_playwright

    from crawlers.browser import launch_chromium
    from sandbox.server import SandboxServer, start_url

    targets = [(app, path, lang) for lang in ("en", "zh") for app, path in PAGES][:n_pages]
    seconds: dict[str, float] = {}
    shots: dict[str, list[bytes]] = {}
    with SandboxServer() as srv, sync_playwright() as pw:
        browser = launch_chromium(pw)
        try:
            ctx = browser.new_context(viewport={"width": 1280, "height": 800})
            page = ctx.new_page()
            cdp = ctx.new_cdp_session(page)
            methods = _methods(page, cdp)
            for app, path, lang in targets:
                page.goto(start_url(srv.url, sid=f"shot-{app}-{lang}", app=app, lang=lang, seed=0))
                page.goto(f"{srv.url}/{app}{path}", wait_until="load")
                for name, fn in methods.items():
                    fn()  # warm: the first capture of a page pays for its first paint
                    for _ in range(rounds):  # interleaved so load drifts hit every method
                        t = time.perf_counter()
                        data = fn()
                        seconds.setdefault(name, []).append(time.perf_counter() - t)
                    shots.setdefault(name, []).append(data)
            ctx.close()
        finally:
            browser.close()
    return summarise(seconds, shots, len(targets), rounds)


def summarise(seconds: dict, shots: dict, n_pages: int, rounds: int) -> dict:
    from filters.phash import phash_bytes

    out: dict = {"pages": n_pages, "rounds": rounds, "methods": {}}
    png_hashes = [phash_bytes(b) for b in shots["pw_png"]]
    for name, ts in seconds.items():
        # best round per page, summed: captures/s on an idle moment of this machine
        per_page = [min(ts[i * rounds : (i + 1) * rounds]) for i in range(n_pages)]
        blobs = shots[name]
        t = time.perf_counter()
        hashes = [phash_bytes(b) for b in blobs]
        phash_s = time.perf_counter() - t
        dist = [bin(int(a) ^ int(b)).count("1") for a, b in zip(hashes, png_hashes)]
        out["methods"][name] = {
            "captures_per_s": n_pages / sum(per_page),
            "kb_per_shot": sum(len(b) for b in blobs) / len(blobs) / 1e3,
            "phash_images_per_s": len(blobs) / phash_s,
            "phash_distance_to_png": sum(dist) / len(dist),
            "format": EXT[name],
        }
    return out


LABELS = {
    "pw_jpeg": "Playwright JPEG q80",
    "cdp_png": "CDP PNG",
    "cdp_png_fast": "CDP PNG optimizeForSpeed",
    "cdp_jpeg": "CDP JPEG q80",
    "cdp_webp": "CDP WebP q80",
}


def rows_from(m: dict) -> list[Row]:
    mach = machine_short()
    meth = m["methods"]
    base = meth["pw_png"]
    rows = []
    for key, label in LABELS.items():
        v = meth[key]
        rows.append(
            Row(
                "screenshot_capture",
                f"capture: {label}, captures/s (1280x800)",
                v["captures_per_s"],
                base["captures_per_s"],
                "captures/s",
                "Playwright PNG, the default",
                note=f"{v['kb_per_shot']:.0f} KB/shot; pHash moves {v['phash_distance_to_png']:.1f} bits",
                machine=mach,
            )
        )
    for key in ("pw_jpeg", "cdp_webp"):
        v = meth[key]
        rows.append(
            Row(
                "screenshot_capture",
                f"storage per step: {LABELS[key]}",
                v["kb_per_shot"],
                base["kb_per_shot"],
                "KB/screenshot",
                "PNG",
                machine=mach,
            )
        )
    rows.append(
        Row(
            "screenshot_capture",
            "pHash of the stored screenshot: JPEG q80",
            meth["pw_jpeg"]["phash_images_per_s"],
            base["phash_images_per_s"],
            "images/s",
            "pHash of the PNG",
            machine=mach,
        )
    )
    return rows


def run(mode: str) -> list[Row]:
    s = pick(mode, SIZES)
    return rows_from(measure(s["pages"], s["rounds"]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", default="quick", choices=list(SIZES))
    args = ap.parse_args()
    s = SIZES[args.mode]
    m = measure(s["pages"], s["rounds"])
    print(json.dumps(m, indent=2))


if __name__ == "__main__":
    main()
