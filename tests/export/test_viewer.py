"""The trajectory viewer: built from a real export, opened in real Chromium."""

from __future__ import annotations

import io
import json
import re
import urllib.request
from collections import Counter
from pathlib import Path

import pytest
from PIL import Image, ImageStat

from trajforge.publish.export import export_shards
from trajforge.publish.shards import ShardError, iter_samples, key_stem
from trajforge.read.viewer import build_site, serve
from trajforge.read.viewer.overlay import shapes

SPLITS = (("train", 0.6), ("val", 0.2), ("test", 0.2))
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
# Actions that must get a marker on the screenshot, and its SVG element.
MARKED = {
    "tap": "circle.point",
    "double_tap": "circle.point",
    "long_press": "circle.ring",
    "select": "circle.point",
    "swipe": "line.arrow",
    "scroll": "line.arrow",
    "type": "text.label",
}


@pytest.fixture(scope="module")
def shard_dir(built, tmp_path_factory):
    out = tmp_path_factory.mktemp("viewer") / "demo"
    export_shards(built.store, out, dataset="demo", splits=SPLITS, max_samples_per_shard=10)
    return out


@pytest.fixture(scope="module")
def site(shard_dir):
    return build_site(shard_dir)


def _by_trajectory(built):
    """{trajectory id: (trajectory, steps)} from the store the fixtures built."""
    return {tid: (built.trajectories[tid], built.steps[tid]) for tid in built.trajectories}


# -- the files -------------------------------------------------------------------------


def test_site_has_a_page_per_trajectory_and_each_screenshot_once(built, shard_dir, site):
    assert site == shard_dir / "viewer" / "index.html"
    root = site.parent
    pages = sorted(p.stem for p in (root / "t").glob("*.html"))
    assert pages == sorted(key_stem(t) for t in built.trajectories)
    index = site.read_text(encoding="utf-8")
    assert index.count('<tr class="traj"') == len(built.trajectories)
    assert f"{len(built.trajectories)} trajectories, {built.num_steps} steps" in index

    # Screenshots are content-addressed: two steps with the same image share one file.
    files = {p.read_bytes() for p in (root / "img").rglob("*.*")}
    assert files == set(built.images.values())
    assert len(list((root / "img").rglob("*.*"))) == len(set(built.images.values())) < built.num_steps

    for tid, (traj, steps) in _by_trajectory(built).items():
        page = (root / "t" / f"{key_stem(tid)}.html").read_text(encoding="utf-8")
        srcs = re.findall(r'<img src="\.\./(img/[^"]+)"', page)
        assert [(root / s).read_bytes() for s in srcs] == [built.images[(tid, s.index)] for s in steps]
        assert f'<span class="outcome o-{traj.outcome}" id="outcome">' in page
        for s in steps:
            if s.thought:
                assert s.thought in page
            if s.error:
                assert f"error: {s.error}" in page
        thumb = Image.open(root / "thumb" / f"{key_stem(tid)}.jpg")
        assert thumb.format == "JPEG" and max(thumb.size) <= 240


def test_index_counts_each_facet(built, site):
    index = site.read_text(encoding="utf-8")
    apps = Counter(t.app for t in built.trajectories.values())
    langs = Counter(t.task.language for t in built.trajectories.values())
    outcomes = Counter(t.outcome for t in built.trajectories.values())
    for counts in (apps, langs, outcomes):
        for value, n in counts.items():
            assert f'<option value="{value}">{value} ({n})</option>' in index


def test_limit_keeps_the_first_trajectories(shard_dir, tmp_path):
    index = build_site(shard_dir, tmp_path / "few", limit=3)
    assert len(list((index.parent / "t").glob("*.html"))) == 3
    assert "(first 3 only)" in index.read_text(encoding="utf-8")


def test_rebuild_replaces_the_old_site_but_not_a_foreign_folder(shard_dir, tmp_path):
    out = tmp_path / "site"
    build_site(shard_dir, out)
    stale = out / "t" / "gone.html"
    stale.write_text("old")
    build_site(shard_dir, out)
    assert not stale.exists() and (out / "index.html").is_file()
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    with pytest.raises(ShardError, match="not a trajforge viewer folder"):
        build_site(shard_dir, foreign)
    assert (foreign / "notes.txt").read_text() == "keep me"
    assert not list(tmp_path.glob(".*-build-*"))  # no staging left behind


# -- curated fields, escaping, bad shards (a hand-made shard folder) ----------------------


def _write_shards(src: Path, dst: Path, edit, reorder=False) -> Path:
    """Copy an export's samples into one shard with edited JSON, and a manifest for it."""
    import webdataset as wds

    samples = list(iter_samples(src))
    if reorder:  # move a trajectory's first step to the end: its samples are no longer together
        samples = samples[1:] + samples[:1]
    dst.mkdir()
    with wds.TarWriter(str(dst / "train-000000.tar"), encoder=False, mtime=0) as tar:
        for key, sample in samples:
            meta = edit(dict(sample["json"]))
            ext = next(e for e in sample if e != "json")
            tar.write({"__key__": key, ext: sample[ext], "json": json.dumps(meta).encode()})
    data = (dst / "train-000000.tar").read_bytes()
    manifest = {
        "dataset": "hand",
        "version": "x",
        "splits": {"train": {}},
        "shards": [
            {
                "name": "train-000000.tar",
                "split": "train",
                "samples": len(samples),
                "trajectories": 0,
                "bytes": len(data),
                "sha256": "",
            }
        ],
    }
    (dst / "manifest.json").write_text(json.dumps(manifest))
    return dst


def test_verdicts_and_reasons_are_shown_and_text_is_escaped(shard_dir, tmp_path):
    def edit(meta):
        meta["task"] = dict(meta["task"], instruction="<script>window.pwned=1</script>buy")
        meta["verdict"] = "drop"
        meta["reasons"] = ["loop", "no_op"]
        if meta["index"] == 1:
            meta["filter"] = "noop: screen unchanged"
        return meta

    index = build_site(_write_shards(shard_dir, tmp_path / "hand", edit))
    page = next((index.parent / "t").glob("*.html")).read_text(encoding="utf-8")
    assert "<script>window" not in page and "&lt;script&gt;window.pwned=1&lt;/script&gt;buy" in page
    assert "<script>window" not in index.read_text(encoding="utf-8")
    head = page.split('<ol class="steps">')[0]
    assert '<div class="verdict-box" id="verdict">' in head
    assert "<dt>verdict</dt><dd>drop</dd>" in head
    assert "<dt>reasons</dt><dd>loop, no_op</dd>" in head
    # A step's own verdict shows on that step only.
    step1 = page.split('id="s1"')[1].split("</li>")[0]
    assert "<dt>filter</dt><dd>noop: screen unchanged</dd>" in step1
    assert "<dt>filter</dt>" not in page.split('id="s1"')[0]


def test_a_trajectory_split_over_the_shards_is_an_error(shard_dir, tmp_path):
    bad = _write_shards(shard_dir, tmp_path / "bad", lambda m: m, reorder=True)
    where = r"train-000000\.tar, record \w+_s0000, field .json.trajectory_id.: .*non-consecutive"
    with pytest.raises(ShardError, match=where):
        build_site(bad)
    assert not (bad / "viewer").exists()


# -- overlay geometry ----------------------------------------------------------------------


def test_overlay_shapes_follow_the_normalised_coordinates():
    w, h = 200, 100
    tap = shapes(
        {"type": "tap", "x": 0.25, "y": 0.5},
        {"role": "button", "name": "Go", "bbox": [0.1, 0.4, 0.4, 0.6]},
        w,
        h,
    )
    assert [s["kind"] for s in tap] == ["box", "circle"]
    assert (tap[0]["x"], tap[0]["y"], tap[0]["w"], tap[0]["h"]) == pytest.approx((20, 40, 60, 20))
    assert (tap[1]["cx"], tap[1]["cy"]) == (50, 50)

    lp = shapes({"type": "long_press", "x": 0.6, "y": 0.6}, None, w, h)
    assert [s["kind"] for s in lp] == ["circle", "ring"] and lp[1]["r"] > lp[0]["r"]

    swipe = shapes({"type": "swipe", "x": 0.9, "y": 0.5, "x2": 0.1, "y2": 0.5}, None, w, h)
    assert [(s["x1"], s["y1"], s["x2"], s["y2"]) for s in swipe] == [(180, 50, 20, 50)]

    for direction, (dx, dy) in {"down": (0, 1), "up": (0, -1), "left": (-1, 0), "right": (1, 0)}.items():
        for x, y in ((0.5, 0.5), (0.0, 0.0), (1.0, 1.0)):
            (arrow,) = shapes({"type": "scroll", "direction": direction, "x": x, "y": y}, None, w, h)
            vx, vy = arrow["x2"] - arrow["x1"], arrow["y2"] - arrow["y1"]
            assert (vx * dx >= 0 and vy * dy >= 0) and (abs(vx) + abs(vy)) > 0
            assert 0 <= min(arrow["x1"], arrow["x2"]) and max(arrow["x1"], arrow["x2"]) <= w
            assert 0 <= min(arrow["y1"], arrow["y2"]) and max(arrow["y1"], arrow["y2"]) <= h

    typed = shapes({"type": "type", "text": "red shoes 红鞋", "x": 0.5, "y": 0.95}, None, w, h)
    label = typed[-1]
    assert label["kind"] == "label" and label["text"] == "⌨ red shoes 红鞋" and label["y"] < 95
    top = shapes({"type": "type", "text": "x" * 500}, None, w, h)
    assert top[0]["kind"] == "label" and len(top[0]["text"]) <= 80
    assert shapes({"type": "back"}, None, w, h)[0]["text"] == "back"
    # A box off the screen is clipped to it, not drawn outside.
    (box,) = shapes(None, {"role": "heading", "bbox": [0.0, 1.2, 1.0, 1.4]}, w, h)
    assert box["y"] == h and box["h"] == 0


# -- serving -------------------------------------------------------------------------------


def test_serve_answers_the_pages_and_images(site):
    server, url = serve(site.parent)
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            html = r.read().decode()
        assert r.status == 200 and 'id="trajs"' in html
        thumb = re.search(r'src="(thumb/[^"]+)"', html).group(1)
        with urllib.request.urlopen(url.replace("index.html", thumb), timeout=5) as r:
            assert Image.open(io.BytesIO(r.read())).format == "JPEG"
    finally:
        server.shutdown()
        server.server_close()


# -- in Chromium ---------------------------------------------------------------------------


def _not_blank(png: bytes, path: Path) -> None:
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(png)
    im = Image.open(io.BytesIO(png)).convert("RGB")
    assert im.width >= 800 and im.height >= 400 and len(png) > 20_000
    assert max(ImageStat.Stat(im).stddev) > 20  # not one flat colour
    assert len(im.getcolors(1 << 20) or range(1 << 20)) > 50


_LOAD_IMAGES = """async () => {
  const imgs = [...document.images];
  imgs.forEach(i => { i.loading = "eager"; });   // lazy images off screen load too
  await Promise.all(imgs.map(i => i.decode().catch(() => null)));
  return imgs.map(i => [i.getAttribute("src"), i.naturalWidth]);
}"""


# Per step: its action and, per selector, how many of its markers there are and the largest's size.
_MARKERS = """(selectors) => [...document.querySelectorAll("li.step")].map(li => {
  const marks = {}, size = {};
  for (const sel of [...selectors, "text.label", "rect.target"]) {
    const q = sel === "rect.target" ? "svg rect.target" : `svg ${sel}[data-action="${li.dataset.action}"]`;
    const els = [...li.querySelectorAll(q)];
    marks[sel] = els.length;
    size[sel] = Math.max(0, ...els.map(e => { const r = e.getBoundingClientRect(); return r.width + r.height; }));
  }
  return {action: li.dataset.action, marks, size};
})"""


@pytest.mark.slow
def test_viewer_in_chromium(built, site):
    from playwright.sync_api import sync_playwright

    from crawlers.browser import launch_chromium

    trajs = built.trajectories
    with sync_playwright() as pw:
        browser = launch_chromium(pw)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            errors = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(site.as_uri())
            loaded = page.evaluate(_LOAD_IMAGES)
            assert len(loaded) == len(trajs) and all(w > 0 for _, w in loaded), loaded

            rows = page.locator("#trajs tbody tr.traj")
            assert rows.count() == len(trajs)

            def visible() -> int:
                return page.locator("#trajs tbody tr.traj:visible").count()

            page.select_option('select[data-facet="app"]', "shop")
            n_shop = sum(t.app == "shop" for t in trajs.values())
            assert visible() == n_shop and page.inner_text("#shown") == f"{n_shop} of {len(trajs)} shown"
            page.select_option('select[data-facet="language"]', "zh")
            n_shop_zh = sum(t.app == "shop" and t.task.language == "zh" for t in trajs.values())
            assert 0 < visible() == n_shop_zh < n_shop
            page.select_option('select[data-facet="outcome"]', "failure")
            want = sum(
                t.app == "shop" and t.task.language == "zh" and t.outcome == "failure" for t in trajs.values()
            )
            assert visible() == want
            page.click("#reset")
            assert visible() == len(trajs)
            page.select_option('select[data-facet="outcome"]', "failure")
            # The filter lives in the URL: a reload keeps it.
            page.reload()
            assert visible() == sum(t.outcome == "failure" for t in trajs.values())
            page.click("#reset")
            _not_blank(page.screenshot(full_page=True), ARTIFACTS / "viewer-index.png")

            # Every trajectory page: screenshots load, every step has its marker.
            best = None
            for tid, steps in built.steps.items():
                page.goto((site.parent / "t" / f"{key_stem(tid)}.html").as_uri())
                loaded = page.evaluate(_LOAD_IMAGES)
                assert len(loaded) == len(steps) and all(w > 0 for _, w in loaded), (tid, loaded)
                drawn = page.evaluate(_MARKERS, list(MARKED.values()))
                assert [d["action"] for d in drawn] == [s.action.type.value for s in steps]
                for s, d in zip(steps, drawn):
                    kind = s.action.type.value
                    if kind in MARKED:
                        assert d["marks"][MARKED[kind]] >= 1, (tid, s.index, kind, d)
                        assert d["size"][MARKED[kind]] > 0, (tid, s.index, kind, d)
                    else:  # point-less actions are named in a label on the screenshot
                        assert d["marks"]["text.label"] == 1, (tid, s.index, kind, d)
                    assert d["marks"]["rect.target"] == (s.target is not None)
                kinds = {s.action.type.value for s in steps} & MARKED.keys()
                if best is None or len(kinds) > best[1]:
                    best = (tid, len(kinds))

            # The tap marker sits where the action says, on the rendered screenshot.
            tid, i = next(
                (t, s.index) for t, ss in built.steps.items() for s in ss if s.action.type.value == "tap"
            )
            page.goto((site.parent / "t" / f"{key_stem(tid)}.html").as_uri())
            page.evaluate(_LOAD_IMAGES)
            img = page.locator(f"li.step#s{i} img").bounding_box()
            dot = page.locator(f"li.step#s{i} svg circle.point").bounding_box()
            step = built.steps[tid][i]
            assert dot["x"] + dot["width"] / 2 == pytest.approx(
                img["x"] + step.action.x * img["width"], abs=2
            )
            assert dot["y"] + dot["height"] / 2 == pytest.approx(
                img["y"] + step.action.y * img["height"], abs=2
            )

            page.goto((site.parent / "t" / f"{key_stem(best[0])}.html").as_uri())
            page.evaluate(_LOAD_IMAGES)
            _not_blank(page.screenshot(full_page=True), ARTIFACTS / "viewer-trajectory.png")
            assert not errors
        finally:
            browser.close()
