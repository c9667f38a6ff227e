"""The random walk on a page that is not ours: listener-only clickables, a <select>,
images that load late, and targets that change nothing.

The page is served by a loopback http.server; /img?s=N answers a red PNG after
N seconds.
"""

from __future__ import annotations

import io
import threading
import time
from collections import Counter
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest
from PIL import Image

from crawlers.policies import RandomWalkPolicy, select_options
from crawlers.web_clickables import CLICKABLE_ROLE, clickable_elements, merge_clickables
from schemas.actions import Action, ActionType
from schemas.observation import Observation
from schemas.records import DeviceProfile, Element

pytestmark = pytest.mark.slow

DESKTOP = DeviceProfile(name="desktop", viewport_width=800, viewport_height=600)
PHONE = DeviceProfile(name="phone", viewport_width=390, viewport_height=844, pixel_ratio=2.0, is_mobile=True)

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Foreign</title>%(meta)s
<style>
  body { margin: 0; font: 16px sans-serif; }
  #span { position: absolute; left: 40px; top: 60px; padding: 6px; }
  #card { position: absolute; left: 300px; top: 60px; width: 160px; height: 50px;
          cursor: pointer; background: #eee; }
  #card span { display: block; }
  #size { position: absolute; left: 40px; top: 160px; }
  #hidden { display: none; }
  #status { position: absolute; left: 40px; top: 240px; }
  #pic { position: absolute; left: 500px; top: 300px; width: 100px; height: 100px; }
</style></head>
<body>
<span id="span">Open details</span>
<div id="card"><span>Pointer card</span></div>
<select id="size" aria-label="Size"><option>Small</option><option>Medium</option><option>Large</option></select>
<span id="hidden">Hidden handler</span>
<p id="status">idle</p>
%(img)s
<script>
  window.S = {span: 0, select: []};
  const status = document.getElementById('status');
  document.getElementById('span').addEventListener('click', () => {
    S.span++; status.textContent = 'span clicked ' + S.span; });
  document.getElementById('hidden').addEventListener('click', () => {});
  document.getElementById('size').addEventListener('change', e => {
    S.select.push(e.target.value); status.textContent = 'size ' + e.target.value; });
</script>
</body></html>"""

WIDE_META = ""  # no <meta name=viewport>: a phone lays the page out 980 px wide, zoomed out
META = '<meta name="viewport" content="width=device-width">'


def _png() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (100, 100), (255, 0, 0)).save(buf, "PNG")
    return buf.getvalue()


class _Handler(SimpleHTTPRequestHandler):
    stop: threading.Event

    def do_GET(self):
        u = urlparse(self.path)
        q = parse_qs(u.query)
        if u.path == "/img":
            self.stop.wait(float(q.get("s", ["0"])[0]))
            body, ctype = _png(), "image/png"
        else:
            img = q.get("img", [None])[0]
            body = (
                PAGE
                % {
                    "meta": WIDE_META if u.path == "/wide" else META,
                    "img": f'<img id="pic" src="/img?s={img}" alt="">' if img else "",
                }
            ).encode()
            ctype = "text/html; charset=utf-8"
        try:
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)
        except OSError:
            pass

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def site():
    stop = threading.Event()
    handler = type("H", (_Handler,), {"stop": stop})
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(handler, directory="/nonexistent"))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    stop.set()
    server.shutdown()
    server.server_close()


def _rect(env, selector):
    return env.page.evaluate(
        "s => { const r = document.querySelector(s).getBoundingClientRect();"
        " return [r.left, r.top, r.right, r.bottom]; }",
        selector,
    )


def _clickable(obs, name):
    found = [e for e in obs.elements if e.role == CLICKABLE_ROLE and e.name == name]
    assert found, f"no clickable {name!r} in {[(e.role, e.name) for e in obs.elements]}"
    return found[0]


# ---------------------------------------------------------------- the observation
def test_listener_and_pointer_elements_become_clickables_with_their_boxes(web_env, site):
    obs = web_env.reset(f"{site}/", DESKTOP)
    assert obs.last_action_error is None
    span = _clickable(obs, "Open details")
    x0, y0, x1, y1 = _rect(web_env, "#span")
    assert span.bbox == pytest.approx((x0 / 800, y0 / 600, x1 / 800, y1 / 600), abs=1e-3)
    card = _clickable(obs, "Pointer card")  # the outer pointer element, not its inner span
    x0, y0, x1, y1 = _rect(web_env, "#card")
    assert card.bbox == pytest.approx((x0 / 800, y0 / 600, x1 / 800, y1 / 600), abs=1e-3)
    names = [e.name for e in obs.elements if e.role == CLICKABLE_ROLE]
    assert names.count("Pointer card") == 1
    assert "Hidden handler" not in names  # display:none
    # The <select> is in the tree already: no clickable twin of it.
    assert not [e for e in obs.elements if e.role == CLICKABLE_ROLE and "Small" in e.name]
    # The aria elements come first, untouched.
    assert obs.elements[0].role != CLICKABLE_ROLE


def test_clickable_boxes_follow_the_zoom_of_a_zoomed_out_mobile_page(web_env, site):
    obs = web_env.reset(f"{site}/wide", PHONE)
    scale, ox, oy = web_env.page.evaluate(
        "[visualViewport.scale, visualViewport.offsetLeft, visualViewport.offsetTop]"
    )
    assert scale < 0.6
    span = _clickable(obs, "Open details")
    x0, y0, x1, y1 = _rect(web_env, "#span")
    want = (
        (x0 - ox) * scale / 390,
        (y0 - oy) * scale / 844,
        (x1 - ox) * scale / 390,
        (y1 - oy) * scale / 844,
    )
    assert span.bbox == pytest.approx(want, abs=2e-3)
    # Tapping its centre reaches the span.
    web_env.step(Action.tap(*span.centre()))
    assert web_env.page.evaluate("S.span") == 1


def test_merge_keeps_a_clickable_only_where_no_interactive_element_is():
    button = Element(role="button", name="Go", bbox=(0.1, 0.1, 0.2, 0.15))
    generic = Element(role="generic", name="Card", bbox=(0.5, 0.5, 0.7, 0.6))
    rows = [
        [80, 60, 80, 30, "Go"],  # the button's box: a duplicate
        [400, 300, 160, 60, "Card"],  # a generic's box: kept (generic says nothing)
        [10, 500, 50, 20, "Menu"],
        [10, 500, 50, 20, "Menu"],  # twice: once
        [0, 0, 0, 20, "Empty"],
    ]  # zero width: left out
    clickables = clickable_elements(rows, 800, 600)
    merged = merge_clickables([button, generic], clickables)
    assert [(e.role, e.name) for e in merged] == [
        ("button", "Go"),
        ("generic", "Card"),
        ("clickable", "Card"),
        ("clickable", "Menu"),
    ]


def test_the_screenshot_waits_for_a_slow_image(web_env, site):
    obs = web_env.reset(f"{site}/?img=0.8", DESKTOP)
    img = Image.open(io.BytesIO(obs.screenshot)).convert("RGB")
    assert img.getpixel((550, 350)) == (255, 0, 0)


def test_the_image_wait_is_bounded(web_env, site):
    web_env.reset(f"{site}/?img=8", DESKTOP)
    t0 = time.perf_counter()
    obs = web_env.observe()
    took = time.perf_counter() - t0
    assert obs.last_action_error is None
    assert 1.3 <= took < 4.0, took  # IMAGES_WAIT_CAP_S = 1.5, then the screenshot


def test_a_page_without_pending_images_is_not_slowed(web_env, site):
    """The observation's image wait finds no loading image on this page, so it resolves at
    once (what it waits on is counted, not timed: a timed assertion fails on a busy machine)."""
    from crawlers.web_settle import IMAGES_WAIT_JS

    web_env.reset(f"{site}/", DESKTOP)
    assert web_env.page.evaluate(IMAGES_WAIT_JS, 1500) == 0
    web_env.scan_clickables, web_env.image_wait_s = True, 1.5
    try:
        obs = web_env.observe()  # the scan and the (empty) wait, as a crawl observes
    finally:
        del web_env.scan_clickables, web_env.image_wait_s
    assert obs.elements


# ---------------------------------------------------------------- the walk
def test_select_options_come_from_the_tree(web_env, site):
    obs = web_env.reset(f"{site}/", DESKTOP)
    opts = select_options(obs)
    assert len(opts) == 1
    ((at, options),) = opts.items()
    assert obs.elements[at].role == "combobox"
    assert options == [("Small", True), ("Medium", False), ("Large", False)]


def test_a_walk_selects_options_taps_the_span_and_counts_noops(web_env, site):
    policy = RandomWalkPolicy(5, max_steps=40, p_back=0.0)
    obs = web_env.reset(f"{site}/", DESKTOP)
    actions, targets = [], []
    for _ in range(40):
        a = policy.act(obs)
        actions.append(a)
        targets.append(policy.last_target)
        if a.type == ActionType.DONE:
            break
        obs = web_env.step(a)
        assert obs.last_action_error is None, (a, obs.last_action_error)
    selects = [a for a in actions if a.type == ActionType.SELECT]
    assert selects and all(a.text in {"Small", "Medium", "Large"} for a in selects)
    assert web_env.page.evaluate("S.select")  # the page saw the change
    assert any(
        a.type == ActionType.TAP and t is not None and t.name == "Open details"
        for a, t in zip(actions, targets)
    )
    assert web_env.page.evaluate("S.span") >= 1
    assert policy.judged_steps == len(actions) - 1  # all but the final done
    assert 0 < policy.noop_steps < policy.judged_steps
    # The pointer card does nothing: once seen, it is remembered as a no-op.
    card = [t for a, t in zip(actions, targets) if t is not None and t.name == "Pointer card"]
    if card:
        assert policy.noops.get((f"{site}/", CLICKABLE_ROLE, "Pointer card"), 0) >= 1


# ---------------------------------------------------------------- the no-op memory (no browser)
def _obs(shot: bytes, *elements: Element, tree: str = "") -> Observation:
    return Observation(
        screenshot=shot,
        image_format="png",
        width=800,
        height=600,
        url="http://x/",
        a11y_tree=tree,
        elements=list(elements),
    )


def test_targets_that_change_nothing_are_weighted_down_and_counted():
    dead = Element(role="button", name="Dead", bbox=(0.1, 0.4, 0.3, 0.5))
    live = Element(role="button", name="Live", bbox=(0.6, 0.4, 0.8, 0.5))
    p = RandomWalkPolicy(1, max_steps=201, p_scroll=0.0, p_back=0.0)
    shot, n = b"0", 0
    taps = Counter()
    for _ in range(200):
        p.act(_obs(shot, dead, live))
        taps[p.last_target.name] += 1
        if p.last_target is live:  # the screen changes only after Live
            n += 1
            shot = str(n).encode()
    assert p.act(_obs(shot, dead, live)).type == ActionType.DONE  # judges the last tap
    assert p.judged_steps == 200 and p.noop_steps == taps["Dead"]
    assert p.noops[("http://x/", "button", "Dead")] == taps["Dead"]
    assert taps["Live"] > 4 * taps["Dead"]
    assert 0 < p.noop_rate < 0.25


def test_dismiss_names_are_generic_and_a_parameter():
    close = Element(role="button", name="关闭", bbox=(0.4, 0.4, 0.5, 0.5))
    other = Element(role="button", name="Buy", bbox=(0.6, 0.4, 0.7, 0.5))
    hits = sum(
        RandomWalkPolicy(s, max_steps=5).act(_obs(b"", other, close)).description == "Dismiss '关闭'"
        for s in range(40)
    )
    assert hits >= 25
    for name in ("Closet", "取消收藏", "Cancel order"):  # app controls, not dismissals
        control = Element(role="button", name=name, bbox=(0.4, 0.4, 0.5, 0.5))
        assert not any(
            RandomWalkPolicy(s, max_steps=5, p_scroll=0, p_back=0)
            .act(_obs(b"", other, control))
            .description.startswith("Dismiss")
            for s in range(20)
        )
    custom = RandomWalkPolicy(0, max_steps=5, dismiss_names={"Buy"})
    assert custom.act(_obs(b"", other, close)).description == "Dismiss 'Buy'"


def test_a_select_option_is_chosen_from_the_tree_for_a_select():
    tree = (
        '- combobox "Size" [ref=e2] [box=40,160,80,20]:\n'
        '  - option "Small" [selected] [box=0,0,0,0]\n'
        '  - option "Medium" [box=0,0,0,0]\n'
        '  - option "Gone" [disabled] [box=0,0,0,0]\n'
    )
    size = Element(role="combobox", name="Size", bbox=(0.05, 0.27, 0.15, 0.3))
    seen = set()
    for s in range(20):
        a = RandomWalkPolicy(s, max_steps=5, p_scroll=0, p_back=0).act(_obs(b"", size, tree=tree))
        assert a.type == ActionType.SELECT and (a.x, a.y) == pytest.approx(size.centre())
        seen.add(a.text)
    assert seen == {"Medium"}
    # A combobox without listed options (a search box) is tapped and typed into.
    search = Element(role="combobox", name="Search", bbox=(0.3, 0.1, 0.7, 0.15))
    p = RandomWalkPolicy(0, max_steps=5, p_scroll=0, p_back=0)
    assert p.act(_obs(b"", search)).type == ActionType.TAP
    assert p.act(_obs(b"", search)).type == ActionType.TYPE
