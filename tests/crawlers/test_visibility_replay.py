"""Issue 18's replay test: the visibility record made at capture time says where a click lands.

Real Chromium, the real sandbox (a screen with a pop-up open, a long page scrolled
half way, a plain inbox) and a third-party app (Datasette). Each screen is observed
through WebEnv; a seeded sample of its `visibility.is_target` elements is clicked at
the box centre with a capturing listener that records the event target (and stops
the event, so the page does not move on), and the target must be the intended element
or a descendant. The intended element is Playwright's own (`aria-ref=<ref>` of the
snapshot), not the box match the capture used, so the two are checked against each
other. Covered elements are clicked too: their clicks must land elsewhere.
"""

from __future__ import annotations

import random

import pytest

from crawlers.allowlist import Allowlist
from crawlers.visibility import boxed_nodes
from crawlers.web_env import WebEnv
from sandbox.server import SandboxServer, start_url
from schemas.a11y import parse_snapshot
from schemas.actions import Action
from schemas.records import DeviceProfile
from tests.thirdparty.apps import datasette

pytestmark = pytest.mark.slow

DEVICE = DeviceProfile(viewport_width=1280, viewport_height=800)
# Targets clicked per screen (40 in all): a pop-up leaves only its own few controls.
SAMPLE = {"shop_popup": 3, "shop_scrolled": 13, "mail": 12, "datasette": 12}

# Capture phase on window runs before any page handler; stopping the event there
# keeps links from navigating and buttons from acting, so one screen serves every click.
_CATCH_JS = """() => {
  if (window.__tfCatch) return;
  window.__tfCatch = true;
  const stop = e => { e.stopImmediatePropagation(); e.preventDefault(); };
  for (const t of ['pointerdown', 'mousedown', 'pointerup', 'mouseup'])
    window.addEventListener(t, stop, true);
  window.addEventListener('click', e => { window.__tfHit = e.composedPath()[0]; stop(e); }, true);
}"""
# Did the last click land on `el` or inside it (across shadow roots)?
_LANDED_JS = """(el) => {
  let n = window.__tfHit; window.__tfHit = null;
  for (; n; n = n.parentNode || n.host) if (n === el) return true;
  return false;
}"""


@pytest.fixture(scope="module")
def screens(tmp_path_factory):
    """(name, env page, observation) of each screen, observed one at a time by `observe`."""
    with (
        SandboxServer() as sandbox,
        datasette(tmp_path_factory.mktemp("ds")) as ds_url,
        WebEnv.launch(
            headless=True, step_timeout_s=10.0, request_filter=Allowlist([sandbox.url, ds_url])
        ) as env,
    ):

        def url(app, seed, distraction_rate=0.0):
            return start_url(
                sandbox.url,
                sid=f"vis-{app}-{seed}",
                app=app,
                lang="en",
                seed=seed,
                distraction_rate=distraction_rate,
            )

        def observe(name):
            if name == "shop_popup":  # the shop's home with a pop-up over it
                return env.reset(url("shop", 3, 1.0), DEVICE)
            if name == "shop_scrolled":  # a long page half way down: boxes above and below
                env.reset(url("shop", 3), DEVICE)
                return env.step(Action.scroll("down", 0.5, 0.5, amount=5))
            if name == "mail":
                return env.reset(url("mail", 3), DEVICE)
            if name == "datasette":
                return env.reset(f"{ds_url}/world/cities", DEVICE)
            raise KeyError(name)

        yield env, observe


def _with_refs(obs):
    """(element, ref) for the snapshot's elements (the clickables have no ref)."""
    nodes = boxed_nodes(parse_snapshot(obs.a11y_tree))
    return [(e, n.ref) for e, n in zip(obs.elements, nodes)]


def _click(page, element) -> None:
    cx, cy = element.centre()
    page.mouse.click(cx * DEVICE.viewport_width, cy * DEVICE.viewport_height)


def _landed_on(page, ref) -> bool:
    return page.locator(f"aria-ref={ref}").evaluate(_LANDED_JS)


def _figures(elements) -> dict:
    vis = [e.visibility for e in elements]
    on = [v for v in vis if v.on_screen]
    return {
        "elements": len(vis),
        "targets": sum(v.is_target for v in vis),
        "off_screen": len(vis) - len(on),
        "partly_visible": sum(v.visible_fraction < 0.99 for v in on),
        "occluded": sum((not v.centre_hit or v.modal_covered) and v.visible_fraction >= 0.99 for v in on),
        "modal_covered": sum(v.modal_covered for v in vis),
    }


SCREENS = tuple(SAMPLE)


def test_sampled_targets_are_hit_and_covered_elements_are_not(screens):
    env, observe = screens
    rng = random.Random(18)
    figures, missed, clicked, covered_clicked = {}, [], 0, 0
    for name in SCREENS:
        obs = observe(name)
        assert all(e.visibility is not None for e in obs.elements), name
        figures[name] = _figures(obs.elements)
        pairs = _with_refs(obs)
        targets = [(e, r) for e, r in pairs if r and e.visibility.is_target]
        covered = [(e, r) for e, r in pairs if r and e.visibility.on_screen and e.visibility.modal_covered]
        page = env.page
        page.evaluate(_CATCH_JS)
        for e, ref in rng.sample(targets, min(SAMPLE[name], len(targets))):
            _click(page, e)
            clicked += 1
            if not _landed_on(page, ref):
                missed.append((name, e.role, e.name, e.bbox))
        # Marked as covered: a click at the centre lands in the overlay, not on the element.
        for e, ref in rng.sample(covered, min(5, len(covered))):
            _click(page, e)
            covered_clicked += 1
            assert not _landed_on(page, ref), (name, e.role, e.name, "covered but hit")
    print("\nvisibility per screen:", figures)
    assert clicked == sum(SAMPLE.values()) and not missed, missed
    # The screens hold what the record must tell apart.
    assert figures["shop_popup"]["modal_covered"] > 10 and covered_clicked >= 5
    assert figures["shop_popup"]["targets"] >= 1  # the pop-up's own controls
    assert figures["shop_scrolled"]["off_screen"] > 10
    assert figures["shop_scrolled"]["partly_visible"] > 0
    assert figures["shop_scrolled"]["modal_covered"] == 0
    assert figures["mail"]["targets"] > 20 and figures["datasette"]["targets"] > 10


def test_clickables_carry_the_record_and_off_screen_ones_are_not_targets(screens):
    env, observe = screens
    obs = observe("shop_scrolled")
    for e in obs.elements:
        v = e.visibility
        x0, y0, x1, y1 = e.bbox
        inside = x0 >= 0 and y0 >= 0 and x1 <= 1 and y1 <= 1
        # The box against the viewport, whatever the page says.
        assert v.on_screen == (x1 > 0 and y1 > 0 and x0 < 1 and y0 < 1), e
        if inside:
            assert v.visible_fraction == pytest.approx(1.0, abs=0.01), e
        if v.is_target:
            assert v.on_screen and v.centre_hit
    # Scrolled half way: boxes above the viewport and below it, none of them targets.
    above = [e for e in obs.elements if e.bbox[3] <= 0]
    below = [e for e in obs.elements if e.bbox[1] >= 1]
    assert len(above) > 10 and len(below) > 10
    assert not any(e.visibility.on_screen or e.visibility.is_target for e in above + below)


_LISTENER_SPAN_JS = """() => {
  const s = document.createElement('span');
  s.id = 'tf-listener-span'; s.textContent = 'Listener only';
  s.style.cssText = 'position:absolute; left:600px; top:300px; padding:8px; background:#eee';
  s.addEventListener('click', () => {});
  document.body.appendChild(s);
}"""


def test_a_listener_only_clickable_carries_the_record_and_is_hit(screens):
    # The sandbox has no listener-only controls: add one to a screen, as a third-party
    # page would have it; the clickables scan measures it on the DOM node itself.
    env, observe = screens
    observe("mail")
    env.page.evaluate(_LISTENER_SPAN_JS)
    obs = env.observe()
    (span,) = [e for e in obs.elements if e.role == "clickable" and e.name == "Listener only"]
    assert span.visibility.is_target and span.visibility.hit_fraction == 1.0
    env.page.evaluate(_CATCH_JS)
    _click(env.page, span)
    assert env.page.evaluate("() => window.__tfHit && window.__tfHit.id") == "tf-listener-span"


def test_iframe_content_is_never_a_target(screens):
    # The aria snapshot gives an iframe's nodes boxes in the frame's own viewport and
    # the page's DOM walk cannot reach them: unresolved, so never a grounding target.
    env, observe = screens
    observe("mail")
    env.page.set_content(
        '<button>Top</button><iframe style="position:absolute;left:200px;top:100px;'
        'width:300px;height:200px;border:0" srcdoc="<button>Inner</button>"></iframe>'
    )
    env.page.frame_locator("iframe").get_by_role("button").wait_for()
    obs = env.observe()
    assert _one_named(obs, "Top").visibility.is_target
    inner = _one_named(obs, "Inner").visibility
    assert not inner.is_target and inner.hit_fraction == 0
    assert env.last_visibility_stats["unresolved"] == 1


def _one_named(obs, name):
    (e,) = [e for e in obs.elements if e.role == "button" and e.name == name]
    return e
