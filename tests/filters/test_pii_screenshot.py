"""Scrub Steps recorded from real sandbox pages in Chromium: no planted value left, boxes blurred."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from filters.pii_audit import find_leaks
from filters.pii_blur import _pixel_box, scrub_step
from sandbox.planted_pii import planted_for
from sandbox.server import SandboxServer, start_url
from schemas.actions import Action
from schemas.records import DeviceProfile, Step

PAGES = [
    ("settings", "en", "/settings/account"),
    ("mail", "zh", "/mail/contacts"),
    ("notes", "en", "/notes/"),
]
SEED = 5


@pytest.fixture(scope="module")
def recorded():
    """(app, lang, Step, screenshot) for each page, observed the way the crawler does."""
    from crawlers.web_env import WebEnv

    out = []
    with SandboxServer() as server, WebEnv.launch(image_format="png") as env:
        device = DeviceProfile(viewport_width=1280, viewport_height=800)
        for app, lang, path in PAGES:
            sid = f"pii-{app}-{lang}"
            env.reset(start_url(server.url, sid=sid, app=app, lang=lang, seed=SEED), device)
            env.page.goto(server.url + path)
            obs = env.observe()
            target = next((e for e in obs.elements if e.role == "link"), None)
            step = Step(
                trajectory_id=sid,
                index=0,
                screenshot="",
                image_format=obs.image_format,
                width=obs.width,
                height=obs.height,
                url=obs.url,
                a11y_tree=obs.a11y_tree,
                elements=obs.elements,
                action=Action.tap(*target.centre()),
                target=target,
            )
            out.append((app, lang, step, obs.screenshot))
    return out


def _texts(step: Step) -> list[str]:
    texts = [step.url, step.a11y_tree, step.thought or "", step.target.name if step.target else ""]
    return texts + [e.name for e in step.elements] + [step.action.text or ""]


def _edges(a: np.ndarray) -> float:
    """Mean absolute neighbour difference: high on glyph strokes, ~0 on a smooth blur."""
    g = a.astype(np.float64).mean(axis=2)
    return float(np.abs(np.diff(g, axis=0)).mean() + np.abs(np.diff(g, axis=1)).mean())


def test_scrubbed_steps_keep_no_planted_value_and_blur_only_the_boxes(recorded):
    for app, lang, step, shot in recorded:
        planted = planted_for(app, lang, SEED)
        before = find_leaks(_texts(step), planted)
        assert before, f"{app}: the page shows no planted value, the test would prove nothing"
        res = scrub_step(step, shot)
        assert find_leaks(_texts(res.step), planted) == [], app
        assert res.image is not None and res.unboxed == 0, (app, res.records)
        on_screen = [r for r in res.records if r.get("box") and "note" not in r]
        assert on_screen and all(
            r["kind"] in {"email", "phone", "address", "cn_id", "bank_card"} for r in res.records
        )
        old = np.asarray(Image.open(io.BytesIO(shot)).convert("RGB"))
        new = np.asarray(Image.open(io.BytesIO(res.image)).convert("RGB"))
        assert old.shape == new.shape
        h, w = old.shape[:2]
        mask = np.zeros((h, w), bool)
        for r in on_screen:
            x0, y0, x1, y1 = _pixel_box(r["box"], w, h)
            mask[y0:y1, x0:x1] = True
            a, b = old[y0:y1, x0:x1], new[y0:y1, x0:x1]
            assert np.abs(a.astype(int) - b.astype(int)).mean() > 1.0, (app, r)
            # Text strokes are gone: the edge energy inside the box collapses.
            assert _edges(b) < 0.1 * _edges(a) + 0.5, (app, r, _edges(a), _edges(b))
        # PNG is lossless: every pixel outside the blurred boxes is untouched.
        assert (old[~mask] == new[~mask]).all(), app
        assert mask.mean() < 0.5, f"{app}: {mask.mean():.0%} of the screen blurred"
        print(
            f"{app}/{lang}: {len(res.records)} records, {len(on_screen)} boxes, "
            f"{mask.mean():.1%} of the screen blurred, "
            f"box sources {sorted({r.get('box_source') for r in on_screen})}"
        )


def test_scrub_step_is_idempotent_and_keeps_clean_steps_unchanged(recorded):
    app, lang, step, shot = recorded[0]
    once = scrub_step(step, shot)
    twice = scrub_step(once.step, once.image)
    assert twice.image is None and twice.step == once.step and twice.records == []
    clean = step.model_copy(
        update={
            "a11y_tree": '- button "Go" [ref=e1] [box=1,1,30,20]',
            "elements": [],
            "target": None,
            "url": "http://x/?q=shoes",
        }
    )
    res = scrub_step(clean, shot)
    assert res.image is None and res.records == [] and res.step == clean
